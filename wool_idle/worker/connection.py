"""``WorkerConnection``: the one client every part uses to talk to a worker."""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import cloudpickle
import grpc

from wool_idle.contract import DEFAULT_GRACE
from wool_idle.exceptions import rpc_error
from wool_idle.proto import Request, Response, StopRequest, Void
from wool_idle.worker.address import parse_address
from wool_idle.worker.channels import ChannelKey, ChannelPool, abandoned, loops_of, pool
from wool_idle.worker.dispatch_outcome import dispatch_error, task_outcome
from wool_idle.worker.stubs import Stubs, decoded
from wool_idle.worker.tls import ClientTls

T = TypeVar("T")


LONGEST_DEADLINE: Final = 100 * 365 * 86400.0
"""A century: a longer timeout is sent as no deadline. gRPC's deadline (int64
nanoseconds since 1970) overflows some 230 years from now, and an overflowed
one has passed already: the call would fail at once with DEADLINE_EXCEEDED."""


def check_timeout(timeout: float | None) -> float | None:
    """The deadline to give gRPC for ``timeout``: ``ValueError`` unless it is None
    or positive; None (no deadline) when it exceeds ``LONGEST_DEADLINE``."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be positive or None, got {timeout!r}")
    return None if timeout is None or timeout > LONGEST_DEADLINE else timeout


def _condition(if_idle_for: float) -> float:
    """``if_idle_for`` as the wire's double: ``ValueError`` unless a finite number >= 0."""
    try:
        seconds = float(if_idle_for)
    except OverflowError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"if_idle_for must be a finite number >= 0, got {if_idle_for!r}")
    return seconds


@dataclass(frozen=True)
class IdleReport:
    """One answer to the idle RPC."""

    seconds: float
    """Idle seconds exactly as the worker sent them (check with ``contract.valid_idle``)."""
    conditional_stop: bool
    """Whether the worker honours ``stop(if_idle_for=...)``: True from a wool-idle
    worker, False from a wool worker (which stops unconditionally)."""


class WorkerConnection:
    """A client for one worker, over a pooled channel.

    The channel is taken from the running loop's pool on first use and given
    back by ``close`` (or leaving ``async with``) once the calls in flight on
    it have finished. Each event loop that uses the connection has its own
    channel (a gRPC channel works on the loop that made it only), so one
    connection serves ``asyncio.run`` after ``asyncio.run``, or loops of several
    threads at once; ``close`` gives back the running loop's. One collected
    unclosed gives its channels back and emits ``ResourceWarning``. When the pool
    says the channel is outdated (its TLS files changed), the next call moves
    to a fresh one. Failed calls raise the
    errors of ``wool_idle.exceptions``; a reply that does not decode is a
    ``MalformedReply``. A call raises ``OSError`` naming the file if the TLS
    files were never loadable (later bad files keep the last good ones).
    """

    def __init__(
        self,
        target: str,
        *,
        tls: ClientTls | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.target = parse_address(target)
        self.key = ChannelKey(self.target, tls, tuple(options))
        self._stubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Stubs] = (
            weakref.WeakKeyDictionary()
        )
        weakref.finalize(self, abandoned, self.key, self._stubs).atexit = False

    async def __aenter__(self) -> WorkerConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @contextlib.asynccontextmanager
    async def _call(self) -> AsyncIterator[Stubs]:
        """The running loop's current channel's stubs, held for the duration of one call."""
        loop = asyncio.get_running_loop()
        channels = pool()
        stubs = self._stubs.get(loop)
        if stubs is None or not channels.current(self.key, stubs.channel):
            for other in loops_of(self._stubs):
                if other.is_closed():
                    self._stubs.pop(other, None)  # its channel went with its loop
            await channels.look_again(self.key)
            fresh = self._stubs[loop] = Stubs(channels.acquire(self.key))
            if stubs is not None:
                await self._retire(channels, stubs)
            stubs = fresh
        stubs.calls += 1
        try:
            yield stubs
        finally:
            stubs.calls -= 1
            if stubs is not self._stubs.get(loop):
                await self._retire(channels, stubs)

    async def _retire(self, channels: ChannelPool, stubs: Stubs) -> None:
        """Give back to ``channels`` a channel this connection no longer uses, once idle."""
        if stubs.calls == 0 and not stubs.released:
            stubs.released = True
            await channels.release(self.key, stubs.channel)

    async def idle_report(self, timeout: float | None = None) -> IdleReport:
        """Ask the worker's idle RPC: its idle seconds and whether it honours the
        conditional stop.

        ``timeout`` (None or positive; see ``check_timeout``) is the call's
        deadline. Raises ``ValueError`` for a non-positive timeout before any call,
        ``IdleUnavailable`` if the worker predates the idle RPC,
        ``MalformedReply`` if the reply does not decode.
        """
        deadline = check_timeout(timeout)
        async with self._call() as stubs:
            try:
                reply = await stubs.idle(Void(), timeout=deadline)
            except grpc.aio.AioRpcError as error:
                raise rpc_error("idle", error) from error
        message = decoded("idle", reply)
        return IdleReport(float(message.seconds), bool(message.conditional_stop))

    async def idle_time(self, timeout: float | None = None) -> float:
        """Return the worker's reported idle seconds, exactly as sent.

        The same call and errors as ``idle_report``, which also tells whether
        the worker honours the conditional stop.
        """
        return (await self.idle_report(timeout)).seconds

    async def stop(
        self,
        grace: float = DEFAULT_GRACE,
        *,
        timeout: float | None = None,
        if_idle_for: float | None = None,
    ) -> None:
        """Ask the worker to stop, draining in-flight tasks for ``grace`` seconds.

        ``grace`` 0 cancels at once; negative waits indefinitely. With
        ``if_idle_for``, our worker refuses (``StopRefused``) unless it has been
        idle at least that long; a wool worker ignores the condition (see
        ``IdleReport.conditional_stop``). ``timeout`` is the call's deadline
        and must exceed a non-negative grace (``ValueError`` before any call
        otherwise: the worker answers once drained, and a deadline that ran out
        first would be a ``TransientRpcError``, read as an unreachable worker
        while it stops). ``ValueError`` before any call for a NaN grace or one
        that is 0 as the wire's 32-bit float (``-1e-50``): a worker might
        cancel in-flight tasks at once; for an integer grace
        too large for any float (``10**400``); and for an ``if_idle_for`` that is
        not a finite number >= 0 (our worker would refuse it as an invalid
        argument).
        """
        deadline = check_timeout(timeout)
        try:
            request = StopRequest(timeout=grace)
        except OverflowError:
            raise ValueError(f"grace {grace!r} is too large for a float") from None
        if math.isnan(grace) or (request.timeout == 0) != (grace == 0):
            raise ValueError(f"grace {grace!r} has no meaning as a 32-bit float on the wire")
        if deadline is not None and grace >= 0 and deadline <= grace:
            raise ValueError(
                f"timeout {timeout!r} must exceed grace {grace!r}: the worker answers "
                "once drained (see contract.stop_deadline)"
            )
        if if_idle_for is not None:
            request.if_idle_for = _condition(if_idle_for)
        async with self._call() as stubs:
            try:
                reply = await stubs.stop(request, timeout=deadline)
            except grpc.aio.AioRpcError as error:
                raise rpc_error("stop", error) from error
        decoded("stop", reply)

    async def dispatch(
        self, function: Callable[..., Coroutine[Any, Any, T]], /, *args: Any, **kwargs: Any
    ) -> T:
        """Run ``function(*args, **kwargs)`` on the worker and return its result.

        Raises ``DispatchRejected`` if the worker refused the task before
        tracking it; the task's own exception if it raised one (a
        ``BaseException`` that is not an ``Exception``, like ``SystemExit``,
        comes wrapped in ``TaskAborted``; a ``TransientRpcError`` or
        ``DispatchRejected`` of a dispatch the task made itself, or an exception
        group holding one, in ``NestedDispatchFailed``); RPC errors as mapped in
        ``wool_idle.exceptions``. Only a failure before the worker
        acknowledged the task can be a ``TransientRpcError`` (a call the worker
        cancels as it closes is one: the task never started), never the refusal
        of a task over ``dispatch_outcome.MAX_TASK_BYTES`` (an ``RpcError``); any
        failure after it is a ``TaskOutcomeLost``, since the task may have run.
        """
        request = Request(
            task_id=str(uuid.uuid4()), task=cloudpickle.dumps((function, args, kwargs))
        )
        responses: list[Response] = []
        async with self._call() as stubs:
            stream = stubs.dispatch(request)
            try:
                async for reply in stream:
                    responses.append(decoded("dispatch", reply))
            except grpc.aio.AioRpcError as error:
                raise dispatch_error(error, responses, request.ByteSize()) from error
            finally:
                stream.cancel()
        result: T = task_outcome(responses)
        return result

    async def close(self) -> None:
        """Give the running loop's channel back to its pool once its calls in flight
        are done; the connection may be used again later."""
        stubs = self._stubs.pop(asyncio.get_running_loop(), None)
        if stubs is not None:
            await self._retire(pool(), stubs)
