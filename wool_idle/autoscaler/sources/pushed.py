"""Ages of a Pushgateway's samples, from its ``push_time_seconds``.

A Pushgateway serves what was last pushed to it, unstamped (it refuses pushed
timestamps), for as long as nobody deletes it: an exporter's text pushed by a
job that has since stopped would read as new for ever. It says when each group
was last pushed in ``push_time_seconds`` (0: never), labelled with the group's
grouping key, which labels every series of the group too. An unstamped
sample's age (a stamped one, from ``/federate``, has its own) is
this host's now less the push time of its group (a push time up to
``CLOCK_TOLERANCE`` ahead is now); a sample whose labels match no group, or
whose group's push time is not a number or further ahead, is of unknown age. A
sample matching several groups takes the oldest.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Final

from prometheus_client.samples import Sample

from wool_idle.autoscaler.sources.samples import Values, keep_oldest
from wool_idle.autoscaler.sources.source import CLOCK_TOLERANCE

PUSH_TIME: Final = "push_time_seconds"
"""The Pushgateway's series of each group's last push time (Unix seconds)."""


class PushTimes:
    """The groups of one answer and the labels of the policy's samples in it.

    Groups are kept by the names of their grouping key (a Pushgateway's groups
    share a few such shapes), so a sample is matched with one lookup per shape,
    not one comparison per group."""

    def __init__(self) -> None:
        self.found = False
        """Whether the answer had a ``push_time_seconds`` family (the name in a label
        value or a help text is no Pushgateway)."""
        self.shapes: dict[tuple[str, ...], dict[tuple[str, ...], float]] = {}
        self.samples: list[tuple[str, Mapping[str, str]]] = []

    def add_groups(self, samples: Iterable[Sample]) -> None:
        """Record the push time of each group of a ``push_time_seconds`` family (a
        group listed twice with two times counts as pushed at the older, and one of
        them not a number makes it unknown)."""
        self.found = True
        for sample in samples:
            if sample.name == PUSH_TIME:
                names = tuple(sorted(sample.labels))
                groups = self.shapes.setdefault(names, {})
                key = tuple(sample.labels[name] for name in names)
                groups[key] = _earliest(sample.value, groups.get(key, sample.value))

    def note(self, worker: str, labels: Mapping[str, str]) -> None:
        """Record that a sample of ``worker`` with ``labels`` was read."""
        self.samples.append((worker, labels))

    def ages(self, now: float) -> Values:
        """The age of each worker noted: that of its oldest sample (see the module)."""
        ages: Values = {}
        for worker, labels in self.samples:
            pushed = [
                groups[key]
                for names, groups in self.shapes.items()
                if (key := tuple(labels.get(name, "") for name in names)) in groups
            ]
            keep_oldest(ages, worker, age_since(_earliest(*pushed), now) if pushed else None)
        return ages


def _earliest(*times: float) -> float:
    """The earliest of ``times``; NaN (unknown) if any is NaN, whatever their order
    (``min`` keeps or drops a NaN by where it stands)."""
    return math.nan if any(math.isnan(t) for t in times) else min(times)


def age_since(at: float, now: float) -> float | None:
    """``now`` less ``at`` (a push time, a sample's timestamp), 0 for a time ahead by at
    most ``CLOCK_TOLERANCE``; None (unknown) for one further ahead (this host's clock set
    back, or clocks apart) or not a number."""
    age = now - at
    if math.isnan(age) or age < -CLOCK_TOLERANCE:
        return None
    return max(age, 0.0)
