"""WorkerService over a real gRPC server on loopback."""

from __future__ import annotations

import asyncio
import functools
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import cloudpickle
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.draining import draining
from support.tasks import (
    SurrogateRepr,
    SurrogatesRepr,
    awaits_a_cancelled_future,
    echo,
    gated,
    ignores_its_cancellation,
    not_a_coroutine,
    sized,
    sleep_for,
)

from wool_idle.exceptions import (
    DispatchRejected,
    OutcomeTooLarge,
    RpcError,
    StopRefused,
    TaskAborted,
    TaskCancelled,
    TransientRpcError,
)
from wool_idle.proto import DISPATCH, STOP, Request, Response, StopRequest, Void
from wool_idle.worker import WorkerConnection, WorkerService


async def poll_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``predicate()`` holds; fail the test if it never does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition never became true"
        await asyncio.sleep(0.005)


async def raw_dispatch(address: str, task_id: str, task: bytes) -> list[Response]:
    """Send one dispatch Request exactly as given; return the worker's responses."""
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.stream_stream(
            DISPATCH,
            request_serializer=Request.SerializeToString,
            response_deserializer=Response.FromString,
        )
        return [r async for r in call(iter([Request(task_id=task_id, task=task)]))]


class TestWorkerService:
    @pytest.mark.parametrize(
        "outcomes", [["return", "return", "return"], ["raise", "return", "raise"], ["raise"]]
    )
    async def test_idle_zero_until_last_task_drains(
        self, start_server, tmp_path: Path, outcomes: list[str]
    ) -> None:
        """Given N in-flight tasks, each returning or raising, when they complete one at
        a time and idle is polled after each, then idle stays zero until the last task
        drains, then accrues from that drain (never from startup or a task's start: the
        reading is at most the time since the last task was released)."""
        # Arrange
        server = await start_server()
        connection = WorkerConnection(server.address)
        gates = [str(tmp_path / f"gate{i}") for i in range(len(outcomes))]
        calls = [
            asyncio.ensure_future(connection.dispatch(gated, gate, outcome))
            for gate, outcome in zip(gates, outcomes, strict=True)
        ]
        await poll_until(lambda: len(server.service.in_flight) == len(outcomes))
        readings = []
        # Act
        for index, gate in enumerate(gates):
            released = time.monotonic()
            Path(gate).touch()
            await asyncio.wait([calls[index]])
            await poll_until(lambda i=index: len(server.service.in_flight) == len(outcomes) - i - 1)
            readings.append(await connection.idle_time())
        since_released = time.monotonic() - released
        await asyncio.sleep(0.05)
        later = await connection.idle_time()
        # Assert
        assert readings[:-1] == [0.0] * (len(outcomes) - 1)
        assert later > readings[-1] >= 0.0
        assert readings[-1] <= since_released
        for call, outcome in zip(calls, outcomes, strict=True):
            if outcome == "raise":
                with pytest.raises(ValueError, match="task failed"):
                    call.result()
            else:
                assert call.result() == "ok"
        await connection.close()

    @pytest.mark.parametrize("rejection", ["backpressure", "malformed_id", "sync_callable"])
    async def test_dispatch_rejected_before_tracking_keeps_idle(
        self, start_server, rejection: str
    ) -> None:
        """Given a worker with accrued idle, when a dispatch is rejected before tracking
        (backpressure, malformed id, sync callable), then idle keeps counting: the
        rejected task never enters the in-flight set."""
        # Arrange
        service = WorkerService(backpressure=lambda s: rejection == "backpressure")
        server = await start_server(service=service)
        await asyncio.sleep(0.05)
        before = service.in_flight.idle_seconds()
        task_id = "not-a-uuid" if rejection == "malformed_id" else str(uuid.uuid4())
        function = not_a_coroutine if rejection == "sync_callable" else echo
        # Act
        try:
            responses = await raw_dispatch(
                server.address,
                task_id,
                cloudpickle.dumps((function, ("x",) if function is echo else (), {})),
            )
            code = None
        except grpc.aio.AioRpcError as error:
            responses, code = [], error.code()
        after = service.in_flight.idle_seconds()
        # Assert
        if rejection == "backpressure":
            assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        else:
            assert [r.WhichOneof("payload") for r in responses] == ["nack"]
            assert responses[0].nack.reason
        assert after > before > 0.0

    @pytest.mark.parametrize(
        ("task", "reason"),
        [
            (b"not a pickle", "undecodable task"),
            (cloudpickle.dumps((echo, (), {})), "cannot call"),
            (cloudpickle.dumps(42), "undecodable task"),
        ],
    )
    async def test_dispatch_malformed_task_nacked(
        self, start_server, task: bytes, reason: str
    ) -> None:
        """Given a worker, when a dispatch carries bytes that are not a task, or a task
        whose arguments do not fit, then it is refused with a Nack saying why and the
        in-flight set stays empty."""
        # Arrange
        server = await start_server()
        # Act
        responses = await raw_dispatch(server.address, str(uuid.uuid4()), task)
        # Assert
        assert [r.WhichOneof("payload") for r in responses] == ["nack"]
        assert reason in responses[0].nack.reason
        assert len(server.service.in_flight) == 0

    @pytest.mark.parametrize("required", [float("nan"), -1.0, float("-inf")])
    async def test_conditional_stop_invalid_condition(self, start_server, required: float) -> None:
        """Given an idle worker, when a conditional stop carries a NaN or negative
        condition, then INVALID_ARGUMENT and the worker keeps serving. Sent raw:
        WorkerConnection itself refuses such a condition."""
        # Arrange
        server = await start_server()
        request = StopRequest(timeout=5.0, if_idle_for=required)
        # Act
        async with grpc.aio.insecure_channel(server.address) as channel:
            stop = channel.unary_unary(STOP, response_deserializer=Void.FromString)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stop(request.SerializeToString())
        # Assert
        assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert not server.service.stopping.is_set()

    @pytest.mark.parametrize("required", [float("nan"), -1.0])
    async def test_conditional_stop_invalid_condition_while_draining(
        self, start_server, tmp_path: Path, required: float
    ) -> None:
        """Given a worker draining a task, when a conditional stop carries a NaN or
        negative condition, then INVALID_ARGUMENT at once (a malformed request is
        refused whatever the worker's state; it never joins the drain) and the
        draining task still completes. Sent raw: WorkerConnection refuses it."""
        # Arrange
        gate = tmp_path / "gate"
        server, connection, running, first_stop = await draining(start_server, gate)
        request = StopRequest(timeout=5.0, if_idle_for=required)
        # Act
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                stop = channel.unary_unary(STOP, response_deserializer=Void.FromString)
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await stop(request.SerializeToString(), timeout=10.0)
        finally:
            gate.touch()
        # Assert
        assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert await running == "ok"
        await first_stop
        await connection.close()

    @pytest.mark.parametrize(
        "stop_bytes",
        [
            b"\x8d\xe2\x04" + struct.pack("<f", 3600.0),  # if_idle_for sent as a float
            StopRequest(timeout=0.0).SerializeToString() + b"\x90\xe2\x04\x01",  # field 10002
            StopRequest(timeout=float("nan")).SerializeToString(),
        ],
        ids=["if-idle-for-as-float", "unknown-field", "nan-grace"],
    )
    async def test_stop_it_cannot_read_refused(
        self, start_server, tmp_path: Path, stop_bytes: bytes
    ) -> None:
        """Given a worker running a task, when a stop carries a field the worker cannot
        read (a condition encoded with another type, or one of a newer protocol) or a
        NaN grace (neither 0, a drain nor a wait), then INVALID_ARGUMENT, the task is
        not cancelled and the worker keeps serving (protobuf dropped the field, and
        the stop, taken as unconditional, cancelled a busy worker's task). Sent raw:
        WorkerConnection itself refuses a NaN grace."""
        # Arrange
        server = await start_server()
        connection = WorkerConnection(server.address)
        gate = tmp_path / "gate"
        running = asyncio.ensure_future(connection.dispatch(gated, str(gate)))
        await poll_until(lambda: len(server.service.in_flight) == 1)
        # Act
        async with grpc.aio.insecure_channel(server.address) as channel:
            stop = channel.unary_unary(STOP, response_deserializer=Void.FromString)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stop(stop_bytes)
        gate.touch()
        # Assert
        assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert await running == "ok"
        assert not server.service.stopping.is_set()
        await connection.close()

    @pytest.mark.parametrize(
        ("function", "quoted"),
        [
            (functools.partial(not_a_coroutine, b"\x00" * 1_500_000), "..."),
            (SurrogateRepr(), "surrogate \\udc80"),
            (SurrogatesRepr(), "\\udc80" * 160),
        ],
    )
    async def test_dispatch_refusal_quoting_the_callable_is_rejected(
        self, start_server, function: object, quoted: str
    ) -> None:
        """Given a callable that is no coroutine function and whose repr is megabytes
        long (or holds lone surrogates), when it is dispatched, then the caller gets
        DispatchRejected quoting it in 1000 characters at most (the Nack exceeded the
        client's receive limit, a TransientRpcError, or did not serialize, an
        RpcError; escaping 2000 surrogates after the cut made 5985 characters)."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(DispatchRejected) as rejected:
                await connection.dispatch(function)  # type: ignore[arg-type]
        # Assert
        assert quoted in str(rejected.value) and len(str(rejected.value)) <= 1000

    async def test_dispatch_returns_result_and_exception(self, start_server) -> None:
        """Given a worker, when tasks are dispatched that return and that raise, then
        the caller gets the value and the exception."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            value = await connection.dispatch(echo, {"k": [1, 2]})
            with pytest.raises(ValueError, match="task failed"):
                await connection.dispatch(gated, "/", "raise")
            with pytest.raises(DispatchRejected, match="not a coroutine function"):
                await connection.dispatch(not_a_coroutine)  # type: ignore[arg-type]
        # Assert
        assert value == {"k": [1, 2]}

    @pytest.mark.parametrize("outcome", ["return", "raise"])
    async def test_dispatch_outcome_over_limit_is_task_failure(
        self, start_server, outcome: str
    ) -> None:
        """Given a worker with the default outcome limit, when a task returns (or
        raises) more than the limit, then the caller gets OutcomeTooLarge as that
        task's exception (never a transient error: the task ran), and the worker
        keeps serving."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(OutcomeTooLarge) as raised:
                await connection.dispatch(sized, 5 * 1024 * 1024, outcome)
            after = await connection.dispatch(echo, "next")
            idle = await connection.idle_time()
        # Assert
        error = raised.value
        assert error.what == {"return": "result", "raise": "exception"}[outcome]
        assert error.size > error.limit == 4 * 1024 * 1024
        assert "the task ran" in str(error)
        assert after == "next" and idle >= 0.0

    async def test_dispatch_outcome_at_limit_is_sent(self, start_server) -> None:
        """Given a worker with a small outcome limit, when a task's result fits
        under it, then the result comes back unchanged."""
        # Arrange
        server = await start_server(service=WorkerService(max_outcome_bytes=64 * 1024))
        # Act
        async with WorkerConnection(server.address) as connection:
            result = await connection.dispatch(sized, 1024)
            with pytest.raises(OutcomeTooLarge):
                await connection.dispatch(sized, 64 * 1024)
        # Assert
        assert result == b"x" * 1024

    @pytest.mark.parametrize(
        ("grace", "expect_completed"), [(0.0, False), (5.0, True), (-1.0, True), (0.2, False)]
    )
    async def test_stop_grace_semantics(
        self, start_server, grace: float, expect_completed: bool
    ) -> None:
        """Given a worker running a task of 1s, when stopped with a grace of 0 (cancel
        now), 5s (drain), negative (wait) or 0.2s (drain then cancel), then the task
        completes exactly when the grace allows it."""
        # Arrange
        server = await start_server()
        connection = WorkerConnection(server.address)
        call = asyncio.ensure_future(connection.dispatch(sleep_for, 1.0))
        await poll_until(lambda: len(server.service.in_flight) == 1)
        # Act
        await connection.stop(grace)
        outcome = await asyncio.gather(call, return_exceptions=True)
        # Assert
        if expect_completed:
            assert outcome == [1.0]
        else:
            assert isinstance(outcome[0], TaskCancelled)
        assert server.service.stopped.is_set()
        await connection.close()

    async def test_stop_leaves_a_task_ignoring_its_cancellation(
        self, start_server, tmp_path: Path
    ) -> None:
        """Given a task that swallows every cancellation, when the worker is stopped
        with a grace of 0, then the stop returns and the service counts as stopped
        once the task had its cancel wait, the task still running (the stop waited
        for it for ever: a retired worker never left)."""
        # Arrange
        gate = tmp_path / "gate"
        server = await start_server(service=WorkerService(cancel_wait=0.1))
        connection = WorkerConnection(server.address)
        call = asyncio.ensure_future(connection.dispatch(ignores_its_cancellation, str(gate)))
        await poll_until(lambda: len(server.service.in_flight) == 1)
        # Act
        try:
            await asyncio.wait_for(connection.stop(0.0), 30)
            stopped, running = server.service.stopped.is_set(), len(server.service.in_flight)
        finally:
            gate.touch()
        await asyncio.gather(call, return_exceptions=True)
        await connection.close()
        # Assert
        assert stopped
        assert running == 1

    async def test_dispatch_caller_gone_before_the_ack_cancels_the_task(
        self, tmp_path: Path
    ) -> None:
        """Given a task admitted and its Ack handed to gRPC, when its call ends there
        (gRPC closes the handler's stream: the caller left while the Ack was being
        written), then the task is cancelled (it ran on for nobody, the worker busy,
        its caller free to retry elsewhere)."""
        # Arrange
        gate = tmp_path / "gate"
        service = WorkerService()
        task = cloudpickle.dumps((gated, (str(gate),), {}))

        async def requests():
            yield Request(task_id=str(uuid.uuid4()), task=task)

        replies = service.dispatch(requests(), None)
        ack = await anext(replies)
        (running,) = service.in_flight
        await asyncio.sleep(0)  # the task starts
        # Act
        try:
            await replies.aclose()
            await asyncio.wait([running], timeout=30)
        finally:
            gate.touch()
        # Assert
        assert ack.WhichOneof("payload") == "ack"
        assert running.cancelled()

    async def test_dispatch_calls_cancelled_at_once_leave_no_task(
        self, start_server, tmp_path: Path
    ) -> None:
        """Given dispatches of tasks that run until a gate, when each caller cancels its
        call right after sending it, then once the calls are over no task runs (the
        ones cancelled while their Ack was written ran on, the worker never idle)."""
        # Arrange
        server = await start_server()
        task = cloudpickle.dumps((gated, (str(tmp_path / "gate"),), {}))
        # Act
        async with grpc.aio.insecure_channel(server.address) as channel:
            call = channel.stream_stream(
                DISPATCH,
                request_serializer=Request.SerializeToString,
                response_deserializer=Response.FromString,
            )
            for attempt in range(100):
                dispatch = call(iter([Request(task_id=str(uuid.uuid4()), task=task)]))
                await asyncio.sleep(0.0002 * (attempt % 10))
                dispatch.cancel()
        # Assert
        try:
            await poll_until(lambda: len(server.service.in_flight) == 0, timeout=30)
        finally:
            (tmp_path / "gate").touch()

    async def test_dispatch_task_ending_cancelled_by_itself_is_not_task_cancelled(
        self, start_server
    ) -> None:
        """Given a task that ends cancelled with no stop (it awaited a cancelled
        future), when it is dispatched, then the caller gets TaskAborted carrying a
        CancelledError, its own failure, not TaskCancelled, which says a stop's grace
        ran out; the worker keeps serving."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(TaskAborted) as aborted:
                await connection.dispatch(awaits_a_cancelled_future)
            after = await connection.dispatch(echo, 1)
        # Assert
        assert isinstance(aborted.value.exception, asyncio.CancelledError)
        assert after == 1 and not server.service.stopping.is_set()

    async def test_dispatch_during_shutdown_unavailable(self, start_server, tmp_path: Path) -> None:
        """Given a worker draining a task, when a new task is dispatched and a second
        stop arrives, then the dispatch gets UNAVAILABLE, the second stop is harmless,
        and the draining task still completes."""
        # Arrange
        gate = tmp_path / "gate"
        _, connection, running, first_stop = await draining(start_server, gate)
        # Act
        with pytest.raises(TransientRpcError) as refused:
            await connection.dispatch(echo, 1)
        second_stop = asyncio.ensure_future(connection.stop(0.0))
        await asyncio.sleep(0.1)
        still_running = not running.done()
        gate.touch()
        # Assert
        assert refused.value.code is grpc.StatusCode.UNAVAILABLE
        assert still_running
        assert await running == "ok"
        await first_stop
        await second_stop
        await connection.close()

    async def test_conditional_stop_refused_while_task_in_flight(
        self, start_server, tmp_path: Path
    ) -> None:
        """Given a worker with a task in flight, when a conditional stop arrives (even
        with if_idle_for=0), then it is refused with FAILED_PRECONDITION, the worker
        keeps serving, and the task completes."""
        # Arrange
        server = await start_server()
        connection = WorkerConnection(server.address)
        gate = tmp_path / "gate"
        running = asyncio.ensure_future(connection.dispatch(gated, str(gate)))
        await poll_until(lambda: len(server.service.in_flight) == 1)
        # Act
        with pytest.raises(StopRefused) as refused:
            await connection.stop(30.0, if_idle_for=0.0)
        gate.touch()
        result = await running
        # Assert
        assert refused.value.code is grpc.StatusCode.FAILED_PRECONDITION
        assert result == "ok"
        assert not server.service.stopping.is_set()
        assert await connection.dispatch(echo, 2) == 2
        await connection.close()

    async def test_conditional_stop_refused_when_idle_too_short(self, start_server) -> None:
        """Given an idle worker, when a conditional stop asks for more idle than it
        has, then it is refused and the worker keeps serving."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(StopRefused):
                await connection.stop(30.0, if_idle_for=3600.0)
            idle = await connection.idle_time()
        # Assert
        assert idle > 0.0
        assert not server.service.stopping.is_set()

    async def test_conditional_stop_accepted_when_idle_long_enough(self, start_server) -> None:
        """Given a worker idle for a while, when a conditional stop asks for less idle
        than it has, then it stops."""
        # Arrange
        server = await start_server()
        await asyncio.sleep(0.1)
        # Act
        async with WorkerConnection(server.address) as connection:
            await connection.stop(30.0, if_idle_for=0.05)
        # Assert
        assert server.service.stopped.is_set()

    async def test_conditional_stop_and_dispatch_in_one_turn(self, start_server) -> None:
        """Given an idle worker, when a conditional stop and a dispatch arrive
        together many times, then either the task ran and the stop was refused, or
        the stop won and the task was refused before it started: never both
        stopped and cancelled."""
        # Arrange
        outcomes = set()
        for _ in range(30):
            server = await start_server()
            connection = WorkerConnection(server.address)
            # Act
            stop, task = await asyncio.gather(
                connection.stop(30.0, if_idle_for=0.0),
                connection.dispatch(sleep_for, 0.05),
                return_exceptions=True,
            )
            await connection.close()
            # Assert
            if isinstance(stop, StopRefused):
                assert task == 0.05
                outcomes.add("task_won")
            else:
                assert stop is None
                assert isinstance(task, TransientRpcError) or task == 0.05
                outcomes.add("stop_won")
        assert outcomes

    async def test_health_reports_not_serving_after_stop(self, start_server) -> None:
        """Given a worker, when it is checked through grpc.health.v1 before and during
        shutdown, then it is SERVING, then NOT_SERVING."""
        # Arrange
        server = await start_server()
        connection = WorkerConnection(server.address)
        call = asyncio.ensure_future(connection.dispatch(sleep_for, 0.5))
        await poll_until(lambda: len(server.service.in_flight) == 1)
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            before = await stub.Check(health_pb2.HealthCheckRequest(service=""))
            # Act
            stop = asyncio.ensure_future(connection.stop(5.0))
            await poll_until(server.service.stopping.is_set)
            await asyncio.sleep(0.05)
            during = await stub.Check(health_pb2.HealthCheckRequest(service=""))
        await stop
        await call
        await connection.close()
        # Assert
        assert before.status == health_pb2.HealthCheckResponse.SERVING
        assert during.status == health_pb2.HealthCheckResponse.NOT_SERVING


class TestWorkerServiceShutdown:
    async def test_idle_refused_while_draining(self, start_server, tmp_path: Path) -> None:
        """Given a worker draining a task for a stop, when its idle time is asked, then
        it is refused with FAILED_PRECONDITION (it answered 0: read busy, a leaving
        worker held its pool's floor), and the drain goes on to its end."""
        # Arrange
        gate = tmp_path / "gate"
        _, connection, running, first_stop = await draining(start_server, gate)
        # Act
        try:
            with pytest.raises(RpcError) as refused:
                await connection.idle_time(timeout=10)
            gate.touch()
            outcome = await asyncio.wait_for(running, 20)
            await asyncio.wait_for(first_stop, 20)
        finally:
            gate.touch()
            await connection.close()
        # Assert
        assert refused.value.code is grpc.StatusCode.FAILED_PRECONDITION
        assert outcome == "ok"

    async def test_shutdown_at_most_ends_a_longer_drain_sooner(
        self, start_server, tmp_path: Path
    ) -> None:
        """Given a worker draining a task that never ends for a stop of 30 s grace, when
        shutdown is asked again with 0.05 s at most (a supervisor's SIGTERM), then the
        drain ends by then: the task is cancelled and the stop answered, well within
        the stop's own grace."""
        # Arrange
        gate = tmp_path / "gate"  # never created before the end
        server, connection, running, first_stop = await draining(start_server, gate)
        # Act
        try:
            await asyncio.wait_for(server.service.shutdown(0.05, at_most=True), 20)
            outcome = (await asyncio.gather(running, return_exceptions=True))[0]
            await asyncio.wait_for(first_stop, 20)
        finally:
            gate.touch()
            await connection.close()
        # Assert
        assert isinstance(outcome, TaskCancelled)
        assert server.service.stopped.is_set()

    async def test_shutdown_at_most_never_lengthens_a_drain(
        self, start_server, tmp_path: Path
    ) -> None:
        """Given a worker draining a task that never ends for a stop of 0.05 s grace,
        when shutdown is asked again with an hour at most (a SIGTERM of a worker whose
        --grace is longer), then the drain still ends at the stop's grace: the task is
        cancelled."""
        # Arrange
        gate = tmp_path / "gate"
        server = await start_server()
        connection = WorkerConnection(server.address)
        running = asyncio.ensure_future(connection.dispatch(gated, str(gate)))
        await poll_until(lambda: len(server.service.in_flight) == 1)
        first = server.service.shutdown(0.05)
        # Act
        try:
            server.service.shutdown(3600.0, at_most=True)
            await asyncio.wait_for(first, 20)
            outcome = (await asyncio.gather(running, return_exceptions=True))[0]
        finally:
            gate.touch()
            await connection.close()
        # Assert
        assert isinstance(outcome, TaskCancelled)
