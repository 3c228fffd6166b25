"""The worker's gRPC servicer: run tasks, report idle time, stop with a grace.

All handlers run on one event loop. Admission of a dispatch and the check of a
conditional stop are synchronous (no ``await`` between check and effect), so a
conditional stop that passes and a dispatch can never interleave: either the
task is tracked first and the stop is refused, or the stop wins and the task
is refused with ``UNAVAILABLE`` before it starts.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, TypeAlias

import grpc
from google.protobuf.unknown_fields import UnknownFieldSet

from wool_idle.proto import Ack, IdleTime, Nack, Request, Response, StopRequest, Void
from wool_idle.worker.auth import MethodPolicy, describe
from wool_idle.worker.containment import contained
from wool_idle.worker.in_flight import InFlightTasks
from wool_idle.worker.task_codec import (
    bounded_response,
    coroutine_of,
    outcome_response,
    refusal_nack,
)

log = logging.getLogger(__name__)

Backpressure = Callable[["WorkerService"], bool]
"""A hook asked before each dispatch is tracked; ``True`` refuses it."""

Context: TypeAlias = Any
"""``grpc.aio.ServicerContext``; grpcio ships no type information."""

MAX_OUTCOME_BYTES: Final = 4 * 1024 * 1024
"""The largest result or exception message sent back: gRPC's default receive limit,
which our client and wool's keep. A larger outcome is answered as ``OutcomeTooLarge``."""
CANCEL_WAIT: Final = 5.0
"""Seconds the tasks a stop cancelled get to end. One that ignores its cancellation
is left running and the service stops all the same: the process's exit is then
bounded (``leaving``), and the task's caller loses its outcome."""


class WorkerService:
    """Runs dispatched coroutine functions and answers ``idle`` and ``stop``.

    ``stopping`` is set once shutdown begins (new dispatches then get
    ``UNAVAILABLE``); ``stopped`` once in-flight tasks have drained or been
    cancelled (and had ``cancel_wait`` seconds to end), after which the server
    may close. A task's outcome is its own:
    one that raises ``SystemExit`` or ``KeyboardInterrupt`` fails alone (the
    worker and the other tasks carry on; ``containment`` says which tasks and
    callbacks a task starts are kept in too), as does one whose result or
    exception raises anything while pickled; one whose result or exception
    pickles to more than ``max_outcome_bytes`` is answered as ``OutcomeTooLarge``.
    A task whose unpickling or call raises anything is refused with a ``Nack``.
    """

    def __init__(
        self,
        *,
        backpressure: Backpressure | None = None,
        authorization: MethodPolicy | None = None,
        max_outcome_bytes: int = MAX_OUTCOME_BYTES,
        cancel_wait: float = CANCEL_WAIT,
    ):
        self.in_flight = InFlightTasks()
        self.authorization = authorization or MethodPolicy()
        self.max_outcome_bytes = max_outcome_bytes
        self.cancel_wait = cancel_wait
        self.stopping = asyncio.Event()
        self.stopped = asyncio.Event()
        self._backpressure = backpressure
        self._drain: asyncio.Task[None] | None = None
        self._cut = asyncio.Event()  # set once the drain's grace has run out
        self._cutter: asyncio.TimerHandle | None = None
        self._cancelled_by_stop: set[asyncio.Future[Any]] = set()

    async def idle(self, request: Void, context: Context) -> IdleTime:
        """Answer the seconds since the in-flight set last emptied (0 while busy), and
        that this worker honours the conditional stop. Once stopping (a stop or a
        signal began the shutdown), refuse with ``FAILED_PRECONDITION``: the worker
        is leaving, and a reader must count it neither alive (read busy while it
        drains, it held its pool's floor) nor stoppable."""
        if self.stopping.is_set():
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "worker is stopping")
        return IdleTime(seconds=self.in_flight.idle_seconds(), conditional_stop=True)

    async def stop(self, request: StopRequest, context: Context) -> Void:
        """Shut down with ``request.timeout`` as the grace, then answer.

        Refuse with ``PERMISSION_DENIED`` if the caller may not stop this
        worker; with ``INVALID_ARGUMENT`` if the request carries a field this
        worker cannot read (a condition of a newer protocol, or ``if_idle_for``
        sent with another type: protobuf would drop it, and the stop would run
        unconditionally) or if the grace is NaN (none of 0, a drain or a wait;
        asyncio may take it as no time and cancel in-flight tasks) or if
        ``if_idle_for`` is not a finite number >= 0, whatever the worker's state;
        with ``if_idle_for`` set, with ``FAILED_PRECONDITION`` unless no task runs
        and the worker has been idle at least that long, or it is stopping
        already (the stop then joins that shutdown, whose grace holds: the
        worker leaves either way). Every decision is logged with the caller, the
        idle value and the grace.
        """
        idle = self.in_flight.idle_seconds()
        refusal = self._stop_refusal(request, idle, context)
        facts = f"caller={describe(context)} idle={idle:.3f} grace={request.timeout}"
        if refusal is not None:
            code, reason = refusal
            log.info("stop refused %s reason=%s", facts, code.name)
            await context.abort(code, reason)
        log.info("stop accepted %s", facts)
        await self.shutdown(request.timeout)
        return Void()

    def _stop_refusal(
        self, request: StopRequest, idle: float, context: Context
    ) -> tuple[grpc.StatusCode, str] | None:
        """Why this stop must be refused, or None. Synchronous on purpose."""
        if not self.authorization.permits("stop", context):
            caller = describe(context)
            return grpc.StatusCode.PERMISSION_DENIED, f"caller {caller} not in --allow-stop"
        if len(UnknownFieldSet(request)):  # a condition it cannot read: never a stop
            return grpc.StatusCode.INVALID_ARGUMENT, "stop carries fields this worker cannot read"
        if math.isnan(request.timeout):
            return grpc.StatusCode.INVALID_ARGUMENT, "grace (timeout) must be a number"
        if not request.HasField("if_idle_for"):
            return None
        required = request.if_idle_for
        if not math.isfinite(required) or required < 0:
            return grpc.StatusCode.INVALID_ARGUMENT, "if_idle_for must be a finite number >= 0"
        if self.stopping.is_set():  # leaving anyway: it joins the shutdown under way
            return None
        if len(self.in_flight) or idle < required:
            return (
                grpc.StatusCode.FAILED_PRECONDITION,
                f"worker idle {idle:.3f}s with {len(self.in_flight)} task(s) in flight; "
                f"required idle {required:.3f}s",
            )
        return None

    def shutdown(self, grace: float, *, at_most: bool = False) -> asyncio.Future[None]:
        """Begin shutdown (idempotent) and return a future done once drained.

        ``grace`` 0 cancels in-flight tasks at once, a positive value drains for
        that long then cancels, a negative value waits indefinitely. A second
        call joins the first shutdown and keeps its grace; ``at_most`` (a
        supervisor's SIGTERM, whose own deadline counts from now) makes a drain
        under way end ``grace`` seconds from now if it would end later or never
        (a negative ``grace`` changes nothing), never later than it would have.
        """
        if self._drain is None:
            self.stopping.set()
            self._cut_in(grace)
            self._drain = asyncio.ensure_future(self._drain_tasks())
        elif at_most:
            self._cut_in(grace)
        return asyncio.shield(self._drain)

    def _cut_in(self, grace: float) -> None:
        """End the drain ``grace`` seconds from now unless it ends sooner (< 0: never)."""
        if grace == 0:
            self._cut.set()
        if grace <= 0 or self._cut.is_set():
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + grace
        if self._cutter is not None:
            if self._cutter.when() <= when:
                return
            self._cutter.cancel()
        self._cutter = loop.call_at(when, self._cut.set)

    async def _drain_tasks(self) -> None:
        pending = set(self.in_flight)
        if pending and not self._cut.is_set():
            drained = asyncio.ensure_future(asyncio.wait(pending))
            cut = asyncio.ensure_future(self._cut.wait())
            await asyncio.wait({drained, cut}, return_when=asyncio.FIRST_COMPLETED)
            for waiting in (drained, cut):
                waiting.cancel()
            pending = {task for task in pending if not task.done()}
        if self._cutter is not None:
            self._cutter.cancel()
        self._cancelled_by_stop |= pending
        for task in pending:
            task.cancel()
        if pending:
            _, left = await asyncio.wait(pending, timeout=self.cancel_wait)
            if left:
                log.warning("stopping without %d task(s) ignoring their cancellation", len(left))
        self.stopped.set()

    async def dispatch(
        self, requests: AsyncIterator[Request], context: Context
    ) -> AsyncIterator[Response]:
        """Admit one task, answer Ack (or Nack), then its result or exception."""
        if not self.authorization.permits("dispatch", context):
            caller = describe(context)
            log.warning("dispatch denied caller=%s", caller)
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, f"caller {caller} not in --allow-dispatch"
            )
        request = await anext(aiter(requests), None)
        if request is None:
            return
        admitted = self._admit(request)
        if isinstance(admitted, grpc.StatusCode):
            await context.abort(admitted, _REFUSALS[admitted])
        if isinstance(admitted, Nack):
            yield Response(nack=admitted)
            return
        try:
            yield Response(ack=Ack())
        except BaseException:  # the caller left before the Ack went out: nobody waits
            admitted.cancel()
            raise
        outcome = await outcome_response(admitted, self._cancelled_by_stop)
        yield bounded_response(outcome, self.max_outcome_bytes)

    def _admit(self, request: Request) -> asyncio.Task[Any] | Nack | grpc.StatusCode:
        """Start and track the task, or say why not. Synchronous on purpose."""
        if self.stopping.is_set():
            return grpc.StatusCode.UNAVAILABLE
        if self._backpressure is not None and self._backpressure(self):
            return grpc.StatusCode.RESOURCE_EXHAUSTED
        try:
            uuid.UUID(request.task_id)
        except ValueError:
            return refusal_nack(f"malformed task id {request.task_id!r}")
        coroutine = coroutine_of(request.task)
        if isinstance(coroutine, Nack):
            return coroutine
        task = asyncio.ensure_future(contained(coroutine))
        self.in_flight.track(task)
        return task


_REFUSALS: Final = {
    grpc.StatusCode.UNAVAILABLE: "worker is shutting down",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "worker is at capacity",
}
