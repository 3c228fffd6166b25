"""The samples of one read, by series and worker, before they become readings.

Duplicate series of one worker (the same series name and ``worker`` label,
other labels differing) collapse into one when their values are equal. When
they differ, the worker's reading is ``conflicting``: it is never stopped, and
no single series is trusted over another. The same holds for the worker's
group: the values of the ``group_by`` labels (a missing label is the empty
value) must be the same on every series of the worker, or it is conflicting.
Not so its wool namespaces (``wool_namespace``): every one its series name is kept,
for its drop once stopped (``Reading.namespaces``); they decide no stop.
Sample ages are the exception (``keep_oldest``): duplicates scraped at
different moments (two scrape jobs of one exporter) always differ in age, so
the oldest counts, an unknown or negative one oldest of all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from wool_idle.autoscaler.policy import Reading
from wool_idle.contract import (
    IDLE_SECONDS,
    IDLE_SUPPORTED,
    NAMESPACE_LABEL,
    UP,
    encodes_as_utf8,
    valid_idle,
)

NO_NAMESPACES: frozenset[str] = frozenset()
"""The namespaces of a worker whose series name none: one object for them all (a new
empty frozenset per reading is an object more for the collector to track, per worker
and cycle)."""
Values = dict[str, float | None]
"""Sample values of one series, by worker (None: not a number)."""


class SamplesByWorker:
    """The policy's series (``by_series``) and sample ages (``ages``) of one read,
    each worker's group (``groups``: the values of ``group_by``) and the wool
    namespaces its series name (``namespaces``)."""

    def __init__(self, group_by: Sequence[str] = ()) -> None:
        self.by_series: dict[str, Values] = {IDLE_SECONDS: {}, UP: {}, IDLE_SUPPORTED: {}}
        self.ages: Values = {}
        self.conflicting: set[str] = set()
        self.group_by = tuple(group_by)
        self.groups: dict[str, tuple[str, ...]] = {}
        self.namespaces: dict[str, set[str]] = {}

    def name_namespace(self, worker: str, labels: Mapping[str, object]) -> None:
        """Record the wool namespace a series of ``worker`` names in its ``labels``, if
        any (a label that is empty or not a string names none)."""
        namespace = labels.get(NAMESPACE_LABEL)
        if namespace and isinstance(namespace, str):
            self.namespaces.setdefault(worker, set()).add(namespace)

    def add(self, values: Values, worker: str, value: float | None) -> None:
        """Record ``worker``'s ``value`` in ``values``; a different value already there
        makes the worker conflicting."""
        seen = values.setdefault(worker, value)
        if seen is not value and not _same(seen, value):
            self.conflicting.add(worker)

    def place(self, worker: str, labels: Mapping[str, object]) -> None:
        """Record ``worker``'s group from a series' ``labels`` (call only with a
        ``group_by``); another group already there makes the worker conflicting.
        A label value that is not a string, or not valid UTF-8 (a lone surrogate,
        which no exposition could render), is ``TypeError``."""
        found = [labels.get(name, "") for name in self.group_by]
        group = tuple(value for value in found if isinstance(value, str))
        if len(group) != len(found):
            raise TypeError(f"a non-string value for a label of {', '.join(self.group_by)}")
        if not encodes_as_utf8("".join(group)):
            raise TypeError(
                f"a value that is not valid UTF-8 for a label of {', '.join(self.group_by)}"
            )
        if self.groups.setdefault(worker, group) != group:
            self.conflicting.add(worker)

    def readings(self, *, default_age: float) -> list[Reading]:
        """One reading per worker seen in any of the policy's series.

        ``default_age`` is the age of a worker with no entry in ``ages``: 0 for an
        exporter's answer (read just now), ``math.inf`` where unknown means stale.
        """
        idle, up, supported = (self.by_series[n] for n in (IDLE_SECONDS, UP, IDLE_SUPPORTED))
        ages, conflicting, groups, named = self.ages, self.conflicting, self.groups, self.namespaces
        reading, valid = Reading, valid_idle  # bound once: a loop per worker
        readings = []
        for worker in dict.fromkeys([*up, *supported, *idle]):
            value = idle.get(worker)
            age = ages.get(worker, default_age)
            readings.append(
                reading(
                    worker,
                    value if valid(value) else None,
                    up=up.get(worker) == 1.0,
                    supported=supported.get(worker) == 1.0,
                    age=math.inf if age is None else age,
                    conflicting=worker in conflicting,
                    group=groups.get(worker, ()) if groups else (),
                    namespaces=frozenset(named[worker]) if worker in named else NO_NAMESPACES,
                )
            )
        return readings


def keep_oldest(ages: Values, worker: str, age: float | None) -> None:
    """Record ``worker``'s sample ``age`` in ``ages``: of two, the older. An age that is
    unknown (None), not a number or negative (a sample from the future) is infinitely
    old."""
    known = age if age is not None and age >= 0 else math.inf  # NaN >= 0 is False
    seen = ages.get(worker)
    ages[worker] = known if seen is None else max(seen, known)


def _same(first: float | None, second: float | None) -> bool:
    """Equal values, NaN counting as equal to NaN."""
    return first == second or (first != first and second != second)
