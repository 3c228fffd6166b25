"""The retired workers' series: what it shows, and its bounds in count and time."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from wool_idle.autoscaler.retired import RETIRED_LIMIT, RETIRED_MAX_AGE, RetiredWorkers
from wool_idle.autoscaler.state_file import Retired

NAME = "wool_autoscaler_retired_timestamp_seconds"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def shown(retired: RetiredWorkers) -> dict[str, tuple[float, dict[str, str]]]:
    """The series' samples: worker -> (value, other labels)."""
    registry = CollectorRegistry()
    registry.register(retired)
    (family,) = [f for f in registry.collect() if f.name == NAME]
    return {
        s.labels["worker"]: (s.value, {k: v for k, v in s.labels.items() if k != "worker"})
        for s in family.samples
    }


class TestRetiredWorkers:
    def test_mark_shows_the_stop_time_and_group(self) -> None:
        """Given group-by labels, when a worker is marked, then its series carries the
        stop time and its group labels (a missing one empty; `worker` never twice)."""
        # Arrange
        clock = Clock()
        retired = RetiredWorkers(("wool_tags", "worker", "zone"), clock, clock)
        # Act
        retired.mark("a:1", {"wool_tags": "hot"})
        # Assert
        assert shown(retired) == {"a:1": (clock.now, {"wool_tags": "hot", "zone": ""})}

    def test_collect_forgets_marks_older_than_a_day(self) -> None:
        """Given two marks a day apart, when collected past a day after the first, then
        only the second is shown."""
        # Arrange
        clock = Clock()
        retired = RetiredWorkers((), clock, clock)
        retired.mark("old:1", {})
        clock.now += RETIRED_MAX_AGE
        retired.mark("new:1", {})
        # Act
        clock.now += 1.0
        # Assert
        assert list(shown(retired)) == ["new:1"]
        assert "old:1" not in retired

    def test_mark_keeps_the_most_recent(self) -> None:
        """Given one more mark than the limit, with the first worker marked again last,
        then the limit holds and the oldest mark (the second worker's) went first."""
        # Arrange
        clock = Clock()
        retired = RetiredWorkers((), clock, clock)
        # Act
        for i in range(RETIRED_LIMIT):
            clock.now += 1
            retired.mark(f"w{i}:1", {})
        retired.mark("w0:1", {})
        retired.mark("extra:1", {})
        # Assert
        workers = shown(retired)
        assert len(workers) == RETIRED_LIMIT
        assert "w1:1" not in workers and {"w0:1", "w2:1", "extra:1"} <= set(workers)

    def test_forget_ends_the_mark(self) -> None:
        """Given a marked worker, when forgotten, then it is no longer shown; forgetting
        an unknown worker is harmless."""
        # Arrange
        retired = RetiredWorkers()
        retired.mark("a:1", {})
        # Act
        retired.forget("a:1")
        retired.forget("b:1")
        # Assert
        assert shown(retired) == {}

    def test_marks_gives_each_shown_mark_with_its_group(self) -> None:
        """Given a mark a day old and a newer one with group labels, when the marks are
        taken (for the state file), then only the newer is given, with its stop time
        and its group labels by name."""
        # Arrange
        clock = Clock()
        retired = RetiredWorkers(("wool_tags",), clock, clock)
        retired.mark("old:1", {})
        clock.now += RETIRED_MAX_AGE
        retired.mark("new:1", {"wool_tags": "hot"})
        clock.now += 1.0
        # Act
        marks = retired.marks()
        # Assert
        assert marks == {"new:1": Retired(clock.now - 1.0, {"wool_tags": "hot"})}

    def test_restore_shows_the_marks_of_an_earlier_process(self) -> None:
        """Given the marks of an earlier process, when a new one restores them under its
        group-by labels, then each is shown with its own stop time and the values of
        those labels (one it lacks empty, one no longer grouped by left out)."""
        # Arrange
        clock = Clock()
        retired = RetiredWorkers(("wool_tags", "zone"), clock, clock)
        earlier = {"a:1": Retired(clock.now - 60.5, {"wool_tags": "hot", "shard": "2"})}
        # Act
        retired.restore(earlier)
        # Assert
        assert shown(retired) == {"a:1": (clock.now - 60.5, {"wool_tags": "hot", "zone": ""})}

    def test_restore_keeps_the_bounds(self) -> None:
        """Given more marks than the limit within a day, one older than a day and one
        from after now (this host's clock set back), when restored, then the limit holds,
        the old one and the oldest within the day are left out, the one from the future
        counts from now, and a new mark then ends the oldest one restored first."""
        # Arrange
        clock = Clock()
        retired = RetiredWorkers((), clock, clock)
        earlier = {f"w{i}:1": Retired(clock.now - 1000.0 + i, {}) for i in range(RETIRED_LIMIT)}
        earlier["old:1"] = Retired(clock.now - RETIRED_MAX_AGE - 1.0, {})
        earlier["future:1"] = Retired(clock.now + 3600.0, {})
        # Act
        retired.restore(earlier)
        full = shown(retired)
        retired.mark("new:1", {})
        # Assert
        assert len(full) == RETIRED_LIMIT
        assert "old:1" not in full and "w0:1" not in full and "w1:1" in full
        assert full["future:1"] == (clock.now, {})
        assert len(retired) == RETIRED_LIMIT and "w1:1" not in retired and "new:1" in retired

    @pytest.mark.parametrize("step", [2 * 86400.0, -2 * 86400.0], ids=["forward", "back"])
    def test_collect_keeps_a_mark_a_day_across_a_wall_clock_step(self, step: float) -> None:
        """Given a worker marked, then the wall clock stepped by two days, forward or
        back (NTP, ``date -s``, a VM resumed), a minute later, when collected then, a
        day after the stop and just past it, then the mark is shown moved with the
        clock (its age kept) until a day after the stop by the monotonic clock, and
        ends then: never at once (a retired worker shown down), never a day late."""
        # Arrange
        wall, monotonic = Clock(), Clock()
        retired = RetiredWorkers((), wall, monotonic)
        retired.mark("a:1", {})
        stopped = wall.now

        def elapse(seconds: float) -> dict[str, tuple[float, dict[str, str]]]:
            wall.now += seconds
            monotonic.now += seconds
            return shown(retired)

        # Act
        wall.now += step
        stepped = elapse(60.0)
        last = elapse(RETIRED_MAX_AGE - 61.0)
        over = elapse(2.0)
        # Assert
        assert stepped == last == {"a:1": (stopped + step, {})}
        assert over == {}
