"""A dispatched task on the worker's side: from the request's bytes to a coroutine,
and from the task's end to the reply that carries its outcome.

What the caller sent is the caller's code: unpickling it, calling it and
checking what it returned may raise anything, an exit included, and refuses
that task only (a ``Nack``, its reason cut to ``MAX_REASON_CHARS``). The outcome
is the task's own: its result or exception pickled (an exception that does not
pickle becomes a ``RuntimeError`` describing it), ``TaskCancelled`` if a stop
cancelled it, ``OutcomeTooLarge`` in place of a reply over the size limit.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Collection, Coroutine
from typing import Any, Final

import cloudpickle

from wool_idle.exceptions import OutcomeTooLarge, TaskCancelled, safe_repr
from wool_idle.proto import Nack, Response
from wool_idle.worker.containment import TaskExit

MAX_REASON_CHARS: Final = 1000
"""The longest ``Nack`` reason sent: it quotes the caller's objects, whose reprs may be
megabytes, and a reply over the client's receive limit would read as a transient error."""


def refusal_nack(reason: str) -> Nack:
    """A ``Nack`` giving ``reason``, lone surrogates (a ``__repr__`` may return any str;
    protobuf text must be UTF-8) escaped, then cut to ``MAX_REASON_CHARS``."""
    reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 3] + "..."
    return Nack(reason=reason)


def coroutine_of(task: bytes) -> Coroutine[Any, Any, Any] | Nack:
    """The coroutine the pickled ``task`` asks for, or a ``Nack`` saying why not.

    Unpickling, calling and checking what the call returned run the caller's
    code: whatever it raises, an exit included, refuses this task only (a
    ``Nack``: the task never started).
    """
    try:
        function, args, kwargs = cloudpickle.loads(task)
    except BaseException as error:  # the caller's code: whatever it raises, exits too
        return refusal_nack(f"undecodable task: {safe_repr(error)}")
    try:
        if not inspect.iscoroutinefunction(function):
            return refusal_nack(f"{safe_repr(function)} is not a coroutine function")
        coroutine = function(*args, **kwargs)
        if not asyncio.iscoroutine(coroutine):  # its type check runs its code too
            return refusal_nack(f"{safe_repr(function)} returned no coroutine")
    except BaseException as error:  # arguments that do not fit, or a hostile callable
        return refusal_nack(f"cannot call {safe_repr(function)}: {safe_repr(error)}")
    return coroutine


async def outcome_response(
    task: asyncio.Task[Any], cancelled_by_stop: Collection[asyncio.Future[Any]]
) -> Response:
    """Wait for ``task`` (cancelling it if the caller goes away) and wrap its outcome:
    ``TaskCancelled`` if a stop cancelled it, a ``CancelledError`` (the task's own
    failure) if it ended cancelled otherwise (it awaited something cancelled)."""
    try:
        await asyncio.wait([task])
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.cancelled():
        if task in cancelled_by_stop:
            cancelled: BaseException = TaskCancelled("task cancelled by worker shutdown")
        else:
            cancelled = asyncio.CancelledError("the task ended cancelled; no stop cancelled it")
        return Response(exception=_pickle(cancelled))
    error = task.exception()
    if type(error) is TaskExit:  # isinstance would run the exception's __class__ lookup
        error = error.exit
    if error is not None:
        return Response(exception=_pickle(error))
    try:
        return Response(result=cloudpickle.dumps(task.result()))
    except BaseException as pickling_error:  # a result's __reduce__ may even exit
        return Response(exception=_pickle(pickling_error))


def bounded_response(response: Response, limit: int) -> Response:
    """``response``, or an ``OutcomeTooLarge`` in its place if it exceeds ``limit`` bytes."""
    size = response.ByteSize()
    if size <= limit:
        return response
    what = response.WhichOneof("payload") or "outcome"
    return Response(exception=_pickle(OutcomeTooLarge(what, size, limit)))


def _pickle(error: BaseException) -> bytes:
    """Pickle ``error``, or a ``RuntimeError`` describing it if it does not pickle
    (whatever pickling it raises, an exit included)."""
    try:
        return bytes(cloudpickle.dumps(error))
    except BaseException:  # an exception's __reduce__ may even exit
        return bytes(cloudpickle.dumps(RuntimeError(safe_repr(error))))
