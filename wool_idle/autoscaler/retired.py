"""The workers this autoscaler stopped, as ``wool_autoscaler_retired_timestamp_seconds``.

A stopped worker's discovery record may stay (a wool pool does not unpublish
a worker someone else stopped) and the exporter then reports it down; this
series tells the alert rules and the dashboard it was retired on purpose.
Bounded in count and in time: the ``RETIRED_LIMIT`` most recent stops within
``RETIRED_MAX_AGE``. A worker's mark ends early when the source reports it up
once it is no longer retiring (past ``PolicySettings.retiring_for``: a new worker
at that address). The marks live in this process; given ``--state-file`` they are
also kept in it (``marks``) and taken up at start (``restore``), so the series is
shown again after a restart; without one, a restart empties it. A mark is in Unix
time, moved with each step of the wall clock (``WallClock``): it ends
``RETIRED_MAX_AGE`` after its stop, however the clock was set meanwhile (a day
forward ended every mark at once: retired workers shown down). Safe to collect
from another thread than the one marking.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.state_file import Retired
from wool_idle.autoscaler.wall_clock import WallClock
from wool_idle.contract import RETIRED_TIMESTAMP, WORKER_LABEL

RETIRED_LIMIT: Final = 1000
"""Most retired workers shown; the oldest mark goes first."""
RETIRED_MAX_AGE: Final = 86400.0
"""Seconds a retired worker is shown after its stop (24 h)."""


class RetiredWorkers(Collector):
    """The marks, newest last, and their series; ``group_by`` labels the series;
    ``clock`` is the wall clock, ``monotonic`` the clock its steps are told against."""

    def __init__(
        self,
        group_by: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.group_by = tuple(name for name in group_by if name != WORKER_LABEL)
        self.clock = clock
        self._wall = WallClock(clock, monotonic)
        self._marks: OrderedDict[str, tuple[float, tuple[str, ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def mark(self, worker: str, labels: Mapping[str, str]) -> None:
        """Note that ``worker`` (with group ``labels``) was stopped just now."""
        group = tuple(labels.get(name, "") for name in self.group_by)
        with self._lock:
            self._follow_the_wall_clock()
            self._marks.pop(worker, None)
            self._marks[worker] = (self.clock(), group)
            while len(self._marks) > RETIRED_LIMIT:
                self._marks.popitem(last=False)

    def marks(self) -> dict[str, Retired]:
        """The marks shown (those past ``RETIRED_MAX_AGE`` ended first), by worker."""
        with self._lock:
            self._expire()
            return {
                worker: Retired(stopped, dict(zip(self.group_by, group, strict=True)))
                for worker, (stopped, group) in self._marks.items()
            }

    def restore(self, marks: Mapping[str, Retired]) -> None:
        """Take up the ``marks`` of an earlier process, before any mark is made: those
        past ``RETIRED_MAX_AGE`` or beyond the ``RETIRED_LIMIT`` most recent end, and
        one from after now (this host's clock was set back) counts from now."""
        with self._lock:
            self._follow_the_wall_clock()  # they are in the wall clock of now
            now = self.clock()
            restored = sorted(
                (min(mark.at, now), worker, tuple(mark.labels.get(n, "") for n in self.group_by))
                for worker, mark in marks.items()
            )
            for stopped, worker, group in restored[-RETIRED_LIMIT:]:
                if stopped >= now - RETIRED_MAX_AGE:
                    self._marks[worker] = (stopped, group)

    def forget(self, worker: str) -> None:
        """End ``worker``'s mark (a new worker answers at its address)."""
        with self._lock:
            self._marks.pop(worker, None)

    def forget_replaced(self, readings: Iterable[Reading], retiring: Container[str]) -> None:
        """End the mark of each worker read up (and not conflicting) that is no longer
        ``retiring``: a new worker answers at its address."""
        if not self._marks:
            return
        for reading in readings:  # per reading: the lock is taken only for a marked worker
            worker = reading.worker
            if (
                worker in self._marks
                and reading.up
                and not reading.conflicting
                and worker not in retiring
            ):
                self.forget(worker)

    def __contains__(self, worker: object) -> bool:
        return worker in self._marks

    def __len__(self) -> int:
        return len(self._marks)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            self._expire()
            marks = list(self._marks.items())
        family = GaugeMetricFamily(
            RETIRED_TIMESTAMP,
            "Unix time at which the autoscaler stopped the worker "
            f"(the last {RETIRED_LIMIT} within {RETIRED_MAX_AGE / 3600:g}h).",
            labels=[WORKER_LABEL, *self.group_by],
        )
        for worker, (stopped, group) in marks:
            family.add_metric([worker, *group], stopped)
        yield family

    def _expire(self) -> None:
        """End the marks past ``RETIRED_MAX_AGE`` (the lock held)."""
        self._follow_the_wall_clock()
        oldest = self.clock() - RETIRED_MAX_AGE
        while self._marks and next(iter(self._marks.values()))[0] < oldest:
            self._marks.popitem(last=False)

    def _follow_the_wall_clock(self) -> None:
        """Move every mark by the step the wall clock took since last followed, if it
        did (the lock held): their order and ages stay as they were."""
        if step := self._wall.follow():
            self._marks = OrderedDict((w, (t + step, g)) for w, (t, g) in self._marks.items())
