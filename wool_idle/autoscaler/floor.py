"""Which candidates go: the floor and the rate limit, per group. Pure.

A group may lose workers down to ``min_workers`` workers known alive, and at
most ``limit`` per cycle. Known alive: the reading is up and not conflicting,
and carries a fresh valid idle value (busy or idle past the rule), or says, as
freshly, that the worker answered UNIMPLEMENTED (``unsupported``). A reading that is merely up,
with no value, a stale value or an invalid one, holds no floor: nothing shows
that a worker answers there now. A worker already retiring counts as gone; one
read under several labels counts once (``aliases``). Alive as read: a reading may be
a scrape interval old, so before a group loses a worker the daemon asks the workers
its floor counts on (``holders``) whether they answer now (``floor_check``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from wool_idle.autoscaler.verdicts import Verdict

if TYPE_CHECKING:
    from wool_idle.autoscaler.policy import Decision, Reading

ALIVE: Final = frozenset({None, Verdict.BUSY, Verdict.NOT_ALERTING, Verdict.UNSUPPORTED})
"""The verdicts (None: a candidate) of a reading that shows its worker alive."""
HOLDING: Final = frozenset(
    {
        Verdict.BUSY,
        Verdict.NOT_ALERTING,
        Verdict.UNSUPPORTED,
        Verdict.WAITING,
        Verdict.COOLDOWN,
        Verdict.MIN_AGE,
        Verdict.MIN_WORKERS,
        Verdict.RATE_LIMIT,
    }
)
"""The final verdicts of a worker ``room`` counted alive and the plan does not stop: an
``ALIVE`` reading's own verdict, or a candidate's that held it back (a worker retiring
or read under another label is not counted, whatever its verdict)."""


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


def holders(
    decisions: Iterable[Decision], retiring: Container[str]
) -> dict[tuple[str, ...], list[str]]:
    """The workers each group's floor counts on once the plan's stops are sent, in the
    plan's order: those ``room`` counted alive, less the stops (``retiring``: the
    labels of workers retiring)."""
    by_group: dict[tuple[str, ...], list[str]] = {}
    for decision in decisions:
        if decision.verdict in HOLDING and decision.worker not in retiring:
            by_group.setdefault(decision.group, []).append(decision.worker)
    return by_group
