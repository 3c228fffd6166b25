"""``WorkerConnection``: the one client every part uses to talk to a worker."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import cloudpickle
import grpc

from wool_idle.contract import DEFAULT_GRACE
from wool_idle.exceptions import DispatchRejected, TransientRpcError, WoolError, rpc_error
from wool_idle.proto import DISPATCH, IDLE, STOP, IdleTime, Request, Response, StopRequest, Void
from wool_idle.worker.address import parse_address
from wool_idle.worker.channels import ChannelKey, pool
from wool_idle.worker.tls import ClientTls

T = TypeVar("T")


def check_timeout(timeout: float | None) -> None:
    """Raise ``ValueError`` unless ``timeout`` is None or positive."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be positive or None, got {timeout!r}")


class WorkerConnection:
    """A client for one worker, over a pooled channel.

    The channel is taken from the running loop's pool on first use and given
    back by ``close`` (or leaving ``async with``). Failed calls raise the
    errors of ``wool_idle.exceptions``.
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
        self._calls: _Calls | None = None

    async def __aenter__(self) -> WorkerConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _stubs(self) -> _Calls:
        """The pooled channel's callables, made once per acquisition (a hot path)."""
        if self._calls is None:
            self._calls = _Calls(pool().acquire(self.key))
        return self._calls

    async def idle_time(self, timeout: float | None = None) -> float:
        """Return the worker's reported idle seconds, exactly as sent.

        ``timeout`` (None or positive) is the call's deadline. Raises
        ``ValueError`` for a non-positive timeout before any call,
        ``IdleUnavailable`` if the worker predates the idle RPC.
        """
        check_timeout(timeout)
        try:
            reply: IdleTime = await self._stubs().idle(Void(), timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise rpc_error("idle", error) from error
        return float(reply.seconds)

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
        idle at least that long; a wool worker ignores the condition.
        ``timeout`` is the call's deadline and must exceed a non-negative grace.
        """
        check_timeout(timeout)
        request = StopRequest(timeout=grace)
        if if_idle_for is not None:
            request.if_idle_for = if_idle_for
        try:
            await self._stubs().stop(request, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise rpc_error("stop", error) from error

    async def dispatch(
        self, function: Callable[..., Coroutine[Any, Any, T]], /, *args: Any, **kwargs: Any
    ) -> T:
        """Run ``function(*args, **kwargs)`` on the worker and return its result.

        Raises ``DispatchRejected`` if the worker refused the task before
        tracking it, the task's own exception if it raised, and RPC errors as
        mapped in ``wool_idle.exceptions``; a call cancelled by a closing
        worker before it acknowledged the task is a ``TransientRpcError``
        too (the task never started).
        """
        request = Request(
            task_id=str(uuid.uuid4()), task=cloudpickle.dumps((function, args, kwargs))
        )
        stream = self._stubs().dispatch(iter([request]))
        responses: list[Response] = []
        try:
            async for response in stream:
                responses.append(response)
        except grpc.aio.AioRpcError as error:
            if not responses and error.code() is grpc.StatusCode.CANCELLED:
                # The worker closed before it accepted the task (a server that
                # shuts down cancels calls it never handed to a handler): the
                # task did not start, so this is as retryable as UNAVAILABLE.
                raise TransientRpcError(
                    "dispatch",
                    error.code(),
                    f"worker closed before accepting the task: {error.details()}",
                ) from error
            raise rpc_error("dispatch", error) from error
        result: T = _unwrap(responses)
        return result

    async def close(self) -> None:
        """Give the channel back to the pool; the connection may be used again later."""
        if self._calls is not None:
            self._calls = None
            await pool().release(self.key)


class _Calls:
    """The three methods of the Worker service on one channel."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.idle = channel.unary_unary(
            IDLE,
            request_serializer=Void.SerializeToString,
            response_deserializer=IdleTime.FromString,
        )
        self.stop = channel.unary_unary(
            STOP,
            request_serializer=StopRequest.SerializeToString,
            response_deserializer=Void.FromString,
        )
        self.dispatch = channel.stream_stream(
            DISPATCH,
            request_serializer=Request.SerializeToString,
            response_deserializer=Response.FromString,
        )


def _unwrap(responses: list[Response]) -> Any:
    """Turn a dispatch's responses into the task's result, or raise."""
    kinds = [response.WhichOneof("payload") for response in responses]
    if kinds == ["nack"]:
        raise DispatchRejected(responses[0].nack.reason)
    if len(kinds) != 2 or kinds[0] != "ack":
        raise WoolError(f"malformed dispatch reply: {kinds}")
    final = responses[1]
    if kinds[1] == "exception":
        raise cloudpickle.loads(final.exception)
    if kinds[1] == "result":
        return cloudpickle.loads(final.result)
    raise WoolError(f"malformed dispatch reply: {kinds}")
