"""What the replies of one dispatch mean to the client: the task's outcome.

A dispatch is answered with ``nack`` (refused before it was tracked:
``DispatchRejected``) or with ``ack`` then ``result`` or ``exception``; any
other sequence is a ``MalformedReply``. A call that fails after the ``ack`` may
have run the task, so its error is never transient (``TaskOutcomeLost``); nor is
the refusal of a task too large for any worker to receive.
Unpickling an outcome runs the worker's code: an exit it raises comes as
``TaskAborted`` and cannot end this process. A task's own exception that says a
task never started (``NEVER_STARTED``: a dispatch the task made failed so), or
an exception group holding one, comes as ``NestedDispatchFailed``, so it is never
read as this dispatch's.
"""

from __future__ import annotations

from typing import Any, Final

import cloudpickle
import grpc

from wool_idle.exceptions import (
    DispatchRejected,
    MalformedReply,
    NestedDispatchFailed,
    RpcError,
    TaskAborted,
    TaskOutcomeLost,
    TransientRpcError,
    rpc_error,
)
from wool_idle.proto import Response

NEVER_STARTED: Final = (TransientRpcError, DispatchRejected)
"""The errors saying a dispatch's task never started: raised by a task that ran (a
dispatch of its own failed so), they come wrapped in ``NestedDispatchFailed``."""
MAX_TASK_BYTES: Final = 4 * 1024 * 1024
"""The largest dispatch request a worker receives: gRPC's default limit, which our
worker keeps. Every worker refuses a larger one (``RESOURCE_EXHAUSTED``) alike."""


def dispatch_error(
    error: grpc.aio.AioRpcError, responses: list[Response], request_bytes: int
) -> Exception:
    """Map a failed dispatch of a ``request_bytes``-byte request: after an Ack the
    task may have run, so never transient; nor is ``RESOURCE_EXHAUSTED`` for a
    request over ``MAX_TASK_BYTES`` (retrying it elsewhere would never end)."""
    code, details = error.code(), error.details() or ""
    if (
        not responses
        and code is grpc.StatusCode.RESOURCE_EXHAUSTED
        and request_bytes > MAX_TASK_BYTES
    ):
        return RpcError(
            "dispatch",
            code,
            f"the task is {request_bytes} bytes pickled, over the {MAX_TASK_BYTES}-byte "
            f"message limit of workers: {details}",
        )
    if responses and responses[0].WhichOneof("payload") == "ack":
        return TaskOutcomeLost(
            "dispatch", code, f"the worker accepted the task, then the call failed: {details}"
        )
    if not responses and code is grpc.StatusCode.CANCELLED:
        # Cancelled before the worker accepted the task (a server that shuts
        # down cancels calls it never handed to a handler; so does one swamped
        # by a burst of thousands of calls at once): the task did not start, so
        # this is as retryable as UNAVAILABLE.
        return TransientRpcError(
            "dispatch",
            code,
            f"cancelled before the worker accepted the task (closing or overloaded): {details}",
        )
    return rpc_error("dispatch", error)


def task_outcome(responses: list[Response]) -> Any:
    """Turn a dispatch's responses into the task's result, or raise."""
    kinds = [response.WhichOneof("payload") for response in responses]
    if kinds == ["nack"]:
        raise DispatchRejected(responses[0].nack.reason)
    if kinds not in (["ack", "result"], ["ack", "exception"]):
        raise MalformedReply("dispatch", f"replies out of order: {kinds}")
    if kinds[1] == "result":
        return _loads(responses[1].result)
    error = _loads(responses[1].exception)
    kind = type(error)  # isinstance would run the object's own __class__ lookup
    if issubclass(kind, Exception) and _never_started(error):  # the task ran: not this call's
        raise NestedDispatchFailed(error) from error
    if issubclass(kind, Exception):
        raise error
    if issubclass(kind, BaseException):
        raise TaskAborted(error) from error
    raise MalformedReply("dispatch", f"exception payload is a {kind.__name__}")


def _never_started(error: BaseException) -> bool:
    """Whether ``error`` is a ``NEVER_STARTED`` error or an exception group holding one
    at any depth (a task's ``asyncio.TaskGroup`` of dispatches: ``except*`` finds it)."""
    found = [error]
    while found:
        each = found.pop()
        if issubclass(type(each), NEVER_STARTED):
            return True
        if issubclass(type(each), BaseExceptionGroup):  # its own tuple, not a property's
            found.extend(BaseExceptionGroup.exceptions.__get__(each))
    return False


def _loads(outcome: bytes) -> Any:
    """Unpickle a task's result or exception. Unpickling runs the worker's code: a
    ``BaseException`` that is not an ``Exception`` it raises (``sys.exit`` called by
    a ``__reduce__``) comes as ``TaskAborted``, so it cannot end this process."""
    try:
        return cloudpickle.loads(outcome)
    except Exception:
        raise
    except BaseException as error:  # an exit, raised by the outcome's own code
        raise TaskAborted(error) from error
