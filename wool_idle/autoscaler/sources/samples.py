"""The samples of one read, by series and worker, before they become readings.

Duplicate series of one worker (the same series name and ``worker`` label,
other labels differing) collapse into one when their values are equal. When
they differ, the worker's reading is ``conflicting``: it is never stopped, and
no single series is trusted over another.
"""

from __future__ import annotations

import math

from wool_idle.autoscaler.policy import Reading
from wool_idle.contract import IDLE_SECONDS, IDLE_SUPPORTED, UP, valid_idle

Values = dict[str, float | None]
"""Sample values of one series, by worker (None: not a number)."""


class SamplesByWorker:
    """The policy's series (``by_series``) and sample ages (``ages``) of one read."""

    def __init__(self) -> None:
        self.by_series: dict[str, Values] = {IDLE_SECONDS: {}, UP: {}, IDLE_SUPPORTED: {}}
        self.ages: Values = {}
        self.conflicting: set[str] = set()

    def add(self, values: Values, worker: str, value: float | None) -> None:
        """Record ``worker``'s ``value`` in ``values``; a different value already there
        makes the worker conflicting."""
        seen = values.setdefault(worker, value)
        if seen is not value and not _same(seen, value):
            self.conflicting.add(worker)

    def readings(self, *, default_age: float) -> list[Reading]:
        """One reading per worker seen in any of the policy's series.

        ``default_age`` is the age of a worker with no entry in ``ages``: 0 for an
        exporter's answer (read just now), ``math.inf`` where unknown means stale.
        """
        idle, up, supported = (self.by_series[n] for n in (IDLE_SECONDS, UP, IDLE_SUPPORTED))
        ages, conflicting = self.ages, self.conflicting
        readings = []
        for worker in dict.fromkeys([*up, *supported, *idle]):
            value = idle.get(worker)
            age = ages.get(worker, default_age)
            readings.append(
                Reading(
                    worker,
                    value if valid_idle(value) else None,
                    up=up.get(worker) == 1.0,
                    supported=supported.get(worker) == 1.0,
                    age=math.inf if age is None else age,
                    conflicting=worker in conflicting,
                )
            )
        return readings


def _same(first: float | None, second: float | None) -> bool:
    """Equal values, NaN counting as equal to NaN."""
    return first == second or (first != first and second != second)
