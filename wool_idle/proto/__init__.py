"""The worker wire contract: messages and method paths of ``worker.proto``.

Method paths equal wool's (``/wool.runtime.protobuf.wire.Worker/<method>``).
The messages live in a private descriptor pool (see ``generate``), so this
package imports cleanly beside the ``wool`` package.
"""

from __future__ import annotations

from typing import Final

from wool_idle.proto.worker_pb2 import (
    Ack,
    IdleTime,
    Nack,
    Request,
    Response,
    StopRequest,
    Void,
)

SERVICE: Final = "wool.runtime.protobuf.wire.Worker"
DISPATCH: Final = f"/{SERVICE}/dispatch"
STOP: Final = f"/{SERVICE}/stop"
IDLE: Final = f"/{SERVICE}/idle"

__all__ = [
    "DISPATCH",
    "IDLE",
    "SERVICE",
    "STOP",
    "Ack",
    "IdleTime",
    "Nack",
    "Request",
    "Response",
    "StopRequest",
    "Void",
]
