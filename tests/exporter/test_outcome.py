"""Classifying one probe's answer or error into a result (pure, no I/O)."""

from __future__ import annotations

import asyncio
import math

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wool_idle.contract import valid_idle
from wool_idle.exceptions import IdleUnavailable, RpcError, TransientRpcError
from wool_idle.exporter.outcome import ErrorReason, ProbeResult, classify, unanswered
from wool_idle.exporter.targets import Target

TARGET = Target("w:1")
HANDSHAKE_FAILED = (
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:34803: Tls "
    "handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:100000f7:SSL "
    "routines:OPENSSL_internal:WRONG_VERSION_NUMBER"
)
"""What gRPC 1.85 says when a TLS client meets a plaintext worker."""


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
                True,
                True,
                None,
                ErrorReason.OTHER,
            ),
            (
                RpcError("idle", grpc.StatusCode.INTERNAL, "boom"),
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

    def test_unanswered_is_a_missed_deadline(self) -> None:
        """Given a target not heard from, then its result is down with reason deadline."""
        assert unanswered(TARGET, 1.5) == ProbeResult(
            TARGET, False, False, None, 1.5, ErrorReason.DEADLINE
        )
