"""The demo's live table: one row per worker ever seen, from the exporter's
readings (parsed by the autoscaler's own exporter source, with each worker's
``wool_tags``) and the autoscaler's decision log (``/decisions``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.verdicts import StopResult

BETWEEN_TASKS: Final = 0.5
"""Idle for less than this reads as busy: a worker fed back-to-back tasks is idle
for milliseconds between them."""


@dataclass(frozen=True)
class Row:
    worker: str
    tags: str
    state: str
    idle: str
    decision: str


class Board:
    """What the demo knows of each worker, kept across refreshes: its tags, its
    latest reading (``None`` once the exporter no longer lists it), the
    autoscaler's decision, and whether the autoscaler retired it.

    The autoscaler logs only the decisions that block or stop, so a decision
    more than ``decision_ttl`` seconds older than the newest one is shown as
    none: the worker was not held back since (it was busy, say)."""

    def __init__(self, decision_ttl: float) -> None:
        self.decision_ttl = decision_ttl
        self.tags: dict[str, str] = {}
        self.readings: dict[str, Reading] = {}
        self.decisions: dict[str, tuple[float, str]] = {}
        self.newest = 0.0
        self.retired: list[str] = []

    def read_exporter(self, readings: Iterable[Reading]) -> None:
        """Take the exporter's current workers (grouped by their tags)."""
        self.readings = {reading.worker: reading for reading in readings}
        for worker, reading in self.readings.items():
            self.tags.setdefault(worker, ",".join(reading.group))

    def read_decisions(self, records: Sequence[Mapping[str, object]]) -> None:
        """Take the autoscaler's decision log (newest last); a stop stays known after
        its record left the bounded log."""
        for record in records:
            worker, result = str(record.get("worker")), record.get("result")
            stamp = record.get("time")
            when = float(stamp) if isinstance(stamp, int | float) else 0.0
            self.decisions[worker] = (when, str(result or record.get("verdict")))
            self.newest = max(self.newest, when)
            if result == StopResult.STOPPED and worker not in self.retired:
                self.retired.append(worker)

    def left(self) -> dict[str, list[str]]:
        """The workers up and not retired, by tags."""
        by_tags: dict[str, list[str]] = {}
        for worker, reading in self.readings.items():
            if reading.up and worker not in self.retired:
                by_tags.setdefault(self.tags[worker], []).append(worker)
        return dict(sorted(by_tags.items()))

    def rows(self) -> list[Row]:
        """One row per worker, by tags, then in the order first seen."""
        order = sorted(self.tags, key=lambda worker: self.tags[worker])
        return [self._row(worker) for worker in order]

    def _row(self, worker: str) -> Row:
        reading = self.readings.get(worker)
        idle = "-"
        if worker in self.retired:
            state = "retired"
        elif reading is None:
            state = "gone"
        elif not reading.up:
            state = "down"
        elif reading.idle is None:
            state = "unknown"
        else:
            state = "busy" if reading.idle < BETWEEN_TASKS else "idle"
            idle = f"{reading.idle:6.1f}"
        when, decision = self.decisions.get(worker, (0.0, "-"))
        if when < self.newest - self.decision_ttl and state != "retired":
            decision = "-"
        return Row(worker, self.tags[worker] or "-", state, idle, decision)


def render(rows: Sequence[Row], heading: str, footer: str) -> str:
    """The table as text between ``heading`` and ``footer``."""
    header = f"{'worker':<22} {'tags':<6} {'state':<8} {'idle s':>7}  autoscaler's decision"
    lines = [heading, header, "-" * len(header)]
    lines += [f"{r.worker:<22} {r.tags:<6} {r.state:<8} {r.idle:>7}  {r.decision}" for r in rows]
    return "\n".join([*lines, footer])
