"""One worker read under several labels: its readings merged for the policy. Pure.

Two labels can name one worker (``127.0.0.1:P`` and ``localhost:P``; the
planner finds which by resolving them, and gives such readings one
``identity``). The policy counts such a worker once for the floor and the rate
limit. If its readings' verdicts or groups disagree, every one of them is
``conflicting``: never stopped, holding no floor. If they agree, the worker is
decided once, under its first label (the smallest), with the least idle value
of them and the most cautious state of them (the shortest streak, the latest
first sighting, any cooldown or retirement); its other labels are ``alias``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from wool_idle.autoscaler.verdicts import Verdict
from wool_idle.contract import valid_idle

if TYPE_CHECKING:
    from wool_idle.autoscaler.policy import Reading


def spellings(
    latest: dict[str, Reading], disqualified: dict[str, Verdict | None]
) -> dict[str, tuple[str, ...]]:
    """The labels of each worker read under several (one ``identity``), the first
    (smallest) first, where they agree: the same verdict and group; the first
    label's reading then carries their least idle value (when every one of them has
    a valid one; else its own). Labels that disagree are all made conflicting, and
    left out."""
    by_identity: dict[str, list[str]] = {}
    for worker, reading in latest.items():
        if reading.identity:
            by_identity.setdefault(reading.identity, []).append(worker)
    spellings = {}
    for labels in by_identity.values():
        if len(labels) < 2:
            continue
        labels.sort()
        first = latest[labels[0]]
        verdict, group = disqualified[labels[0]], first.group
        if all(disqualified[w] is verdict and latest[w].group == group for w in labels):
            spellings[labels[0]] = tuple(labels)
            values = [v for v in (latest[w].idle for w in labels) if valid_idle(v)]
            if len(values) == len(labels):  # the least of them is the cautious one
                latest[labels[0]] = replace(first, idle=min(v for v in values if v is not None))
            continue
        for worker in labels:
            latest[worker] = replace(latest[worker], conflicting=True)
            disqualified[worker] = Verdict.CONFLICTING
    return spellings


def most_cautious(
    labels: tuple[str, ...],
    streaks: dict[str, int],
    retiring: dict[str, float],
    cooldowns: dict[str, float],
    first_seen: dict[str, float],
) -> None:
    """Give every one of ``labels`` (one worker's) the most cautious state of them all:
    the shortest streak, the latest retirement and cooldown, the latest first sighting.
    So the worker's state is the same whichever of its labels it is decided under
    next (a retirement included, should the label it was stopped under go)."""
    if labels[0] in streaks:  # the labels agree: all are candidates, or none
        shortest = min(streaks[w] for w in labels)
        streaks.update(dict.fromkeys(labels, shortest))
    for marks in (retiring, cooldowns, first_seen):
        times = [marks[w] for w in labels if w in marks]
        if times:
            marks.update(dict.fromkeys(labels, max(times)))
