"""The autoscaler's two outcome enums, each value documented once.

``Verdict``: what the policy decided about one worker on one cycle (the
``verdict`` of the decision log; the blocking ones are also the ``reason`` of
``wool_autoscaler_blocked_total``). ``StopResult``: what came of a stop the
policy asked for (the ``result`` of the decision log and of
``wool_autoscaler_stops_total``). A refusal at the last moment is a result,
never also a verdict, so every event is counted once.

Imports nothing but the standard library: the pure policy uses both.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self


def _blocking(value: str) -> tuple[str, bool]:
    """A verdict counted in ``wool_autoscaler_blocked_total{reason=value}``."""
    return value, True


class Verdict(StrEnum):
    """What the policy decided about one worker on one cycle.

    ``blocks`` is True for the verdicts counted as blocked: a retirement that a
    rule held back, or that a reading the autoscaler cannot trust prevented.
    """

    blocks: bool

    def __new__(cls, value: str, blocks: bool = False) -> Self:
        verdict = str.__new__(cls, value)
        verdict._value_ = value
        verdict.blocks = blocks
        return verdict

    STOP = "stop"
    """Idle past the rule on every count: confirm with the worker, then stop it."""
    BUSY = "busy"
    """Idle less than ``max_idle``."""
    DOWN = "down"
    """The source says the worker does not answer, or its reading is of a sample
    older than the moment a planned stop found the worker unreachable (its idle RPC):
    then the source may still say it is up, serving that sample (a scrape interval
    longer than a cycle, a caching proxy), for up to ``max_staleness``."""
    UNSUPPORTED = "unsupported"
    """The worker predates the idle RPC (a fresh answer says so; an old one is
    ``stale``)."""
    NOT_ALERTING = "not_alerting"
    """Gated on an alert that does not fire for this worker."""
    WAITING = "waiting"
    """Idle past the rule on fewer than ``wait_count`` cycles in a row."""
    RETIRING = "retiring"
    """A stop was sent and the source still reports the worker up."""
    ALIAS = "alias"
    """Another label of a worker read under several that agree (``localhost:P`` beside
    ``127.0.0.1:P``: one identity, see ``identity``): the worker is decided once, under
    its first label, and counts once for the floor and the rate limit."""
    COOLDOWN = _blocking("cooldown")
    """A stop of this worker was refused or failed less than ``cooldown`` ago."""
    MIN_AGE = _blocking("min_age")
    """First seen by this autoscaler less than ``min_age`` ago. "First seen" is this
    process's memory: after an autoscaler restart every worker is new again (fail
    closed: a restart delays retirements by ``min_age``, it never hastens one), and
    a worker missing from a cycle's readings, or read down, is new again when it comes
    back up (a crashed worker restarted at its address is a new one)."""
    MIN_WORKERS = _blocking("min_workers")
    """Stopping it would leave its group (the whole fleet without ``group_by``) with
    fewer than ``min_workers`` workers known alive (see ``floor``), or fewer than that
    of the workers its floor counts on answered just now (``floor_check``)."""
    RATE_LIMIT = _blocking("rate_limit")
    """More workers of its group are due than ``max_stops_per_cycle``; longer idle
    ones go first."""
    INVALID_VALUE = _blocking("invalid_value")
    """No idle value, or one that is not a finite number >= 0."""
    STALE = _blocking("stale")
    """The idle sample's age (or, for a worker that predates the idle RPC, its
    ``idle_supported`` sample's) is unknown, negative or over ``max_staleness``."""
    CONFLICTING = _blocking("conflicting")
    """Two series or readings of this worker disagree."""
    INVALID_ADDRESS = _blocking("invalid_address")
    """The ``worker`` label is not a worker address (``host:port`` or ``unix:/path``)."""
    UNRESOLVED = _blocking("unresolved")
    """The ``worker`` label's address did not resolve (no such host, no answer within
    the resolver's timeout, no such unix socket, a relative unix path): which worker
    it names is unknown, so it is never stopped and does not count toward the floor."""


class StopResult(StrEnum):
    """What came of a stop the policy asked for."""

    STOPPED = "stopped"
    """The worker confirmed its idle time and accepted the stop."""
    DRY_RUN = "dry_run"
    """The worker confirmed its idle time; a dry run sent no stop."""
    REFUSED_BUSY = "refused_busy"
    """The worker's own idle time was under ``max_idle`` (or not a valid value, or
    refused as stopping: it drains work for another caller's stop), or it refused the
    conditional stop: work arrived. It cools down."""
    UNCONDITIONAL_GRACE_ZERO = "unconditional_grace_zero"
    """No stop was sent: the worker does not honour the conditional stop (a wool
    worker; its idle reply does not say it does) and the grace is 0, so a task
    arriving between the confirmation and the stop would be cancelled. It cools
    down. (With a grace > 0 such a worker is stopped, and the log says the window
    is open: a task arriving in it drains for the grace.)"""
    UNANSWERED = "unanswered"
    """The stop was sent, and no answer said what came of it: a timeout, a dropped
    connection, an error status other than a refusal, a reply that does not decode.
    The worker may be draining, so it counts as retiring, as if ``stopped``: gone for
    the floor, and not stopped again while the mark lasts."""
    UNREACHABLE = "unreachable"
    """The worker did not answer its idle RPC (a transient gRPC status): no stop was
    sent. It cools down."""
    FAILED = "failed"
    """Any other error before a stop was sent (the idle RPC, a reply that does not
    decode), or a stop refused for another reason than work (``PERMISSION_DENIED``).
    It cools down."""
