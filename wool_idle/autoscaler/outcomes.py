"""What happened to a retirement: the result of a stop, or why it was held back."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from wool_idle.autoscaler.policy import Verdict


class StopResult(StrEnum):
    """The ``result`` label of ``wool_autoscaler_stops_total``."""

    STOPPED = "stopped"
    REFUSED_BUSY = "refused_busy"
    UNREACHABLE = "unreachable"
    FAILED = "failed"
    DRY_RUN = "dry_run"


class BlockReason(StrEnum):
    """The ``reason`` label of ``wool_autoscaler_blocked_total``."""

    MIN_WORKERS = "min_workers"
    RATE_LIMIT = "rate_limit"
    COOLDOWN = "cooldown"
    BUSY_ON_RECHECK = "busy_on_recheck"
    INVALID_VALUE = "invalid_value"
    STALE = "stale"


BLOCKING_VERDICTS: Final = {
    Verdict.MIN_WORKERS: BlockReason.MIN_WORKERS,
    Verdict.RATE_LIMIT: BlockReason.RATE_LIMIT,
    Verdict.COOLDOWN: BlockReason.COOLDOWN,
    Verdict.INVALID_VALUE: BlockReason.INVALID_VALUE,
    Verdict.STALE: BlockReason.STALE,
}
"""Policy verdicts counted as blocked, and under which reason."""
