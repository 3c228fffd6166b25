"""The errors wool-idle raises, and how gRPC status codes map onto them.

::

    WoolError                      root of everything wool-idle raises on purpose
     +-- IdleUnavailable           the worker predates the idle RPC (UNIMPLEMENTED):
     |                             a missing capability, never an RPC-health fault
     +-- DispatchRejected          the worker refused a task before tracking it (Nack)
     +-- TaskCancelled             the worker cancelled a task it had accepted (a stop
     |                             whose grace ran out)
     +-- TaskAborted               the task raised a BaseException that is not an
     |                             Exception (SystemExit, KeyboardInterrupt, ...); it is
     |                             delivered wrapped so it cannot end the caller's process
     +-- OutcomeTooLarge           the task ran, but its pickled result or exception is
     |                             over the message limit (sent by the worker as the
     |                             task's exception)
     +-- NestedDispatchFailed      the task ran and raised an error saying a task never
     |                             started (a TransientRpcError or DispatchRejected of a
     |                             dispatch it made itself, or a group holding one);
     |                             delivered wrapped, so it is not read as this call's
     +-- RpcError                  an RPC failed with a status code
          +-- TransientRpcError    the code is in TRANSIENT_CODES and no task of the call
          |                        started: retry elsewhere/later
          +-- StopRefused          a conditional stop the worker declined because it
          |                        was not idle long enough (FAILED_PRECONDITION)
          +-- MalformedReply       the reply did not decode as the method's message, or
          |                        a dispatch's replies came in an impossible order
          |                        (code INTERNAL): a broken or foreign server
          +-- TaskOutcomeLost      a dispatch failed after the worker acknowledged the
                                   task: it may have run, so it is never transient,
                                   whatever the code

A task that ran never maps to a transient error: retrying it elsewhere would run
its side effects twice.
"""

from __future__ import annotations

from typing import Any, Final

import grpc

from wool_idle.logs import bounded

TRANSIENT_CODES: Final[frozenset[grpc.StatusCode]] = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
MALFORMED_REPLY_CODE: Final = grpc.StatusCode.INTERNAL
"""The code of a ``MalformedReply``: what gRPC itself reports for an undecodable message."""


def safe_repr(thing: object) -> str:
    """``repr(thing)``, or ``object.__repr__``'s (its type and address) if its
    ``repr`` itself raises (a hostile ``__repr__`` may raise anything, an exit
    included; a metaclass may make even the type's ``__name__`` exit, which
    ``object.__repr__`` does not look up). Always a plain ``str``: a ``str``
    subclass that a ``__repr__`` returns would run code of its own
    (``__format__``, ``__str__``) wherever the text is formatted or logged."""
    try:
        return str.__str__(repr(thing))
    except BaseException:
        return f"<failing repr of {object.__repr__(thing)}>"


class WoolError(Exception):
    """Root of every error wool-idle raises on purpose."""


class IdleUnavailable(WoolError):
    """The worker does not implement the idle RPC (a wool worker older than 0.14)."""


class DispatchRejected(WoolError):
    """The worker refused a task before tracking it; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TaskCancelled(WoolError):
    """The worker cancelled a task it had accepted: a stop's grace ran out."""


class TaskAborted(WoolError):
    """The task raised ``exception``, a ``BaseException`` that is not an ``Exception``.

    A remote ``SystemExit`` or ``KeyboardInterrupt`` is the task's failure: it
    must neither end the worker nor, re-raised as is, the caller's process.
    """

    def __init__(self, exception: BaseException) -> None:
        super().__init__(f"task raised {safe_repr(exception)}")  # the worker's code
        self.exception = exception

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), (self.exception,)


class OutcomeTooLarge(WoolError):
    """The task ran, but its pickled ``what`` ("result" or "exception") of ``size``
    bytes is over the worker's ``limit``, so it cannot be sent back."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"the task ran, but its {what} is {size} bytes pickled, over the {limit}-byte "
            "message limit"
        )
        self.what, self.size, self.limit = what, size, limit

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), (self.what, self.size, self.limit)


class NestedDispatchFailed(WoolError):
    """The task ran and raised ``exception``, an error saying that a task never started
    (a ``TransientRpcError`` or ``DispatchRejected``: a dispatch the task made itself,
    to another worker or its own, failed so), or an exception group holding one.

    Raised as is, it would say that the caller's own task never started, and a
    caller retrying it elsewhere would run its side effects twice.
    """

    def __init__(self, exception: Exception) -> None:
        super().__init__(f"the task ran and raised {safe_repr(exception)}")
        self.exception = exception

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), (self.exception,)


class RpcError(WoolError):
    """An RPC to a worker failed with ``code``; ``details`` is the server's message."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), (self.method, self.code, self.details)


class TransientRpcError(RpcError):
    """An RPC failed with a code in ``TRANSIENT_CODES``: the worker may answer later."""


class StopRefused(RpcError):
    """A conditional stop was declined: the worker was busy or not idle long enough."""


class MalformedReply(RpcError):
    """The worker answered ``method`` with bytes that are not its reply message."""

    def __init__(self, method: str, details: str) -> None:
        super().__init__(method, MALFORMED_REPLY_CODE, details)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), (self.method, self.details)


class TaskOutcomeLost(RpcError):
    """A dispatch failed after the worker acknowledged its task: the task may have
    run, so retrying it elsewhere is not safe (whatever ``code`` says)."""


def rpc_error(method: str, error: grpc.aio.AioRpcError) -> WoolError:
    """Map a failed call of ``method`` onto the tree above.

    ``UNIMPLEMENTED`` on ``idle`` is ``IdleUnavailable``; ``FAILED_PRECONDITION``
    on ``stop`` is ``StopRefused``; transient codes are ``TransientRpcError``;
    every other code is ``RpcError``. Details (the worker's own text: gRPC takes up
    to 16 KiB of it) are ``bounded``.
    """
    code = error.code()
    details = bounded(error.details() or "")
    if method == "idle" and code is grpc.StatusCode.UNIMPLEMENTED:
        return IdleUnavailable(f"worker does not implement idle: {details}")
    if method == "stop" and code is grpc.StatusCode.FAILED_PRECONDITION:
        return StopRefused(method, code, details)
    if code in TRANSIENT_CODES:
        return TransientRpcError(method, code, details)
    return RpcError(method, code, details)
