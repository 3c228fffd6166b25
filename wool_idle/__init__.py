"""wool-idle: see and retire idle workers in a wool fleet."""

from __future__ import annotations

from wool_idle.exceptions import (
    TRANSIENT_CODES,
    DispatchRejected,
    IdleUnavailable,
    RpcError,
    StopRefused,
    TaskCancelled,
    TransientRpcError,
    WoolError,
)

__version__ = "0.1.0"

__all__ = [
    "TRANSIENT_CODES",
    "DispatchRejected",
    "IdleUnavailable",
    "RpcError",
    "StopRefused",
    "TaskCancelled",
    "TransientRpcError",
    "WoolError",
    "__version__",
]
