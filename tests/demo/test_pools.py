"""Real wool pools run by ``wool_idle.demo.pools`` (the demo's and the e2e tests' fleet)."""

from __future__ import annotations

import pytest
from support.wool_pools import WoolFleet

pytestmark = pytest.mark.e2e


class TestPools:
    async def test_client_on_a_tag_completes_every_task(self) -> None:
        """Given a held namespace with a hot pool of 2 and a cold pool of 1, when a
        client dispatches to the hot tag, then every task completes."""
        # Arrange
        async with WoolFleet() as fleet:
            await fleet.hold()
            await fleet.serve("hot", 2)
            await fleet.serve("cold", 1)
            # Act
            client = await fleet.client("hot", seconds=2.0, interval=0.1)
            counts = await fleet.counts(client)
        # Assert
        assert counts["failed"] == 0
        assert counts["completed"] == counts["submitted"] > 0
