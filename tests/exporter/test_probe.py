"""The prober's persistent connections over real gRPC servers."""

from __future__ import annotations

import time

from wool_idle.exporter.probe import CHANNEL_OPTIONS, Prober
from wool_idle.exporter.targets import Target
from wool_idle.worker.channels import ChannelKey, pool


def users(address: str) -> int:
    return pool().users(ChannelKey(address, None, CHANNEL_OPTIONS))


class TestProber:
    async def test_sync_closes_removed_targets_keeps_recent_adhoc(self, scripted) -> None:
        """Given connections to two configured workers and one probed ad hoc, when the
        set shrinks to one, then the removed worker's channel closes at once and the
        ad-hoc one stays open; closing the prober closes everything."""
        # Arrange
        a, b, c = [await scripted(seconds=1.0) for _ in range(3)]
        prober = Prober(tls=None, timeout=5.0, concurrency=4)
        await prober.fan_out([Target(a.address), Target(b.address)], 5.0)
        await prober.probe_adhoc(Target(c.address), time.monotonic() + 5.0)
        opened = [users(w.address) for w in (a, b, c)]
        # Act
        await prober.fan_out([Target(a.address)], 5.0)
        after_shrink = [users(w.address) for w in (a, b, c)]
        await prober.close()
        # Assert
        assert opened == [1, 1, 1]
        assert after_shrink == [1, 0, 1]
        assert [users(w.address) for w in (a, b, c)] == [0, 0, 0]
        assert (a.idle_calls, b.idle_calls, c.idle_calls) == (2, 1, 1)

    async def test_fan_out_reuses_one_channel_per_target(self, scripted) -> None:
        """Given a worker, when fanned out over three times, then one channel serves all."""
        # Arrange
        worker = await scripted(seconds=1.0)
        prober = Prober(tls=None, timeout=5.0, concurrency=4)
        # Act
        for _ in range(3):
            await prober.fan_out([Target(worker.address)], 5.0)
        # Assert
        assert users(worker.address) == 1
        assert len(set(worker.peers)) == 1
        await prober.close()
