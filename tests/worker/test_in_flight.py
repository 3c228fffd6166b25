"""InFlightTasks: the idle clock on the in-flight set's empty edges."""

from __future__ import annotations

import asyncio
import time

import pytest

from wool_idle.worker.in_flight import InFlightTasks

HOUR = 3600.0


class TestInFlightTasks:
    @pytest.mark.parametrize("emptied", ["at_startup", "after_a_task"])
    async def test_idle_seconds_wall_clock_stepped_back_keeps_counting(
        self, monkeypatch: pytest.MonkeyPatch, emptied: str
    ) -> None:
        """Given an in-flight set that emptied (at construction, or when its one task
        ended), when the wall clock is then stepped an hour back (an NTP step, an
        operator's date), then idle_seconds keeps counting up from a positive value: it
        is measured on the monotonic clock (on the wall clock it read 0 for an hour,
        and a step forward an hour too many)."""
        # Arrange
        tasks = InFlightTasks()
        if emptied == "after_a_task":
            task = asyncio.ensure_future(asyncio.sleep(0))
            tasks.track(task)
            await task
            await asyncio.sleep(0)  # the done callback runs: the set is empty again
        await asyncio.sleep(0.01)
        wall = time.time
        monkeypatch.setattr(time, "time", lambda: wall() - HOUR)
        # Act
        first = tasks.idle_seconds()
        await asyncio.sleep(0.01)
        second = tasks.idle_seconds()
        # Assert
        assert len(tasks) == 0
        assert 0.0 < first <= second
