"""A wool namespace of its own for each test of the discovery part, or one held with
a pool of real wool workers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.wool_namespaces import fresh_namespace
from support.wool_pools import WoolFleet


@pytest.fixture
def namespace() -> Iterator[str]:
    """A namespace no other test uses; its leftovers in /tmp are removed afterwards."""
    with fresh_namespace() as name:
        yield name


@pytest.fixture
async def pools():
    """A held namespace with a hot pool of 2 wool workers."""
    async with WoolFleet() as fleet:
        await fleet.hold()
        await fleet.serve("hot", 2)
        yield fleet
