"""What came of one planned stop: ``StopAttempt``, and how a stop call's end reads.

Once a stop is sent, only an answer that says it was not carried out counts as
not stopped: ``StopRefused`` (busy: ``refused_busy``) or a status of
``NOT_CARRIED_OUT`` (not permitted, not understood: ``failed``). Any other
error, with a status or without, is ``unanswered``: the stop may have been
carried out, so the worker counts as retiring. Before it, a confirmation whose
``idle`` is refused with ``FAILED_PRECONDITION`` (our worker, stopping for another
caller, drains work) is ``refused_busy``, any other error ``failed``
(``idle_failed``). ``failed`` and ``unanswered`` attempts log their error once here
(it is in no other record).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final

import grpc

from wool_idle.autoscaler.verdicts import StopResult
from wool_idle.exceptions import RpcError, StopRefused
from wool_idle.logs import field_value

log = logging.getLogger("wool_idle.autoscaler")

NOT_CARRIED_OUT: Final = frozenset(
    {
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
"""Statuses of a stop reply that say the worker did not stop (besides ``StopRefused``)."""


@dataclass(frozen=True)
class StopAttempt:
    """What came of one planned stop, the idle time the worker confirmed, and whether
    the stop call goes on in the background (``unanswered`` only: what comes of it is
    handed to ``stop_ended`` later)."""

    result: StopResult
    confirmed_idle: float | None = None
    going_on: bool = False


def stop_outcome(worker: str, call: asyncio.Future[None], idle: float | None) -> StopAttempt:
    """What came of the ended stop ``call``: only a refusal (busy, or not permitted)
    says it was not carried out; any other error is ``unanswered``."""
    try:
        call.result()
    except StopRefused:
        return StopAttempt(StopResult.REFUSED_BUSY, idle)
    except RpcError as error:
        if error.code in NOT_CARRIED_OUT:
            return failed(worker, "stop", error, idle)
        return unanswered(worker, error, idle)
    except Exception as error:  # no status at all: the stop may have been carried out
        return unanswered(worker, error, idle)
    return StopAttempt(StopResult.STOPPED, idle)


def idle_failed(worker: str, error: Exception) -> StopAttempt:
    """What came of a confirmation whose idle RPC raised ``error``: ``refused_busy`` if
    the worker refused it as stopping (``FAILED_PRECONDITION``: it drains work for a
    stop another caller sent, as busy as when it answered 0), else ``failed``."""
    if isinstance(error, RpcError) and error.code is grpc.StatusCode.FAILED_PRECONDITION:
        return StopAttempt(StopResult.REFUSED_BUSY)
    return failed(worker, "idle", error, None)


def unanswered(worker: str, error: BaseException, confirmed: float | None) -> StopAttempt:
    """An ``unanswered`` stop, logged once (it is in no other record)."""
    log.warning(
        "worker %s: the stop got no answer saying what came of it (%s: %s); it counts as retiring",
        field_value(worker),
        type(error).__name__,
        error,
    )
    return StopAttempt(StopResult.UNANSWERED, confirmed)


def failed(worker: str, step: str, error: Exception, confirmed: float | None) -> StopAttempt:
    """A ``failed`` attempt, with the error logged once (it is in no other record)."""
    log.warning(
        "worker %s: %s failed: %s: %s", field_value(worker), step, type(error).__name__, error
    )
    return StopAttempt(StopResult.FAILED, confirmed)
