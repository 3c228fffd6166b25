"""The actuator against real gRPC servers: confirm, then a conditional stop; one
worker's failure, whatever it is, is that worker's result."""

from __future__ import annotations

import asyncio
import math

import grpc
import pytest

from wool_idle.autoscaler.actuator import ActionSettings, StopAttempt, WorkerActuator
from wool_idle.autoscaler.policy import Decision
from wool_idle.autoscaler.verdicts import StopResult, Verdict


def actuator(*, dry_run: bool = False, before_stop=None) -> WorkerActuator:
    return WorkerActuator(
        ActionSettings(grace=1.0, rpc_timeout=2.0),
        max_idle=60.0,
        dry_run=dry_run,
        before_stop=before_stop,
    )


def stop(worker: str) -> Decision:
    return Decision(worker, 100.0, Verdict.STOP)


class TestWorkerActuator:
    @pytest.mark.parametrize(
        ("script", "expected"),
        [
            ({"seconds": 100.0}, StopAttempt(StopResult.STOPPED, 100.0)),
            ({"seconds": 10.0}, StopAttempt(StopResult.REFUSED_BUSY, 10.0)),
            ({"code": grpc.StatusCode.UNAVAILABLE}, StopAttempt(StopResult.UNREACHABLE)),
            ({"code": grpc.StatusCode.INTERNAL}, StopAttempt(StopResult.FAILED)),
            ({"with_idle": False}, StopAttempt(StopResult.FAILED)),
        ],
    )
    async def test_retire_results(self, scripted, script, expected: StopAttempt) -> None:
        """Given a worker confirming a long idle time, a short one, or failing the
        idle RPC (transient, internal, unimplemented), when retired, then the result
        follows, and a stop is sent only after a confirmation."""
        # Arrange
        worker = await scripted(**script)
        # Act
        attempt = await actuator().retire(stop(worker.address))
        # Assert
        assert attempt == expected
        assert len(worker.stop_requests) == (expected.result is StopResult.STOPPED)

    async def test_retire_invalid_confirmation_is_refused(self, scripted) -> None:
        """Given a worker confirming NaN, when retired, then refused_busy (a value that
        is not an idle time never confirms) and no stop is sent."""
        # Arrange
        worker = await scripted(seconds=float("nan"))
        # Act
        attempt = await actuator().retire(stop(worker.address))
        # Assert
        assert attempt.result is StopResult.REFUSED_BUSY and math.isnan(attempt.confirmed_idle)
        assert worker.stop_requests == []

    async def test_retire_sends_a_conditional_stop(self, scripted) -> None:
        """Given a worker confirming its idle time, when retired, then the stop carries
        the grace and the condition 'idle at least max_idle'."""
        # Arrange
        worker = await scripted(seconds=100.0)
        # Act
        await actuator().retire(stop(worker.address))
        # Assert
        (request,) = worker.stop_requests
        assert (request.timeout, request.if_idle_for) == (1.0, 60.0)

    async def test_retire_dry_run_confirms_and_sends_no_stop(self, scripted) -> None:
        """Given a dry run and a worker confirming its idle time, when retired, then the
        result is dry_run with the confirmed time and no stop is sent."""
        # Arrange
        worker = await scripted(seconds=100.0)
        # Act
        attempt = await actuator(dry_run=True).retire(stop(worker.address))
        # Assert
        assert attempt == StopAttempt(StopResult.DRY_RUN, 100.0)
        assert worker.stop_requests == []

    async def test_retire_undecodable_idle_reply_is_failed(self, undecodable_worker) -> None:
        """Given a worker whose idle reply does not decode, when retired, then the
        result is failed (no exception escapes) and no stop is sent."""
        # Act
        attempt = await actuator().retire(stop(undecodable_worker.address))
        # Assert
        assert attempt == StopAttempt(StopResult.FAILED)
        assert undecodable_worker.stops == 0

    @pytest.mark.parametrize("error", [RuntimeError("boom"), ZeroDivisionError(), KeyError("k")])
    async def test_retire_any_error_is_failed(self, scripted, error: Exception) -> None:
        """Given an error of any type raised between confirmation and stop, when
        retired, then the result is failed with the confirmed idle time, and no stop."""

        # Arrange
        async def raising(worker: str) -> None:
            raise error

        worker = await scripted(seconds=100.0)
        # Act
        attempt = await actuator(before_stop=raising).retire(stop(worker.address))
        # Assert
        assert attempt == StopAttempt(StopResult.FAILED, 100.0)
        assert worker.stop_requests == []

    async def test_retire_cancellation_propagates(self, scripted) -> None:
        """Given a retirement cancelled before its stop, when retired, then the
        cancellation propagates (it is not a worker's failure) and no stop is sent."""

        # Arrange
        async def cancelled(worker: str) -> None:
            raise asyncio.CancelledError

        worker = await scripted(seconds=100.0)
        # Act / Assert
        with pytest.raises(asyncio.CancelledError):
            await actuator(before_stop=cancelled).retire(stop(worker.address))
        assert worker.stop_requests == []

    @pytest.mark.parametrize("worker", ["worker-name", "127.0.0.1:1 "])
    async def test_retire_not_an_address_is_failed(self, worker: str) -> None:
        """Given a decision for a label that is not an address (the planner never makes
        one; the actuator does not rely on it), when retired, then failed."""
        # Act / Assert
        assert await actuator().retire(stop(worker)) == StopAttempt(StopResult.FAILED)
