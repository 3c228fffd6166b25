"""The retirement policy: readings and settings in, decisions out. No I/O.

A worker is a candidate when, on ``wait_count`` consecutive cycles, its reading is a
fresh, finite idle value >= ``max_idle``, it is up, supports idle, and (where
an alert gates retirement) its alert fires. Candidates not cooling down, not
already retiring and first seen at least ``min_age`` ago are then taken
longest idle first, never more than ``max_stops_per_cycle`` per group and
never taking a group below ``min_workers`` workers known alive (see
``floor``; workers already retiring count as gone). Whatever is unknown or
contradictory counts against stopping.

Identities: readings with the same ``identity`` are one worker read under
several labels (``127.0.0.1:P`` and ``localhost:P``); it is decided once and
counts once for the floor and the rate limit (see ``aliases``).

Groups: a reading's ``group`` is the values of the ``group_by`` labels of its
series (a missing label is the empty value). Without ``group_by`` every worker
is in the one empty group, so the floor and the rate limit hold fleet-wide.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Final

from wool_idle.autoscaler import aliases, floor
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.contract import stop_deadline, valid_idle

DEFAULT_MAX_STOPS_PER_CYCLE: Final = 5
RETIRING_TTL: Final = 300.0
"""The least time a worker a stop was sent to counts as retiring (``retiring_time``),
whatever the reads say in between: missing, unresolved, down once (a probe timing out
while it drains), up and busy. Past it, a worker at the address is taken to be a new
one (restarted in its place)."""


def retiring_time(grace: float, *, max_staleness: float) -> float:
    """How long a worker stopped with ``grace`` counts as retiring: ``RETIRING_TTL``,
    or, when that is longer, the stop's whole deadline (its drain and the margin, while
    it may still answer) plus ``max_staleness`` (how old a reading of it from before
    it left may be and still count as fresh: such a reading says nothing of now).
    With an unbounded grace (< 0) the drain is left out: the daemon keeps a worker whose
    stop call goes on retiring afresh each cycle, however long it drains."""
    deadline = stop_deadline(grace)
    return max(RETIRING_TTL, (deadline or 0.0) + max_staleness)


@dataclass(frozen=True, slots=True)
class Reading:
    """One worker as a source saw it.

    ``idle`` is None when the source had no usable value; ``age`` is how old
    the value is in seconds (``math.inf`` when unknown); ``conflicting`` is
    True when duplicate series of the worker disagreed (in value or group);
    ``group`` is the values of the ``group_by`` labels, in their order;
    ``identity`` names the worker the reading is of when other readings name it
    too (see the module docstring); empty, the ``worker`` label is its identity.
    ``namespaces`` is the wool namespaces its series name (``wool_namespace``), where its
    drop goes once it is stopped: never compared, it decides nothing here.
    """

    worker: str
    idle: float | None
    _: KW_ONLY
    up: bool = True
    supported: bool = True
    age: float = 0.0
    alerting: bool = True
    conflicting: bool = False
    group: tuple[str, ...] = ()
    identity: str = ""
    namespaces: frozenset[str] = field(default=frozenset(), compare=False)


@dataclass(frozen=True, kw_only=True)
class PolicySettings:
    """The rule (durations in seconds, finite; ``ValueError`` out of range). ``dry_run``:
    the actuator confirms but sends no stop. ``group_by``: the labels whose values make
    a worker's group; ``min_workers`` and ``max_stops_per_cycle`` hold per group."""

    max_idle: float
    wait_count: int = 1
    min_workers: int = 1
    max_stops_per_cycle: int = DEFAULT_MAX_STOPS_PER_CYCLE
    cooldown: float = 300.0
    max_staleness: float = 60.0
    min_age: float = 0.0
    group_by: tuple[str, ...] = ()
    dry_run: bool = False
    retiring_for: float = RETIRING_TTL
    """How long a worker a stop was sent to counts as retiring; the daemon sets it to
    ``retiring_time`` of its stops' grace."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_idle) and self.max_idle > 0):
            raise ValueError("max_idle must be a finite number > 0")
        if self.wait_count < 1 or self.min_workers < 0 or self.max_stops_per_cycle < 0:
            raise ValueError("wait_count >= 1, min_workers >= 0, max_stops_per_cycle >= 0")
        for name in ("min_age", "cooldown", "max_staleness"):  # inf: unknown ages fresh
            if not (math.isfinite(value := getattr(self, name)) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0")
        if not (math.isfinite(self.retiring_for) and self.retiring_for > 0):
            raise ValueError("retiring_for must be a finite number > 0")
        if len(set(self.group_by)) != len(self.group_by):
            raise ValueError("group_by names a label twice")


@dataclass(frozen=True)
class PolicyState:
    """What the policy remembers between cycles."""

    streaks: Mapping[str, int] = field(default_factory=dict)
    cooldown_until: Mapping[str, float] = field(default_factory=dict)
    retiring: Mapping[str, float] = field(default_factory=dict)
    """Workers a stop was sent to, and when; they count as gone for the floor and are
    not stopped again. A mark lasts ``PolicySettings.retiring_for`` whatever the reads
    say, so a worker still draining never counts as alive again."""
    first_seen: Mapping[str, float] = field(default_factory=dict)
    """When each worker of the last cycle was first read up (a worker missing from a
    cycle, or read down, is forgotten, and new again when it comes back: a worker
    restarted at its address is a new one); kept only with a ``min_age``."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict on one worker, with its reading's idle value, group and namespaces."""

    worker: str
    idle: float | None
    verdict: Verdict
    group: tuple[str, ...] = ()
    namespaces: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Plan:
    """One cycle's decisions (one per worker), the state for the next cycle, and
    how many workers were candidates (idle past the rule, stopped or held back by
    a rule: ``stop``, ``cooldown``, ``min_age``, ``min_workers``, ``rate_limit``)."""

    decisions: tuple[Decision, ...]
    state: PolicyState
    candidates: int = 0

    @property
    def stops(self) -> tuple[Decision, ...]:
        """The workers to stop, longest idle first."""
        return tuple(d for d in self.decisions if d.verdict is Verdict.STOP)


def _disqualifier(reading: Reading, settings: PolicySettings) -> Verdict | None:
    """The verdict that rules ``reading`` out on its own, or None if it is idle past the rule."""
    if reading.conflicting:
        return Verdict.CONFLICTING
    if not reading.up:
        return Verdict.DOWN
    fresh = 0 <= reading.age <= settings.max_staleness
    if not reading.supported:  # an old answer would hold the floor for a worker gone since
        return Verdict.UNSUPPORTED if fresh else Verdict.STALE
    if not valid_idle(reading.idle):
        return Verdict.INVALID_VALUE
    if not fresh:
        return Verdict.STALE
    assert reading.idle is not None
    if reading.idle < settings.max_idle:
        return Verdict.BUSY
    if not reading.alerting:
        return Verdict.NOT_ALERTING
    return None


def _one_per_worker(readings: Iterable[Reading]) -> dict[str, Reading]:
    """Readings by worker; a worker read twice with different values is conflicting."""
    latest: dict[str, Reading] = {}
    for reading in readings:
        seen = latest.setdefault(reading.worker, reading)
        if seen is not reading and seen != reading:
            latest[reading.worker] = replace(seen, conflicting=True)
    return latest


def plan(
    readings: Iterable[Reading], state: PolicyState, settings: PolicySettings, now: float
) -> Plan:
    """Decide every worker's fate for this cycle. Pure: same inputs, same plan."""
    latest = _one_per_worker(readings)
    disqualified = {w: _disqualifier(r, settings) for w, r in latest.items()}
    spellings = aliases.spellings(latest, disqualified)
    streaks = {w: state.streaks.get(w, 0) + 1 for w, v in disqualified.items() if v is None}
    retiring_for = settings.retiring_for
    retiring = {w: since for w, since in state.retiring.items() if now - since < retiring_for}
    cooldowns = {w: t for w, t in state.cooldown_until.items() if t > now}
    seen = state.first_seen
    first_seen = (
        {w: seen.get(w, now) for w, r in latest.items() if r.up} if settings.min_age else {}
    )
    for labels in spellings.values():
        aliases.most_cautious(labels, streaks, retiring, cooldowns, first_seen)
    verdicts = {w: Verdict.ALIAS for labels in spellings.values() for w in labels[1:]}
    ranked, held = [], 0
    for worker, disqualifier in disqualified.items():
        if worker in verdicts:
            continue
        if disqualifier is not None:
            verdicts[worker] = disqualifier
        elif worker in retiring:
            verdicts[worker] = Verdict.RETIRING
        elif streaks[worker] < settings.wait_count:
            verdicts[worker] = Verdict.WAITING
        elif worker in cooldowns:
            verdicts[worker], held = Verdict.COOLDOWN, held + 1
        elif first_seen and now - first_seen[worker] < settings.min_age:
            verdicts[worker], held = Verdict.MIN_AGE, held + 1
        else:
            ranked.append(latest[worker])
    ranked.sort(key=lambda r: (-(r.idle or 0.0), r.worker))
    gone = retiring.keys() | {w for labels in spellings.values() for w in labels[1:]}
    room = floor.room(latest, disqualified, gone, settings.min_workers)
    floor.take(ranked, room, settings.max_stops_per_cycle, verdicts)
    chosen = {r.worker for r in ranked}
    in_order = ranked + [r for w, r in latest.items() if w not in chosen]
    decisions = tuple(
        Decision(r.worker, r.idle, verdicts[r.worker], r.group, r.namespaces) for r in in_order
    )
    next_state = PolicyState(streaks, cooldowns, retiring, first_seen)
    return Plan(decisions, next_state, len(ranked) + held)


def after_stop(
    state: PolicyState, worker: str, *, result: StopResult, now: float, settings: PolicySettings
) -> PolicyState:
    """The state once a planned stop of ``worker`` has come to ``result``.

    A stop sent (``STOPPED``, or ``UNANSWERED``: it may be draining) makes the
    worker retiring: it counts as gone for the floor and is not stopped again. A
    dry run changes nothing. Any other result resets the worker's streak and cools
    it down for ``cooldown`` s."""
    if result is StopResult.DRY_RUN:
        return state
    if result in (StopResult.STOPPED, StopResult.UNANSWERED):
        return replace(state, retiring={**state.retiring, worker: now})
    return replace(
        state,
        streaks={w: n for w, n in state.streaks.items() if w != worker},
        cooldown_until={**state.cooldown_until, worker: now + settings.cooldown},
        retiring={w: t for w, t in state.retiring.items() if w != worker},
    )
