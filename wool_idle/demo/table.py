"""The demo's live table: one row per worker, from the exporter and the autoscaler."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from wool_idle.contract import IDLE_SECONDS, UP, WORKER_LABEL

BETWEEN_TASKS: Final = 0.5
"""Idle for less than this reads as busy: a worker fed back-to-back tasks is idle
for milliseconds between them."""


@dataclass(frozen=True)
class Row:
    worker: str
    role: str
    state: str
    idle: str
    decision: str


def idle_by_worker(exposition: str) -> tuple[dict[str, float], dict[str, float]]:
    """(idle seconds, up) by worker from the exporter's text."""
    idle: dict[str, float] = {}
    up: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            worker = sample.labels.get(WORKER_LABEL)
            if worker is None:
                continue
            if sample.name == IDLE_SECONDS:
                idle[worker] = sample.value
            elif sample.name == UP:
                up[worker] = sample.value
    return idle, up


def last_decisions(decisions: Sequence[Mapping[str, object]]) -> dict[str, str]:
    """The latest decision per worker, as short text."""
    latest: dict[str, str] = {}
    for entry in decisions:
        outcome = entry.get("result") or entry.get("verdict")
        latest[str(entry.get("worker"))] = str(outcome)
    return latest


def rows(
    roles: Mapping[str, str],
    exited: Mapping[str, bool],
    idle: Mapping[str, float],
    decisions: Mapping[str, str],
) -> list[Row]:
    """One row per worker in ``roles`` order."""
    table = []
    for worker, role in roles.items():
        if exited.get(worker):
            state, shown = "stopped", "-"
        elif worker not in idle:
            state, shown = "unknown", "-"
        else:
            state = "busy" if idle[worker] < BETWEEN_TASKS else "idle"
            shown = f"{idle[worker]:6.1f}"
        table.append(Row(worker, role, state, shown, decisions.get(worker, "-")))
    return table


def render(table: Sequence[Row], elapsed: float, max_idle: float) -> str:
    """The table as text with a heading."""
    header = f"{'worker':<22} {'role':<6} {'state':<8} {'idle s':>7}  autoscaler's last decision"
    lines = [
        f"wool-idle demo  t={elapsed:5.1f}s  retire after {max_idle:g}s idle",
        header,
        "-" * len(header),
    ]
    lines += [f"{r.worker:<22} {r.role:<6} {r.state:<8} {r.idle:>7}  {r.decision}" for r in table]
    return "\n".join(lines)
