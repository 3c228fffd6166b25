"""The autoscaler daemon: read, plan, confirm with the worker, stop. Never overlapping.

Safety, in order: a source failure stops no one; the policy nominates; the
worker's own ``idle`` RPC must confirm the threshold; then a conditional stop
("only if idle for at least max_idle") that our worker refuses atomically if
work arrived, with a grace so in-flight work finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from wool_idle.autoscaler.metrics import AutoscalerMetrics
from wool_idle.autoscaler.outcomes import BLOCKING_VERDICTS, BlockReason, StopResult
from wool_idle.autoscaler.policy import (
    Decision,
    PolicySettings,
    PolicyState,
    Verdict,
    after_stop,
    plan,
)
from wool_idle.autoscaler.sources import Source, SourceError
from wool_idle.contract import DEFAULT_GRACE, stop_deadline, valid_idle
from wool_idle.exceptions import IdleUnavailable, RpcError, StopRefused, TransientRpcError
from wool_idle.worker import ClientTls, WorkerConnection

log = logging.getLogger("wool_idle.autoscaler")

DECISION_LOG_SIZE: Final = 1000

BeforeStop = Callable[[str], Awaitable[None]]
"""Awaited after the worker confirmed its idle time and right before the stop RPC."""


@dataclass(frozen=True, kw_only=True)
class ActionSettings:
    """How nominated workers are confirmed and stopped."""

    grace: float = DEFAULT_GRACE
    rpc_timeout: float = 5.0
    tls: ClientTls | None = None


@dataclass(frozen=True)
class Record:
    """One line of the decision log."""

    time: float
    worker: str
    source_idle: float | None
    verdict: Verdict
    confirmed_idle: float | None = None
    result: StopResult | None = None


@dataclass
class Autoscaler:
    """Runs cycles over ``source`` with ``policy``; stops workers per ``action``."""

    source: Source
    policy: PolicySettings
    action: ActionSettings
    metrics: AutoscalerMetrics
    before_stop: BeforeStop | None = None
    state: PolicyState = field(default_factory=PolicyState)
    records: deque[Record] = field(default_factory=lambda: deque(maxlen=DECISION_LOG_SIZE))
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def cycle(self) -> bool:
        """Run one cycle (waiting for any running one first); False if the source failed."""
        async with self._lock:
            started = time.monotonic()
            try:
                ok = await self._cycle()
            finally:
                self.metrics.cycle_duration.set(time.monotonic() - started)
                self.metrics.last_cycle.set(time.time())
            return ok

    async def _cycle(self) -> bool:
        try:
            readings = await self.source.read()
        except SourceError as error:
            self.metrics.source_up.set(0)
            log.warning("source %s unusable, stopping no one: %s", self.source.description, error)
            return False
        self.metrics.source_up.set(1)
        result = plan(readings, self.state, self.policy, time.monotonic())
        self.state = result.state
        self.metrics.candidates.set(result.candidates)
        for decision in result.decisions:
            self._note(decision)
        for decision in result.stops:
            if self.stopping.is_set():
                log.info("shutting down: %s not stopped", decision.worker)
                self.state = after_stop(
                    self.state, decision.worker, False, time.monotonic(), self.policy
                )
                continue
            await self._act(decision)
        return True

    def _note(self, decision: Decision) -> None:
        """Count and log a decision that is not acted on."""
        reason = BLOCKING_VERDICTS.get(decision.verdict)
        if reason is not None:
            self.metrics.blocked.labels(reason.value).inc()
            _log_decision(decision.worker, decision.idle, None, "hold", reason.value)
            self.records.append(
                Record(time.time(), decision.worker, decision.idle, decision.verdict)
            )
        elif decision.verdict not in (Verdict.STOP, Verdict.DRY_RUN):
            log.debug(
                "worker=%s source_idle=%s verdict=%s",
                decision.worker,
                _fmt(decision.idle),
                decision.verdict.value,
            )

    async def _act(self, decision: Decision) -> None:
        confirmed, result = await self.retire(decision)
        self.metrics.stops.labels(result.value).inc()
        if result is StopResult.REFUSED_BUSY:
            self.metrics.blocked.labels(BlockReason.BUSY_ON_RECHECK.value).inc()
        stopped = result in (StopResult.STOPPED, StopResult.DRY_RUN)
        if result is not StopResult.DRY_RUN:
            self.state = after_stop(
                self.state, decision.worker, stopped, time.monotonic(), self.policy
            )
        _log_decision(decision.worker, decision.idle, confirmed, "stop", result.value)
        self.records.append(
            Record(time.time(), decision.worker, decision.idle, decision.verdict, confirmed, result)
        )

    async def retire(self, decision: Decision) -> tuple[float | None, StopResult]:
        """Confirm with the worker and stop it; return the confirmed idle and the result."""
        connection = WorkerConnection(decision.worker, tls=self.action.tls)
        try:
            return await self._confirm_and_stop(connection, decision)
        finally:
            await connection.close()

    async def _confirm_and_stop(
        self, connection: WorkerConnection, decision: Decision
    ) -> tuple[float | None, StopResult]:
        threshold = self.policy.max_idle
        try:
            idle = await connection.idle_time(timeout=self.action.rpc_timeout)
        except TransientRpcError:
            return None, StopResult.UNREACHABLE
        except (IdleUnavailable, RpcError):
            return None, StopResult.FAILED
        if not (valid_idle(idle) and idle >= threshold):
            return idle, StopResult.REFUSED_BUSY
        if decision.verdict is Verdict.DRY_RUN:
            return idle, StopResult.DRY_RUN
        if self.before_stop is not None:
            await self.before_stop(decision.worker)
        grace = self.action.grace
        try:
            await connection.stop(grace, timeout=stop_deadline(grace), if_idle_for=threshold)
        except StopRefused:
            return idle, StopResult.REFUSED_BUSY
        except TransientRpcError:
            return idle, StopResult.UNREACHABLE
        except RpcError:
            return idle, StopResult.FAILED
        return idle, StopResult.STOPPED

    async def run(self, interval: float) -> None:
        """Run cycles every ``interval`` seconds until ``stopping`` is set."""
        while not self.stopping.is_set():
            await self.cycle()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), interval)


def _log_decision(
    worker: str, source_idle: float | None, confirmed: float | None, action: str, outcome: str
) -> None:
    """One log line per decision; JSON logs carry the same facts as fields."""
    key = "result" if action == "stop" else "reason"
    confirmed_text = "" if action != "stop" else f" confirmed_idle={_fmt(confirmed)}"
    log.info(
        "worker=%s source_idle=%s%s action=%s %s=%s",
        worker,
        _fmt(source_idle),
        confirmed_text,
        action,
        key,
        outcome,
        extra={
            "worker": worker,
            "source_idle": source_idle,
            "confirmed_idle": confirmed,
            "action": action,
            key: outcome,
        },
    )


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f}"
