"""The actuator: confirms a planned stop with the worker itself, then stops it.

Safety, in order: the worker's own ``idle`` RPC must confirm the threshold;
then a conditional stop ("only if idle for at least max_idle") that our worker
refuses atomically if work arrived, with a grace so in-flight work finishes.
A worker whose idle reply does not say it honours the conditional stop (a wool
worker) stops unconditionally: it is asked its idle time again after
``before_stop`` (a state file's write may take seconds), if any, right before
the stop, and a task arriving in that last round trip drains for the grace, so
with a grace of 0 no stop is sent at all (``unconditional_grace_zero``), and
with any other grace the log says the window is open. Whatever goes wrong with
one worker is that worker's result, never the cycle's: every exception but
cancellation becomes a result. Once the daemon leaves (``leaving``), all that
comes before the stop (confirmations, ``before_stop``) is cut short: no stop.

Once the stop is sent, only an answer that says it was not carried out (a
refusal: busy, or not permitted) counts as not stopped; any other outcome is
``unanswered``, and the worker counts as retiring (it may be draining). An
accepted stop answers only once the worker drained, up to the grace, so the
cycle waits ``STOP_REPLY_WAIT`` for the reply; past it the worker is
``unanswered`` and the call goes on in the background with its own deadline
(the drain and ``STOP_DEADLINE_MARGIN``; none with an unbounded grace). The
call is never cut short: a wool worker whose stop call is cancelled stops
draining and never exits. When such a call ends, what came of it is handed to
``stop_ended``: ``stopped``, a refusal after all, or ``unanswered`` (the
worker exited, the connection dropped); while it goes on, no other stop is
sent to that worker (it stays ``unanswered``). ``finish_stops`` waits for
those calls when the daemon leaves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Final, Protocol

from wool_idle.autoscaler.leaving import unless_leaving
from wool_idle.autoscaler.policy import Decision
from wool_idle.autoscaler.stop_outcome import StopAttempt, failed, idle_failed, stop_outcome
from wool_idle.autoscaler.verdicts import StopResult
from wool_idle.contract import DEFAULT_GRACE, MAX_REPLY_BYTES, stop_deadline, valid_idle
from wool_idle.exceptions import TransientRpcError
from wool_idle.logs import field_value
from wool_idle.worker import ClientTls, IdleReport, WorkerConnection

__all__ = [
    "STOP_REPLY_WAIT",
    "ActionSettings",
    "Actuator",
    "BeforeStop",
    "StopEnded",
    "WorkerActuator",
]

log = logging.getLogger("wool_idle.autoscaler")

BeforeStop = Callable[[str], Awaitable[None]]
"""Awaited after the worker confirmed its idle time, before the stop RPC (and before the
second confirmation of a worker that does not honour the conditional stop)."""
StopEnded = Callable[[Decision, StopResult], Awaitable[None]]
"""Awaited when a stop that went on in the background ended: its decision, and what came
of it (``stopped``, ``refused_busy`` or ``failed`` after all, or ``unanswered``)."""
CHANNEL_OPTIONS: Final = (("grpc.max_receive_message_length", MAX_REPLY_BYTES),)
"""A reply over ``MAX_REPLY_BYTES`` is not taken in (``RESOURCE_EXHAUSTED``: the worker
is unreachable), so its confirmation fails and no stop is sent."""
STOP_REPLY_WAIT: Final = 10.0
"""Seconds a cycle waits for a stop's reply (a refusal comes at once); past it the call
goes on in the background and the worker counts as retiring."""


@dataclass(frozen=True, kw_only=True)
class ActionSettings:
    """How planned stops are confirmed and sent."""

    grace: float = DEFAULT_GRACE
    rpc_timeout: float = 5.0
    tls: ClientTls | None = None


class Actuator(Protocol):
    """Carries out one planned stop."""

    async def retire(self, decision: Decision) -> StopAttempt | None:
        """Confirm and stop ``decision.worker``; None if the daemon left before a stop was
        sent (nothing came of it). Never raises but for cancellation."""
        ...

    async def finish_stops(self, timeout: float) -> None:
        """Wait, at most ``timeout`` seconds, for the stops still going on."""
        ...

    def going_on(self) -> Collection[str]:
        """The workers whose stop call goes on in the background."""
        ...


class WorkerActuator:
    """The ``Actuator`` of the daemon: the worker's idle RPC, then a conditional stop."""

    def __init__(
        self,
        settings: ActionSettings,
        *,
        max_idle: float,
        dry_run: bool,
        before_stop: BeforeStop | None = None,
        stop_ended: StopEnded | None = None,
        leaving: asyncio.Event | None = None,
    ) -> None:
        self.settings, self.max_idle, self.leaving = settings, max_idle, leaving
        self.dry_run, self.before_stop, self.stop_ended = dry_run, before_stop, stop_ended
        self._going_on: dict[str, asyncio.Task[None]] = {}
        """The stops going on in the background, by worker."""

    async def retire(self, decision: Decision) -> StopAttempt | None:
        worker = decision.worker
        if worker in self._going_on:  # never a second stop call beside the first
            log.info(
                "worker %s: its stop still goes on; it counts as retiring", field_value(worker)
            )
            return StopAttempt(StopResult.UNANSWERED, going_on=True)
        try:
            connection = WorkerConnection(worker, tls=self.settings.tls, options=CHANNEL_OPTIONS)
        except Exception as error:  # not an address after all, unreadable TLS files
            return failed(worker, "connect", error, None)
        sent: list[asyncio.Future[None]] = []
        try:
            return await self._confirm_and_stop(connection, worker, sent)
        finally:
            if sent and not sent[0].done():  # the stop goes on; its task closes the connection
                self._go_on(sent[0], connection, decision)
            else:
                await connection.close()

    def going_on(self) -> Collection[str]:
        return self._going_on.keys()

    async def finish_stops(self, timeout: float) -> None:
        """Wait, at most ``timeout`` seconds, for the stops going on in the background;
        leaving cancels the rest (a wool worker whose stop call is cancelled may never
        exit), which is logged."""
        if not self._going_on:
            return
        _, left = await asyncio.wait(set(self._going_on.values()), timeout=timeout)
        if left:
            log.warning(
                "leaving with %d stop(s) still going on (their workers drain longer than "
                "%gs): leaving cuts them short, and a wool worker so cut may not exit",
                len(left),
                timeout,
            )

    def _go_on(
        self, call: asyncio.Future[None], connection: WorkerConnection, decision: Decision
    ) -> None:
        """Let the stop ``call`` of ``decision``'s worker end in the background, hand what
        came of it to ``stop_ended``, then close ``connection`` (cancelled too)."""
        worker = decision.worker
        named = field_value(worker)

        async def ending() -> None:
            try:
                await asyncio.wait({call})
                ended = stop_outcome(worker, call, decision.idle).result
                log.info("worker %s: the stop it drained for ended: %s", named, ended.value)
                if self.stop_ended is not None:
                    await self.stop_ended(decision, ended)
            except Exception:
                log.exception("worker %s: recording the end of its stop failed", named)
            finally:  # cancelled too (the process leaving): the call ends with it
                call.cancel()
                del self._going_on[worker]
                await connection.close()

        # Cut at exit, its error is nobody's to log: seen, or asyncio logs it at exit.
        call.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._going_on[worker] = asyncio.ensure_future(ending())

    async def _confirm(self, connection: WorkerConnection, worker: str) -> IdleReport | StopAttempt:
        """``worker``'s idle report if it confirms the threshold, else what came of it."""
        try:
            report = await connection.idle_report(timeout=self.settings.rpc_timeout)
        except TransientRpcError:
            return StopAttempt(StopResult.UNREACHABLE)
        except Exception as error:  # IdleUnavailable, RpcError, a reply that does not decode
            return idle_failed(worker, error)
        if not (valid_idle(report.seconds) and report.seconds >= self.max_idle):
            return StopAttempt(StopResult.REFUSED_BUSY, report.seconds)
        return report

    async def _confirm_and_stop(
        self, connection: WorkerConnection, worker: str, sent: list[asyncio.Future[None]]
    ) -> StopAttempt | None:
        """Confirm and stop ``worker``; the stop call, once sent, is put in ``sent``. None
        if ``leaving`` cut the confirmation short: no stop sent."""
        report = await unless_leaving(self.leaving, self._confirmed(connection, worker))
        if report is None or isinstance(report, StopAttempt):  # None: leaving cut it short
            return report
        grace = self.settings.grace
        call = asyncio.ensure_future(
            connection.stop(grace, timeout=stop_deadline(grace), if_idle_for=self.max_idle)
        )
        sent.append(call)
        await asyncio.wait({call}, timeout=STOP_REPLY_WAIT)
        if not call.done():
            log.warning(
                "worker %s: no answer to the stop within %gs (an accepted stop answers once "
                "drained); it counts as retiring, and the stop goes on",
                field_value(worker),
                STOP_REPLY_WAIT,
            )
            return StopAttempt(StopResult.UNANSWERED, report.seconds, going_on=True)
        return stop_outcome(worker, call, report.seconds)

    async def _confirmed(
        self, connection: WorkerConnection, worker: str
    ) -> IdleReport | StopAttempt:
        """``worker``'s last idle report if the stop is to be sent (``before_stop`` done),
        else what came of it."""
        report = await self._confirm(connection, worker)
        if isinstance(report, StopAttempt):
            return report
        idle, grace = report.seconds, self.settings.grace
        if not report.conditional_stop and grace == 0:
            log.warning(
                "worker %s does not say it honours the conditional stop: no stop with grace "
                "0s, a task arriving before it would be cancelled",
                field_value(worker),
            )
            return StopAttempt(StopResult.UNCONDITIONAL_GRACE_ZERO, idle)
        if self.dry_run:
            return StopAttempt(StopResult.DRY_RUN, idle)
        if not report.conditional_stop:
            log.info(
                "worker %s does not say it honours the conditional stop: the window is open, "
                "a task arriving before the stop drains for grace %s",
                field_value(worker),
                "without limit" if grace < 0 else f"{grace:g}s",
            )
        if self.before_stop is not None:
            try:
                await self.before_stop(worker)
            except Exception as error:
                return failed(worker, "before stop", error, idle)
            if not report.conditional_stop:  # it may have taken seconds: confirm again
                return await self._confirm(connection, worker)
        return report
