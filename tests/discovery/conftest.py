"""A wool namespace of its own for each test of the discovery part."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.wool_namespaces import fresh_namespace


@pytest.fixture
def namespace() -> Iterator[str]:
    """A namespace no other test uses; its leftovers in /tmp are removed afterwards."""
    with fresh_namespace() as name:
        yield name
