"""Classifying one probe's answer or error into a result (pure, no I/O)."""

from __future__ import annotations

import asyncio
import math

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.http2 import PlainHttp2Server

from wool_idle.contract import valid_idle
from wool_idle.exceptions import IdleUnavailable, RpcError, TransientRpcError
from wool_idle.exporter.outcome import (
    PEER_CODES,
    ErrorReason,
    ProbeResult,
    classify,
    unanswered,
)
from wool_idle.exporter.target import Target
from wool_idle.worker import WorkerConnection

TARGET = Target("w:1")
HANDSHAKE_FAILED = (
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:34803: Tls "
    "handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:100000f7:SSL "
    "routines:OPENSSL_internal:WRONG_VERSION_NUMBER"
)
"""What gRPC 1.85 says when a TLS client meets a plaintext worker."""
CLIENT_MAY_SEND = frozenset(
    grpc.StatusCode[name]
    for name in (
        "CANCELLED",
        "UNKNOWN",
        "DEADLINE_EXCEEDED",
        "RESOURCE_EXHAUSTED",
        "INTERNAL",
        "UNAVAILABLE",
        "UNAUTHENTICATED",
    )
)
"""The codes gRPC's client produces itself (grpc/doc/statuscodes.md, "Generated at
Client"): an unusable target, its own receive limit, a broken stream, ..."""
LIMIT = 4 * 1024 * 1024
"""gRPC's default limit on a received message."""


class TestClassify:
    @pytest.mark.parametrize(
        ("answer", "up", "supported", "idle", "error"),
        [
            (12.5, True, True, 12.5, None),
            (0.0, True, True, 0.0, None),
            (math.nan, True, True, None, ErrorReason.INVALID_VALUE),
            (math.inf, True, True, None, ErrorReason.INVALID_VALUE),
            (-1.0, True, True, None, ErrorReason.INVALID_VALUE),
            (IdleUnavailable("old"), True, False, None, ErrorReason.UNIMPLEMENTED),
            (
                TransientRpcError("idle", grpc.StatusCode.UNAVAILABLE, "refused"),
                False,
                False,
                None,
                ErrorReason.UNAVAILABLE,
            ),
            (
                TransientRpcError("idle", grpc.StatusCode.UNAVAILABLE, HANDSHAKE_FAILED),
                False,
                False,
                None,
                ErrorReason.TLS,
            ),
            (
                TransientRpcError("idle", grpc.StatusCode.DEADLINE_EXCEEDED, "slow"),
                False,
                False,
                None,
                ErrorReason.DEADLINE,
            ),
            (
                TransientRpcError("idle", grpc.StatusCode.RESOURCE_EXHAUSTED, "too big"),
                False,
                False,
                None,
                ErrorReason.OTHER,
            ),
            (
                RpcError("idle", grpc.StatusCode.INTERNAL, "boom"),
                False,
                False,
                None,
                ErrorReason.OTHER,
            ),
            (
                RpcError("idle", grpc.StatusCode.DATA_LOSS, "gone"),
                True,
                True,
                None,
                ErrorReason.OTHER,
            ),
            (asyncio.CancelledError(), False, False, None, ErrorReason.UNAVAILABLE),
            (
                AttributeError("'NoneType' object has no attribute 'seconds'"),
                False,
                False,
                None,
                ErrorReason.INVALID_REPLY,
            ),
            (RuntimeError("a fault in the client"), False, False, None, ErrorReason.INVALID_REPLY),
        ],
        ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else None,
    )
    def test_classify_answer_or_error(
        self,
        answer: float | BaseException,
        up: bool,
        supported: bool,
        idle: float | None,
        error: ErrorReason | None,
    ) -> None:
        """Given a value or what the call raised, when classified, then the result
        says whether the worker answered, supports idle, its idle value and why not."""
        # Act
        result = classify(TARGET, answer, 0.25)
        # Assert
        assert result == ProbeResult(TARGET, up, supported, idle, 0.25, error)

    @given(st.floats())
    def test_classify_value_only_when_valid(self, seconds: float) -> None:
        """Given any double, when classified, then it is the idle value exactly when it
        is a valid idle value, else the reason is invalid_value; the worker is up."""
        # Act
        result = classify(TARGET, seconds, 0.0)
        # Assert
        assert result.up and result.supported
        if valid_idle(seconds):
            assert (result.idle, result.error) == (seconds, None)
        else:
            assert (result.idle, result.error) == (None, ErrorReason.INVALID_VALUE)

    @given(
        st.one_of(st.floats(), st.sampled_from([IdleUnavailable("old"), RuntimeError()])),
        st.sampled_from(
            [
                (Target("w:1", pool_unknown=True), ErrorReason.DISCOVERY_DOWN),
                (Target("w:1", regrouped=True), ErrorReason.POOL_CHANGED),
            ]
        ),
    )
    def test_classify_pool_unknown_withholds_only_a_valid_value(
        self, answer: float | BaseException, case: tuple[Target, ErrorReason]
    ) -> None:
        """Given a target whose pool is unknown (its discovery is down) or changed lately
        (regrouped), when any answer is classified, then a valid value is withheld as
        discovery_down or pool_changed, the worker up; any other answer keeps the result
        it has for a target of a known pool."""
        # Arrange
        unknown, reason = case
        # Act
        result = classify(unknown, answer, 0.5)
        # Assert
        known = classify(TARGET, answer, 0.5)
        if known.idle is None:
            assert result == ProbeResult(unknown, known.up, known.supported, None, 0.5, known.error)
        else:
            assert result == ProbeResult(unknown, True, True, None, 0.5, reason)

    @pytest.mark.parametrize(
        "code",
        [
            c
            for c in grpc.StatusCode
            if c not in (grpc.StatusCode.OK, grpc.StatusCode.UNIMPLEMENTED)
        ],
        ids=lambda code: code.name,
    )
    def test_classify_up_only_for_a_status_only_a_peer_sends(self, code) -> None:
        """Given a failed idle call with any status code, when classified, then the
        worker is up only if the code is one gRPC's client never produces itself
        (a peer sent it); a code the client may have made counts as not up."""
        # Act
        result = classify(TARGET, RpcError("idle", code, "details"), 0.0)
        # Assert
        assert result.idle is None
        assert result.up is (code in PEER_CODES)
        assert result.up is not (code in CLIENT_MAY_SEND)

    def test_classify_keeps_the_failure_text_only_when_asked(self) -> None:
        """Given a failed call, when classified for a fan-out and for a debug probe, then
        only the debug result carries its text (a fan-out neither builds nor keeps one
        per failed target), and both are the same outcome."""
        # Arrange
        error = RpcError("idle", grpc.StatusCode.PERMISSION_DENIED, "caller x not in --allow-stop")
        # Act
        fanned = classify(TARGET, error, 0.1)
        debugged = classify(TARGET, error, 0.1, detail=True)
        # Assert
        assert fanned.detail == ""
        assert "caller x not in --allow-stop" in debugged.detail
        assert fanned == debugged

    def test_unanswered_is_a_missed_deadline(self) -> None:
        """Given a target not heard from, then its result is down with reason deadline."""
        assert unanswered(TARGET, 1.5) == ProbeResult(
            TARGET, False, False, None, 1.5, ErrorReason.DEADLINE
        )


async def ask_idle(address: str) -> float | BaseException:
    """What one idle call to ``address`` over a fresh connection answers or raises."""
    connection = WorkerConnection(address)
    try:
        return await connection.idle_time(timeout=5.0)
    except Exception as error:
        return error
    finally:
        await connection.close()


class TestClassifyOverGrpc:
    @pytest.mark.parametrize(
        ("fields", "up"),
        [
            ({"seconds": 5.0}, True),
            ({"with_idle": False}, True),
            ({"code": grpc.StatusCode.DATA_LOSS}, True),
            ({"code": grpc.StatusCode.PERMISSION_DENIED}, True),
            ({"code": grpc.StatusCode.INTERNAL}, False),
            ({"code": grpc.StatusCode.UNKNOWN}, False),
            ({"reply": b"\x7a" + bytes([0x80, 0x80, 0x80, 0x02]) + bytes(LIMIT)}, False),
        ],
        ids=[
            "value",
            "unimplemented",
            "data_loss",
            "permission_denied",
            "internal",
            "unknown",
            "over_the_client_limit",
        ],
    )
    async def test_classify_real_calls(self, scripted, fields: dict, up: bool) -> None:
        """Given a real gRPC server answering a value, UNIMPLEMENTED, a status only a
        peer sends, a status the client also makes, or a reply over the client's own
        receive limit (RESOURCE_EXHAUSTED made by the client), when the idle call's
        outcome is classified, then the worker is up exactly when it demonstrably
        answered."""
        # Arrange
        worker = await scripted(**fields)
        # Act
        answer = await ask_idle(worker.address)
        # Assert
        assert classify(Target(worker.address), answer, 0.0).up is up

    @pytest.mark.parametrize("status", [404, 403, 401, 500])
    async def test_classify_http_status_of_a_server_that_is_no_grpc_server(
        self, status: int
    ) -> None:
        """Given an HTTP/2 server that is no gRPC server, answering every request with an
        HTTP status and no gRPC status (404 is made UNIMPLEMENTED by gRPC's client, 403
        PERMISSION_DENIED), when the idle call's outcome is classified, then the target
        is not up and not a worker without the idle RPC (it would hold a floor)."""
        # Arrange
        async with PlainHttp2Server(status) as server:
            # Act
            answer = await ask_idle(server.address)
        result = classify(Target(server.address), answer, 0.0)
        # Assert
        assert (result.up, result.supported, result.error) == (False, False, ErrorReason.OTHER)
