"""The retirement policy: readings and settings in, decisions out. No I/O.

A worker is a candidate when, on ``wait_count`` consecutive cycles, its
reading is a fresh, finite idle value >= ``max_idle``, it is up, supports
idle, and (where an alert gates retirement) its alert fires. Candidates not
cooling down and not already retiring are then taken longest idle first,
never more than ``max_stops_per_cycle`` and never taking the fleet below
``min_workers`` up workers (workers already retiring count as gone).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final

from wool_idle.contract import valid_idle

DEFAULT_MAX_STOPS_PER_CYCLE: Final = 5
RETIRING_TTL: Final = 300.0
"""Seconds a stopped worker that the source still reports up counts as retiring.
Past that, the address is taken to be a new worker (restarted in its place)."""


class Verdict(StrEnum):
    """What the policy decided about one worker on one cycle."""

    STOP = "stop"
    DRY_RUN = "dry_run"  # would stop, but the operator asked for a dry run
    BUSY = "busy"  # idle below the threshold
    INVALID_VALUE = "invalid_value"  # missing, NaN, infinite or negative
    STALE = "stale"  # the reading is older than max_staleness
    DOWN = "down"
    UNSUPPORTED = "unsupported"
    NOT_ALERTING = "not_alerting"
    WAITING = "waiting"  # idle enough, but fewer than wait_count cycles in a row
    RETIRING = "retiring"  # a stop was already sent
    COOLDOWN = "cooldown"
    MIN_WORKERS = "min_workers"
    RATE_LIMIT = "rate_limit"


_RANKED: Final = frozenset({Verdict.STOP, Verdict.DRY_RUN, Verdict.MIN_WORKERS, Verdict.RATE_LIMIT})

CANDIDATE_VERDICTS: Final = frozenset(
    {Verdict.STOP, Verdict.DRY_RUN, Verdict.COOLDOWN, Verdict.MIN_WORKERS, Verdict.RATE_LIMIT}
)
"""Verdicts of workers idle past the rule (acted on, or held back by a rule)."""


@dataclass(frozen=True)
class Reading:
    """One worker as a source saw it. ``idle`` is None when the source had no
    numeric value; ``age`` is how old the value is in seconds."""

    worker: str
    idle: float | None
    up: bool = True
    supported: bool = True
    age: float = 0.0
    alerting: bool = True


@dataclass(frozen=True, kw_only=True)
class PolicySettings:
    """The rule. Durations in seconds."""

    max_idle: float
    wait_count: int = 1
    min_workers: int = 1
    max_stops_per_cycle: int = DEFAULT_MAX_STOPS_PER_CYCLE
    cooldown: float = 300.0
    max_staleness: float = 60.0
    dry_run: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_idle) and self.max_idle > 0):
            raise ValueError("max_idle must be a finite number > 0")
        if self.wait_count < 1 or self.min_workers < 0 or self.max_stops_per_cycle < 0:
            raise ValueError("wait_count >= 1, min_workers >= 0, max_stops_per_cycle >= 0")


@dataclass(frozen=True)
class PolicyState:
    """What the policy remembers between cycles."""

    streaks: Mapping[str, int] = field(default_factory=dict)
    cooldown_until: Mapping[str, float] = field(default_factory=dict)
    retiring: Mapping[str, float] = field(default_factory=dict)
    """Workers a stop was sent to, and when; they count as gone for the floor."""


@dataclass(frozen=True)
class Decision:
    """The verdict on one worker, with the idle value it was based on."""

    worker: str
    idle: float | None
    verdict: Verdict


@dataclass(frozen=True)
class Plan:
    """One cycle's decisions (one per reading) and the state for the next cycle."""

    decisions: tuple[Decision, ...]
    state: PolicyState

    @property
    def stops(self) -> tuple[Decision, ...]:
        """The workers to stop (or, in a dry run, to report), longest idle first."""
        return tuple(d for d in self.decisions if d.verdict in (Verdict.STOP, Verdict.DRY_RUN))

    @property
    def candidates(self) -> int:
        """How many workers are idle past the rule, acted on or not."""
        return sum(d.verdict in CANDIDATE_VERDICTS for d in self.decisions)


def _screen(reading: Reading, settings: PolicySettings) -> Verdict | None:
    """Why ``reading`` is not idle past the rule this cycle, or None if it is."""
    if not reading.up:
        return Verdict.DOWN
    if not reading.supported:
        return Verdict.UNSUPPORTED
    if not valid_idle(reading.idle):
        return Verdict.INVALID_VALUE
    if not (0 <= reading.age <= settings.max_staleness):
        return Verdict.STALE
    assert reading.idle is not None
    if reading.idle < settings.max_idle:
        return Verdict.BUSY
    if not reading.alerting:
        return Verdict.NOT_ALERTING
    return None


def plan(
    readings: Iterable[Reading], state: PolicyState, settings: PolicySettings, now: float
) -> Plan:
    """Decide every worker's fate for this cycle. Pure: same inputs, same plan."""
    latest = {r.worker: r for r in readings}
    screened = {w: _screen(r, settings) for w, r in latest.items()}
    streaks = {w: state.streaks.get(w, 0) + 1 for w, v in screened.items() if v is None}
    retiring = {
        w: since
        for w, since in state.retiring.items()
        if w in latest and latest[w].up and now - since < RETIRING_TTL
    }
    cooldowns = {w: t for w, t in state.cooldown_until.items() if t > now}
    verdicts: dict[str, Verdict] = {}
    candidates = []
    for worker, screen in screened.items():
        if screen is not None:
            verdicts[worker] = screen
        elif worker in retiring:
            verdicts[worker] = Verdict.RETIRING
        elif streaks[worker] < settings.wait_count:
            verdicts[worker] = Verdict.WAITING
        elif worker in cooldowns:
            verdicts[worker] = Verdict.COOLDOWN
        else:
            candidates.append(latest[worker])
    up = sum(1 for r in latest.values() if r.up)
    room = max(0, up - len(retiring) - settings.min_workers)
    candidates.sort(key=lambda r: (-(r.idle or 0.0), r.worker))
    for rank, reading in enumerate(candidates):
        if rank >= room:
            verdicts[reading.worker] = Verdict.MIN_WORKERS
        elif rank >= settings.max_stops_per_cycle:
            verdicts[reading.worker] = Verdict.RATE_LIMIT
        else:
            verdicts[reading.worker] = Verdict.DRY_RUN if settings.dry_run else Verdict.STOP
    first = [r.worker for r in candidates]
    rest = [w for w in latest if verdicts[w] not in _RANKED]
    decisions = tuple(Decision(w, latest[w].idle, verdicts[w]) for w in first + rest)
    stopping = {d.worker: now for d in decisions if d.verdict is Verdict.STOP}
    return Plan(decisions, PolicyState(streaks, cooldowns, {**retiring, **stopping}))


def after_stop(
    state: PolicyState, worker: str, stopped: bool, now: float, settings: PolicySettings
) -> PolicyState:
    """The state once a planned stop of ``worker`` has been tried.

    A stop that did not happen (refused, unreachable, failed) takes the worker
    out of ``retiring``, resets its streak and cools it down for ``cooldown`` s.
    """
    if stopped:
        return state
    streaks = {w: n for w, n in state.streaks.items() if w != worker}
    return replace(
        state,
        streaks=streaks,
        cooldown_until={**state.cooldown_until, worker: now + settings.cooldown},
        retiring={w: t for w, t in state.retiring.items() if w != worker},
    )
