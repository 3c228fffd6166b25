"""Asking workers for their idle time: one probe, and a coalesced fan-out.

A probe classifies the answer. Only a finite number >= 0 is an idle value;
anything else leaves ``idle`` as None with a reason, so the exporter never
renders a 0 (reads as busy) or a stale value (reads as idle) for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

import grpc

from wool_idle.contract import valid_idle
from wool_idle.exceptions import IdleUnavailable, RpcError
from wool_idle.exporter.targets import Target
from wool_idle.worker import ClientTls, WorkerConnection

ADHOC_TTL: Final = 300.0
"""Seconds a connection opened by ``/probe`` for an unconfigured target is kept unused."""

CHANNEL_OPTIONS: Final = (
    # Pick up a worker restarted on the same address within about a second.
    # (grpc.min_reconnect_backoff_ms is left alone: it is also the connect timeout.)
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class ErrorReason(StrEnum):
    """Why a probe produced no idle value (the ``reason`` label)."""

    UNAVAILABLE = "unavailable"
    DEADLINE = "deadline"
    UNIMPLEMENTED = "unimplemented"
    INVALID_VALUE = "invalid_value"
    OTHER = "other"


@dataclass(frozen=True)
class ProbeResult:
    """One worker's answer on one scrape."""

    target: Target
    up: bool
    supported: bool
    idle: float | None
    duration: float
    error: ErrorReason | None = None


@dataclass
class _FanOut:
    """One round of probes, and the results it has so far."""

    targets: Sequence[Target]
    results: dict[str, ProbeResult] = field(default_factory=dict)
    task: asyncio.Future[None] = field(init=False)

    def answers(self, budget: float) -> list[ProbeResult]:
        """A result per target; one not heard from yet is a missed deadline."""
        return [
            self.results.get(t.address)
            or ProbeResult(
                t, up=False, supported=False, idle=None, duration=budget, error=ErrorReason.DEADLINE
            )
            for t in self.targets
        ]


class Prober:
    """Probes targets over persistent pooled connections, with bounded concurrency.

    Connections open on first use. ``sync`` closes those of targets that left
    the configured set at once, and those ``/probe`` opened for unconfigured
    targets once unused for ``ADHOC_TTL``. ``fan_out`` probes every target;
    concurrent calls share the fan-out already in flight (so HA Prometheus
    pairs do not double the load).
    """

    def __init__(self, *, tls: ClientTls | None, timeout: float, concurrency: int) -> None:
        self.tls = tls
        self.timeout = timeout
        self.errors: Counter[ErrorReason] = Counter({reason: 0 for reason in ErrorReason})
        self.last: dict[str, ProbeResult] = {}
        self.last_duration = 0.0
        self._semaphore = asyncio.Semaphore(concurrency)
        self._connections: dict[str, WorkerConnection] = {}
        self._adhoc_used: dict[str, float] = {}
        self._in_flight: _FanOut | None = None

    def connection(self, address: str) -> WorkerConnection:
        """The persistent connection to ``address``, opened on first use."""
        found = self._connections.get(address)
        if found is None:
            found = WorkerConnection(address, tls=self.tls, options=CHANNEL_OPTIONS)
            self._connections[address] = found
        return found

    async def sync(self, targets: Sequence[Target]) -> None:
        """Close connections no configured target (nor a recent ``/probe``) needs."""
        wanted = {target.address for target in targets}
        cutoff = time.monotonic() - ADHOC_TTL
        for address in [a for a in self._connections if a not in wanted]:
            if self._adhoc_used.get(address, -math.inf) > cutoff:
                continue
            self._adhoc_used.pop(address, None)
            self.last.pop(address, None)
            await self._connections.pop(address).close()

    async def probe_adhoc(self, target: Target, deadline: float) -> ProbeResult:
        """``probe`` for ``/probe``: keeps the connection for ``ADHOC_TTL`` after use."""
        self._adhoc_used[target.address] = time.monotonic()
        return await self.probe(target, deadline)

    async def close(self) -> None:
        """Close every connection."""
        self._adhoc_used.clear()
        await self.sync(())

    async def fan_out(self, targets: Sequence[Target], budget: float) -> list[ProbeResult]:
        """Probe ``targets`` within ``budget`` seconds, sharing a fan-out in flight.

        A scrape that joins a running fan-out waits at most its own budget; the
        workers that fan-out has not heard from by then count as missed
        deadlines in this scrape's answer (no idle value, never an old one).
        """
        joined = self._in_flight
        if joined is None:
            fan = self._in_flight = _FanOut(targets)
            fan.task = asyncio.ensure_future(self._run(fan, budget))
            fan.task.add_done_callback(self._clear_in_flight)
            await asyncio.shield(fan.task)
            return fan.answers(budget)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(joined.task), budget)
        return joined.answers(budget)

    def _clear_in_flight(self, _: asyncio.Future[None]) -> None:
        self._in_flight = None

    async def _run(self, fan: _FanOut, budget: float) -> None:
        started = time.monotonic()
        await self.sync(fan.targets)
        deadline = started + budget
        await asyncio.gather(*(self._bounded(fan, t, deadline) for t in fan.targets))
        self.last_duration = time.monotonic() - started

    async def _bounded(self, fan: _FanOut, target: Target, deadline: float) -> None:
        async with self._semaphore:
            fan.results[target.address] = await self.probe(target, deadline)

    async def probe(self, target: Target, deadline: float) -> ProbeResult:
        """Ask one target for its idle time, giving up at ``deadline`` (monotonic)."""
        started = time.monotonic()
        timeout = min(self.timeout, deadline - started)
        if timeout <= 0:
            return self._record(target, started, error=ErrorReason.DEADLINE)
        try:
            seconds = await self.connection(target.address).idle_time(timeout=timeout)
        except IdleUnavailable:
            return self._record(target, started, up=True, error=ErrorReason.UNIMPLEMENTED)
        except RpcError as error:
            reason = _reason(error.code)
            # A status other than unreachable/deadline came from the worker: it is up.
            return self._record(target, started, up=reason is ErrorReason.OTHER, error=reason)
        if not valid_idle(seconds):
            return self._record(target, started, up=True, error=ErrorReason.INVALID_VALUE)
        return self._record(target, started, up=True, idle=seconds)

    def _record(
        self,
        target: Target,
        started: float,
        *,
        up: bool = False,
        idle: float | None = None,
        error: ErrorReason | None = None,
    ) -> ProbeResult:
        if error is not None:
            self.errors[error] += 1
        result = ProbeResult(
            target=target,
            up=up,
            supported=up and error is not ErrorReason.UNIMPLEMENTED,
            idle=idle,
            duration=time.monotonic() - started,
            error=error,
        )
        self.last[target.address] = result
        return result


def _reason(code: grpc.StatusCode) -> ErrorReason:
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return ErrorReason.DEADLINE
    if code is grpc.StatusCode.UNAVAILABLE:
        return ErrorReason.UNAVAILABLE
    return ErrorReason.OTHER
