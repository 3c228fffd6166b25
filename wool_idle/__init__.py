"""wool-idle: see and retire idle workers in a wool fleet.

The error tree of ``wool_idle.exceptions`` is re-exported here, loaded on
first access: importing a part that needs no gRPC (``wool_idle.contract``, the
autoscaler's policy) must not load grpc through this package.
"""

from __future__ import annotations

import importlib
import typing
from typing import Any

if typing.TYPE_CHECKING:
    from wool_idle.exceptions import (
        TRANSIENT_CODES,
        DispatchRejected,
        IdleUnavailable,
        MalformedReply,
        NestedDispatchFailed,
        OutcomeTooLarge,
        RpcError,
        StopRefused,
        TaskAborted,
        TaskCancelled,
        TaskOutcomeLost,
        TransientRpcError,
        WoolError,
    )

__version__ = "0.2.0.dev0"
"""The version of wool-idle; pyproject.toml reads it from here."""

__all__ = [
    "TRANSIENT_CODES",
    "DispatchRejected",
    "IdleUnavailable",
    "MalformedReply",
    "NestedDispatchFailed",
    "OutcomeTooLarge",
    "RpcError",
    "StopRefused",
    "TaskAborted",
    "TaskCancelled",
    "TaskOutcomeLost",
    "TransientRpcError",
    "WoolError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("wool_idle.exceptions"), name)
    raise AttributeError(f"module 'wool_idle' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
