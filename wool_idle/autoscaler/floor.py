"""Which candidates go: the floor and the rate limit, per group. Pure.

A group may lose workers down to ``min_workers`` workers known alive, and at
most ``limit`` per cycle. Known alive: the reading is up and not conflicting,
and carries a fresh valid idle value (busy or idle past the rule), or says, as
freshly, that the worker answered UNIMPLEMENTED (``unsupported``). A reading that is merely up,
with no value, a stale value or an invalid one, holds no floor: nothing shows
that a worker answers there now. A worker already retiring counts as gone; one
read under several labels counts once (``aliases``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from wool_idle.autoscaler.verdicts import Verdict

if TYPE_CHECKING:
    from wool_idle.autoscaler.policy import Reading

ALIVE: Final = frozenset({None, Verdict.BUSY, Verdict.NOT_ALERTING, Verdict.UNSUPPORTED})
"""The verdicts (None: a candidate) of a reading that shows its worker alive."""


def room(
    latest: Mapping[str, Reading],
    disqualified: Mapping[str, Verdict | None],
    gone: Container[str],
    min_workers: int,
) -> dict[tuple[str, ...], int]:
    """How many workers each group may lose: its workers known alive, less
    ``min_workers``. ``gone``: the labels not to count (retiring workers, and the
    other labels of a worker read under several)."""
    alive = ALIVE
    groups = [latest[w].group for w, v in disqualified.items() if v in alive and w not in gone]
    return {group: max(0, n - min_workers) for group, n in Counter(groups).items()}


def take(
    ranked: Iterable[Reading],
    room: Mapping[tuple[str, ...], int],
    limit: int,
    verdicts: dict[str, Verdict],
) -> None:
    """Set the verdict of each ranked candidate, longest idle first within its group:
    ``stop`` while its group has room and stops left this cycle (``limit`` per group)."""
    taken: dict[tuple[str, ...], int] = {}
    for reading in ranked:
        group = reading.group
        rank = taken.get(group, 0)
        taken[group] = rank + 1
        if rank >= room.get(group, 0):
            verdicts[reading.worker] = Verdict.MIN_WORKERS
        elif rank >= limit:
            verdicts[reading.worker] = Verdict.RATE_LIMIT
        else:
            verdicts[reading.worker] = Verdict.STOP
