"""What one probe's answer means: a pure classification, no I/O.

Only a finite number >= 0 is an idle value. Anything else, and every error,
leaves ``idle`` None with a reason, so the exporter never renders a 0 (reads
as busy) or a stale value (reads as idle) for the worker; so does a value of a
worker whose pool is unknown (``Target.pool_unknown``) or changed lately
(``Target.regrouped``): its labels could name another pool than the one answering.

``up`` only when the worker demonstrably answered: a value (valid or not),
UNIMPLEMENTED, or a status only a peer sends (``PEER_CODES``), sent as a gRPC
status. A status gRPC's client made of a bare HTTP status (``HTTP_STATUS_ONLY``:
a 404 is UNIMPLEMENTED, a 403 PERMISSION_DENIED) came from an HTTP/2 server that
is no gRPC server (a web server, a proxy, another service on the port): not
up, so it never holds a floor as a worker too old to measure. gRPC's own
client makes the other codes too (UNKNOWN when it cannot create the channel,
RESOURCE_EXHAUSTED over its receive limit, INTERNAL, ...), and gRPC 1.85 shows
no difference (``debug_error_string()`` is just code and details, trailing
metadata empty): such a status counts as not up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

import grpc

from wool_idle.contract import valid_idle
from wool_idle.exceptions import IdleUnavailable, MalformedReply, RpcError
from wool_idle.exporter.connections import ConnectionsExhausted
from wool_idle.exporter.target import Target
from wool_idle.logs import bounded

PEER_CODES: Final = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.DATA_LOSS,
    }
)
"""The statuses gRPC's client never produces itself (grpc/doc/statuscodes.md): a
peer sent them, so it answered (unless ``HTTP_STATUS_ONLY``)."""
HTTP_STATUS_ONLY: Final = "Received http2 header with status"
"""How gRPC's client details a status it made of an HTTP response that carried no
gRPC status (grpc/doc/http-grpc-status-mapping.md)."""
TLS_FAILURES: Final = ("handshake", "verification check failed")
"""How gRPC's client details (in lower case) an UNAVAILABLE that a TLS handshake
made: it failed (a wrong CA, a plaintext worker), or the worker's certificate does
not name it (``Hostname Verification Check failed``)."""


class ErrorReason(StrEnum):
    """Why a probe produced no idle value (the ``reason`` label)."""

    UNAVAILABLE = "unavailable"
    """No connection to the worker (refused, reset, closed, or none opened: as many
    are open as the open files limit leaves), or the call was cut off."""
    DEADLINE = "deadline"
    """No answer within the scrape's budget or ``--timeout``."""
    UNIMPLEMENTED = "unimplemented"
    """The worker predates the idle RPC (a wool worker older than 0.14)."""
    TLS = "tls"
    """A TLS mismatch: the TLS handshake failed (a wrong CA, a plaintext worker, a
    certificate that does not name the worker), or the worker's discovery record says
    it serves TLS and no client TLS is configured (the worker is then not dialled).
    A worker that refuses the exporter's certificate, or serves TLS to a plaintext
    exporter, closes the connection, which gRPC reports as a closed socket like any
    other: ``unavailable``."""
    INVALID_VALUE = "invalid_value"
    """The worker answered a value that is not a finite number >= 0."""
    INVALID_REPLY = "invalid_reply"
    """No usable answer: the reply did not decode as an idle reply, or the client
    raised on it (the exception is logged)."""
    OTHER = "other"
    """Another gRPC status (INTERNAL, PERMISSION_DENIED, ...); up only if a peer sent it
    (``PEER_CODES``). Also any status made of a bare HTTP status (never up)."""
    DISCOVERY_DOWN = "discovery_down"
    """The worker answered a valid value, withheld: it is known only from wool
    discoveries down past their grace (``Target.pool_unknown``), so the pool its
    labels name may no longer be the one answering at its address (a new worker of
    another pool can start on a dead worker's port)."""
    POOL_CHANGED = "pool_changed"
    """The worker answered a valid value, withheld: its labels (its pool) changed
    within the last grace (``Target.regrouped``): a record flipping its tags, a
    targets file read half rewritten. Counted in one pool's floor, it could be in
    another the next moment."""


@dataclass(frozen=True)
class ProbeResult:
    """One worker's answer on one scrape."""

    target: Target
    up: bool
    supported: bool
    idle: float | None
    duration: float
    error: ErrorReason | None = None
    detail: str = field(default="", compare=False)
    """What the call raised (the status and its message), cut to a log field's length,
    when asked for (``classify``'s ``detail``); else empty. ``/probe``'s debug answer
    shows it: ``reason`` alone does not tell PERMISSION_DENIED from a draining
    worker's FAILED_PRECONDITION. Not part of the outcome: two results that differ
    only in it compare equal."""


def classify(
    target: Target, answer: float | BaseException, duration: float, *, detail: bool = False
) -> ProbeResult:
    """The result of asking ``target``: ``answer`` is the value it reported, or what
    the call raised; ``duration`` is how long the call took; with ``detail``, a
    failure keeps its text (for ``/probe``'s debug answer only: a fan-out neither
    builds nor keeps one per failed target).

    ``up`` says whether the worker demonstrably answered the idle RPC (a value,
    UNIMPLEMENTED, or a status in ``PEER_CODES``); ``supported`` whether it has the
    idle RPC. A valid value of a target whose pool is unknown is withheld
    (``discovery_down``), as is one of a regrouped target (``pool_changed``); any
    other outcome keeps its own reason.
    """
    if isinstance(answer, BaseException):
        reason, up = _reason(answer)
        supported = up and reason is not ErrorReason.UNIMPLEMENTED
        text = bounded(str(answer) or type(answer).__name__) if detail else ""
        return ProbeResult(target, up, supported, None, duration, reason, text)
    if valid_idle(answer):
        if target.pool_unknown:
            return ProbeResult(target, True, True, None, duration, ErrorReason.DISCOVERY_DOWN)
        if target.regrouped:
            return ProbeResult(target, True, True, None, duration, ErrorReason.POOL_CHANGED)
        return ProbeResult(target, True, True, answer, duration)
    return ProbeResult(target, True, True, None, duration, ErrorReason.INVALID_VALUE)


def tls_mismatch(target: Target) -> ProbeResult:
    """The result for a worker that serves TLS when the exporter has no client TLS."""
    return ProbeResult(target, False, False, None, 0.0, ErrorReason.TLS)


def unanswered(target: Target, duration: float) -> ProbeResult:
    """The result for a target not heard from within the budget."""
    return ProbeResult(target, False, False, None, duration, ErrorReason.DEADLINE)


def _reason(error: BaseException) -> tuple[ErrorReason, bool]:
    """The reason for ``error``, and whether it shows the worker answered."""
    if isinstance(error, IdleUnavailable | RpcError) and HTTP_STATUS_ONLY in str(error):
        return ErrorReason.OTHER, False  # an HTTP/2 server answered, not a gRPC one
    if isinstance(error, IdleUnavailable):
        return ErrorReason.UNIMPLEMENTED, True
    if isinstance(error, MalformedReply):
        return ErrorReason.INVALID_REPLY, False
    if isinstance(error, RpcError):
        if error.code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return ErrorReason.DEADLINE, False
        if error.code is grpc.StatusCode.UNAVAILABLE:
            details = error.details.lower()
            tls = any(failure in details for failure in TLS_FAILURES)
            return (ErrorReason.TLS if tls else ErrorReason.UNAVAILABLE), False
        return ErrorReason.OTHER, error.code in PEER_CODES
    if isinstance(error, asyncio.CancelledError | ConnectionsExhausted):
        # Cut off under the probe (its channel closed), not by the caller; or no
        # connection could be opened (the open files limit): no connection either way.
        return ErrorReason.UNAVAILABLE, False
    # Not an outcome the client maps: an undecodable reply, or a fault in the client.
    # Nothing shows the worker answered as a worker: fail closed.
    return ErrorReason.INVALID_REPLY, False
