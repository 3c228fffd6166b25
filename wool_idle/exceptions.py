"""The errors wool-idle raises, and how gRPC status codes map onto them.

::

    WoolError                      root of everything wool-idle raises on purpose
     +-- IdleUnavailable           the worker predates the idle RPC (UNIMPLEMENTED):
     |                             a missing capability, never an RPC-health fault
     +-- DispatchRejected          the worker refused a task before tracking it (Nack)
     +-- TaskCancelled             the worker cancelled a task it had accepted (a stop
     |                             whose grace ran out)
     +-- RpcError                  an RPC failed with a status code
          +-- TransientRpcError    the code is in TRANSIENT_CODES: retry elsewhere/later
          +-- StopRefused          a conditional stop the worker declined because it
                                   was not idle long enough (FAILED_PRECONDITION)
"""

from __future__ import annotations

from typing import Final

import grpc

TRANSIENT_CODES: Final[frozenset[grpc.StatusCode]] = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)


class WoolError(Exception):
    """Root of every error wool-idle raises on purpose."""


class IdleUnavailable(WoolError):
    """The worker does not implement the idle RPC (a wool worker older than 0.15)."""


class DispatchRejected(WoolError):
    """The worker refused a task before tracking it; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TaskCancelled(WoolError):
    """The worker cancelled a task it had accepted: a stop's grace ran out."""


class RpcError(WoolError):
    """An RPC to a worker failed with ``code``; ``details`` is the server's message."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details


class TransientRpcError(RpcError):
    """An RPC failed with a code in ``TRANSIENT_CODES``: the worker may answer later."""


class StopRefused(RpcError):
    """A conditional stop was declined: the worker was busy or not idle long enough."""


def rpc_error(method: str, error: grpc.aio.AioRpcError) -> WoolError:
    """Map a failed call of ``method`` onto the tree above.

    ``UNIMPLEMENTED`` on ``idle`` is ``IdleUnavailable``; ``FAILED_PRECONDITION``
    on ``stop`` is ``StopRefused``; transient codes are ``TransientRpcError``;
    every other code is ``RpcError``.
    """
    code = error.code()
    details = error.details() or ""
    if method == "idle" and code is grpc.StatusCode.UNIMPLEMENTED:
        return IdleUnavailable(f"worker does not implement idle: {details}")
    if method == "stop" and code is grpc.StatusCode.FAILED_PRECONDITION:
        return StopRefused(method, code, details)
    if code in TRANSIENT_CODES:
        return TransientRpcError(method, code, details)
    return RpcError(method, code, details)
