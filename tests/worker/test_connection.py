"""WorkerConnection against real gRPC servers on loopback."""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.http2 import REFUSED_STREAM, PlainHttp2Server
from support.processes import spawn_cli
from support.raw import UNDECODABLE, RawWorker
from support.scripted import ScriptedWorker
from support.tasks import (
    aborts_described_by_exiting_text,
    aborts_exiting_when_described,
    echo,
    gated_then_dispatches,
    gated_then_dispatches_together,
    outcome_exiting_when_unpickled,
    sized,
    sleep_for,
)
from support.waiting import eventually_async

from wool_idle.contract import stop_deadline, valid_idle
from wool_idle.exceptions import (
    IdleUnavailable,
    MalformedReply,
    NestedDispatchFailed,
    RpcError,
    StopRefused,
    TaskAborted,
    TaskOutcomeLost,
    TransientRpcError,
    WoolError,
)
from wool_idle.proto import Ack, IdleTime, Request, Response, StopRequest
from wool_idle.worker import IdleReport, WorkerConnection, WorkerService
from wool_idle.worker.channels import pool

ERROR_CODES = [code for code in grpc.StatusCode if code is not grpc.StatusCode.OK]
WOOLS_TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
"""The codes wool's own ``WorkerConnection`` (0.15) raises as transient: written out,
not read from ``TRANSIENT_CODES``, so that a change of that set fails the mapping test."""
FIXTURES_REUSED = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40, deadline=None
)


class TestWorkerConnection:
    async def test_idle_time_host_named_like_a_grpc_scheme_is_that_host(self) -> None:
        """Given a worker on the abstract Unix socket ``50051`` (anyone local may bind
        one) and an address ``unix-abstract:50051`` (port 50051 of the host so named),
        when idle_time is awaited, then that host is dialled (it does not resolve: a
        transient error), never the abstract socket (gRPC reads a bare target's host
        as a URI scheme when it names one)."""
        # Arrange
        port = 50000 + os.getpid() % 10000
        worker = ScriptedWorker(seconds=7.0)
        await worker.start(f"unix-abstract:{port}")
        try:
            # Act
            async with WorkerConnection(f"unix-abstract:{port}") as connection:
                with pytest.raises(TransientRpcError):
                    await connection.idle_time(timeout=2.0)
        finally:
            await worker.close()
        # Assert
        assert worker.idle_calls == 0

    async def test_idle_time_ipv6_zone_dialled_as_written(self) -> None:
        """Given a worker on ``[::1]`` and addresses naming it with IPv6 zones, when
        idle_time is awaited, then zone ``01`` (interface 1, ``lo``) reaches it and
        zone ``25lo`` (no such interface) does not: gRPC percent-decodes its target,
        which read ``%01`` as byte 0x01 (dialled nothing) and ``%25lo`` as zone ``lo``."""
        # Arrange
        worker = ScriptedWorker(seconds=7.0)
        port = int((await worker.start("[::1]:0")).rpartition(":")[2])
        try:
            # Act
            async with WorkerConnection(f"[::1%01]:{port}") as connection:
                seconds = await connection.idle_time(timeout=5.0)
            async with WorkerConnection(f"[::1%25lo]:{port}") as connection:
                with pytest.raises(TransientRpcError):
                    await connection.idle_time(timeout=5.0)
        finally:
            await worker.close()
        # Assert
        assert seconds == 7.0
        assert worker.idle_calls == 1

    @pytest.mark.parametrize("code", ERROR_CODES, ids=lambda c: c.name)
    async def test_idle_time_maps_status_codes(self, scripted, code: grpc.StatusCode) -> None:
        """Given a worker answering idle with any gRPC status code, when idle_time is
        awaited, then UNIMPLEMENTED maps to IdleUnavailable, transient codes (wool's:
        UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED) to TransientRpcError, others
        to RpcError."""
        # Arrange
        worker = await scripted(code=code)
        # Act
        async with WorkerConnection(worker.address) as connection:
            with pytest.raises(WoolError) as raised:
                await connection.idle_time()
        # Assert
        error = raised.value
        if code is grpc.StatusCode.UNIMPLEMENTED:
            assert type(error) is IdleUnavailable
            assert not isinstance(error, RpcError)
        elif code in WOOLS_TRANSIENT_CODES:
            assert type(error) is TransientRpcError
            assert error.code is code
        else:
            assert type(error) is RpcError
            assert error.code is code

    @pytest.mark.parametrize("timeout", [0, -1, -0.001, -math.inf, math.nan])
    async def test_idle_time_rejects_non_positive_timeout(self, scripted, timeout: float) -> None:
        """Given any non-positive timeout, when idle_time is awaited with it, then it
        raises ValueError without calling the worker."""
        # Arrange
        worker = await scripted(seconds=1.0)
        # Act
        async with WorkerConnection(worker.address) as connection:
            with pytest.raises(ValueError, match="timeout"):
                await connection.idle_time(timeout=timeout)
        # Assert
        assert worker.idle_calls == 0

    @given(timeout=st.one_of(st.none(), st.floats(min_value=1.0, max_value=1e6)))
    @FIXTURES_REUSED
    async def test_idle_time_forwards_timeout_as_deadline(self, scripted, timeout) -> None:
        """Given None or any positive timeout, when idle_time is awaited with it, then
        the worker sees it as the call's deadline."""
        # Arrange
        worker = await scripted(seconds=1.0)
        # Act
        async with WorkerConnection(worker.address) as connection:
            await connection.idle_time(timeout=timeout)
        # Assert
        (remaining,) = worker.deadlines
        if timeout is None:
            assert remaining is None
        else:
            # grpc-timeout travels in whole units of a coarse clock: allow 1%.
            assert timeout - 1.0 < remaining <= timeout * 1.01

    @pytest.mark.parametrize("timeout", [math.inf, 1e300, 1e10])
    async def test_idle_time_timeout_beyond_grpc_deadlines_is_none(
        self, scripted, timeout: float
    ) -> None:
        """Given a timeout so long that gRPC's deadline would overflow (infinity, a
        thousand years or more), when idle_time is awaited with it, then the call goes
        out without a deadline and returns the worker's value (never an at-once
        DEADLINE_EXCEEDED, which read as an unreachable worker)."""
        # Arrange
        worker = await scripted(seconds=1.0)
        # Act
        async with WorkerConnection(worker.address) as connection:
            seconds = await connection.idle_time(timeout=timeout)
        # Assert
        assert seconds == 1.0
        assert worker.deadlines == [None]

    @given(seconds=st.floats(allow_nan=True, allow_infinity=True))
    @FIXTURES_REUSED
    async def test_idle_time_returns_reported_value(self, scripted, seconds: float) -> None:
        """Given a worker reporting any double, when idle_time is awaited, then it
        returns exactly that value (validation is the caller's business)."""
        # Arrange
        worker = await scripted(seconds=seconds)
        # Act
        async with WorkerConnection(worker.address) as connection:
            value = await connection.idle_time()
        # Assert
        assert value == seconds or (math.isnan(value) and math.isnan(seconds))
        assert math.copysign(1.0, value) == math.copysign(1.0, seconds)

    @pytest.mark.parametrize("grace", [0.0, 2.5, -1.0])
    async def test_stop_sends_grace(self, scripted, grace: float) -> None:
        """Given a worker acknowledging stop, when stop is awaited with a grace, then
        it sends a StopRequest carrying the grace (and no condition) and returns None."""
        # Arrange
        worker = await scripted()
        # Act
        async with WorkerConnection(worker.address) as connection:
            result = await connection.stop(grace)
        # Assert
        assert result is None
        (request,) = worker.stop_requests
        assert request.timeout == grace
        assert not request.HasField("if_idle_for")

    async def test_stop_sends_condition(self, scripted) -> None:
        """Given a worker, when stop is awaited with if_idle_for, then the request
        carries the condition beside the grace."""
        # Arrange
        worker = await scripted()
        # Act
        async with WorkerConnection(worker.address) as connection:
            await connection.stop(5.0, if_idle_for=90.0)
        # Assert
        (request,) = worker.stop_requests
        assert (request.timeout, request.if_idle_for) == (5.0, 90.0)

    async def test_stop_maps_failed_precondition_to_refused(self, scripted) -> None:
        """Given a worker refusing a stop with FAILED_PRECONDITION, when stop is
        awaited, then StopRefused (an RpcError) is raised."""
        # Arrange
        worker = await scripted(code=grpc.StatusCode.FAILED_PRECONDITION)
        # Act
        async with WorkerConnection(worker.address) as connection:
            with pytest.raises(StopRefused) as raised:
                await connection.stop(5.0, if_idle_for=1.0)
        # Assert
        assert isinstance(raised.value, RpcError)

    async def test_connections_share_one_pooled_channel(self, scripted) -> None:
        """Given two connections to one worker, when both are used, then they share
        one channel, which closes when the last is released."""
        # Arrange
        worker = await scripted(seconds=3.0)
        first, second = WorkerConnection(worker.address), WorkerConnection(worker.address)
        # Act
        await first.idle_time()
        await second.idle_time()
        shared = pool().users(first.key)
        await first.close()
        after_one = pool().users(first.key)
        await second.close()
        # Assert
        assert (shared, after_one, pool().users(first.key)) == (2, 1, 0)

    async def test_close_lets_call_in_flight_finish(self, scripted) -> None:
        """Given a connection with an idle call in flight (the worker answers after a
        delay), when the connection is closed, then the call still gets its answer
        and the channel is given back afterwards."""
        # Arrange
        worker = await scripted(seconds=2.0, delay=0.3)
        connection = WorkerConnection(worker.address)
        call = asyncio.ensure_future(connection.idle_time(timeout=10))
        while worker.idle_calls == 0:
            await asyncio.sleep(0.01)
        # Act
        await connection.close()
        value = await call
        # Assert
        assert value == 2.0
        assert pool().users(connection.key) == 0

    @pytest.mark.parametrize("target", ["", "localhost", "host:0", "host:99999", "unix:", "a b:1"])
    def test_init_rejects_malformed_target(self, target: str) -> None:
        """Given a malformed target address, when a connection is made, then it raises
        ValueError naming the address."""
        # Act / Assert
        with pytest.raises(ValueError, match="invalid address"):
            WorkerConnection(target)

    @pytest.mark.parametrize("grace", [math.nan, -1e-50, 1e-50, 10**400, -(10**400)])
    async def test_stop_grace_meaningless_on_the_wire_raises(self, scripted, grace) -> None:
        """Given a NaN grace, one so small that the wire's 32-bit float makes it 0
        (a negative one meant: wait indefinitely), or an integer too large for any
        float, when stop is awaited with it, then ValueError without calling the
        worker (one would cancel its tasks at once)."""
        # Arrange
        worker = await scripted(seconds=1.0)
        # Act
        async with WorkerConnection(worker.address) as connection:
            with pytest.raises(ValueError, match="grace"):
                await connection.stop(grace)
        # Assert
        assert worker.stop_requests == []

    @pytest.mark.parametrize(("grace", "timeout"), [(30.0, 5.0), (5.0, 5.0), (1.0, 0.5)])
    async def test_stop_timeout_not_past_grace_raises(
        self, start_server, grace: float, timeout: float
    ) -> None:
        """Given a real worker with a task in flight, when stop is given a timeout that
        does not exceed its grace, then ValueError before any call and the worker
        keeps serving (the worker answers once drained: the deadline ran out first,
        a TransientRpcError that read as an unreachable worker while it stopped)."""
        # Arrange
        server = await start_server()
        async with WorkerConnection(server.address) as connection:
            call = asyncio.ensure_future(connection.dispatch(sleep_for, 0.5))
            assert await eventually_async(lambda: len(server.service.in_flight) == 1)
            # Act
            with pytest.raises(ValueError, match="must exceed grace"):
                await connection.stop(grace, timeout=timeout)
            await call
        # Assert
        assert not server.service.stopping.is_set()

    @pytest.mark.parametrize("if_idle_for", [math.nan, math.inf, -math.inf, -1.0, 10**400])
    async def test_stop_condition_out_of_range_raises(self, scripted, if_idle_for) -> None:
        """Given an if_idle_for that is not a finite number >= 0, when stop is awaited
        with it, then ValueError naming it without calling the worker (as for a bad
        grace; our worker would answer INVALID_ARGUMENT)."""
        # Arrange
        worker = await scripted(seconds=1.0)
        # Act
        async with WorkerConnection(worker.address) as connection:
            with pytest.raises(ValueError, match="if_idle_for"):
                await connection.stop(5.0, if_idle_for=if_idle_for)
        # Assert
        assert worker.stop_requests == []

    @pytest.mark.parametrize("method", ["dispatch", "idle", "stop"])
    async def test_call_stream_refused_is_transient(self, method: str) -> None:
        """Given a server that resets every stream with REFUSED_STREAM (HTTP/2: not
        processed; a server at its stream limit, or closing), when each method is
        called, then TransientRpcError with UNAVAILABLE (a dispatch came as a
        non-transient RpcError INTERNAL "Internal error from Core": gRPC's failure
        to send the request hid the stream's status, so a task that never ran read
        as one not worth retrying)."""
        # Arrange
        calls = {
            "dispatch": lambda c: c.dispatch(echo, 1),
            "idle": lambda c: c.idle_time(timeout=5.0),
            "stop": lambda c: c.stop(1.0, timeout=5.0),
        }
        # Act
        async with (
            PlainHttp2Server(reset=REFUSED_STREAM) as server,
            WorkerConnection(server.address) as connection,
        ):
            with pytest.raises(RpcError) as raised:
                await calls[method](connection)
        # Assert
        assert type(raised.value) is TransientRpcError
        assert raised.value.code is grpc.StatusCode.UNAVAILABLE

    async def test_dispatch_task_over_worker_limit_is_not_transient(self, start_server) -> None:
        """Given a worker (gRPC's default 4 MiB receive limit), when a task whose
        arguments pickle to more than that is dispatched, then an RpcError that is not
        transient (every worker refuses it alike: retrying elsewhere never ends; it
        came as TransientRpcError RESOURCE_EXHAUSTED, which backpressure also
        answers), and the worker keeps serving with its idle time untouched."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(RpcError) as raised:
                await connection.dispatch(echo, b"x" * (5 * 1024 * 1024))
            after = await connection.dispatch(echo, "still serving")
        # Assert
        assert type(raised.value) is RpcError
        assert raised.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "message limit" in raised.value.details
        assert after == "still serving"


class TestUnclosedConnection:
    async def test_collected_unclosed_releases_channel_and_warns(self, start_server) -> None:
        """Given a connection that made a call and was never closed, when it is
        garbage-collected, then ResourceWarning names its worker and its channel's
        use is given back (the pool counted it for good: the channel, its socket,
        stayed open, and no later close of another connection closed it)."""
        # Arrange
        server = await start_server()
        connection = WorkerConnection(server.address)
        key = connection.key
        await connection.idle_time(timeout=10)
        # Act
        with pytest.warns(ResourceWarning, match=server.address):
            del connection
            gc.collect()
        released = await eventually_async(lambda: pool().users(key) == 0)
        # Assert
        assert released


class TestUndecodableReplies:
    @pytest.mark.parametrize("method", ["idle_time", "idle_report", "stop", "dispatch"])
    async def test_call_undecodable_reply_is_malformed(self, method: str) -> None:
        """Given a worker answering every method with bytes that are not its reply
        message, when each method is called, then MalformedReply (an RpcError with
        code INTERNAL, not transient) names the method and the message expected."""
        # Arrange
        calls = {
            "idle_time": lambda c: c.idle_time(timeout=5),
            "idle_report": lambda c: c.idle_report(timeout=5),
            "stop": lambda c: c.stop(1.0, timeout=5),
            "dispatch": lambda c: c.dispatch(echo, 1),
        }
        # Act
        async with RawWorker() as worker, WorkerConnection(worker.address) as connection:
            with pytest.raises(MalformedReply) as raised:
                await calls[method](connection)
        # Assert
        error = raised.value
        assert isinstance(error, RpcError) and not isinstance(error, TransientRpcError)
        assert error.code is grpc.StatusCode.INTERNAL
        expected = {"dispatch": "Response", "stop": "Void"}.get(method, "IdleTime")
        assert f"does not decode as {expected}" in str(error)
        assert error.method == method.removesuffix("_time").removesuffix("_report")

    @pytest.mark.parametrize(
        "reply",
        [
            StopRequest(timeout=1e9).SerializeToString(),  # seconds as a float
            Request(task_id="x").SerializeToString(),  # seconds as a string
            b"\x08\x80\x94\xeb\xdc\x03",  # seconds as a varint
            IdleTime(seconds=1e9).SerializeToString() + b"\x92\xf1\x04\x00",
        ],
        ids=["stop-request", "request", "varint", "conditional-stop-as-bytes"],
    )
    async def test_idle_field_of_another_wire_type_is_malformed(self, reply: bytes) -> None:
        """Given a worker answering idle with bytes where a field of IdleTime has a
        wire type it cannot have (another message's bytes), when its idle time is
        asked, then MalformedReply names the field: never the default 0 (busy)."""
        # Arrange
        async with RawWorker(reply=reply) as worker, WorkerConnection(worker.address) as connection:
            # Act
            with pytest.raises(MalformedReply) as raised:
                await connection.idle_report(timeout=5)
        # Assert
        assert "does not decode as IdleTime: field" in str(raised.value)

    async def test_idle_unknown_fields_of_other_numbers_are_kept_out_of_the_way(self) -> None:
        """Given a worker answering idle with its value and a field IdleTime does not
        have (a later version's), when its idle time is asked, then the value."""
        # Arrange
        reply = IdleTime(seconds=12.5).SerializeToString() + b"\x98\x06\x01"  # field 99
        # Act
        async with RawWorker(reply=reply) as worker, WorkerConnection(worker.address) as connection:
            report = await connection.idle_report(timeout=5)
        # Assert
        assert report == IdleReport(12.5, False)

    @pytest.mark.parametrize("method", ["idle_time", "stop"])
    async def test_status_ok_without_a_message_is_malformed_and_logs_no_traceback(
        self, method: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a server answering status OK with no message at all (trailers only),
        when idle or stop is called, then MalformedReply says so, and gRPC logs no
        traceback of a decoder that failed."""
        # Arrange
        caplog.set_level(logging.WARNING, logger="grpc")
        async with (
            PlainHttp2Server(200, grpc_status=0) as server,
            WorkerConnection(server.address) as connection,
        ):
            # Act
            with pytest.raises(MalformedReply) as raised:
                if method == "stop":
                    await connection.stop(1.0, timeout=5)
                else:
                    await connection.idle_time(timeout=5)
        # Assert
        assert "a status OK without a message" in str(raised.value)
        assert [r.getMessage() for r in caplog.records if r.name.startswith("grpc")] == []

    async def test_dispatch_replies_out_of_order_is_malformed(self) -> None:
        """Given a worker answering a dispatch with two Acks, when a task is
        dispatched, then MalformedReply says the replies were out of order."""
        # Arrange
        ack = Response(ack=Ack()).SerializeToString()
        # Act
        async with (
            RawWorker(stream=[ack, ack]) as worker,
            WorkerConnection(worker.address) as connection,
        ):
            with pytest.raises(MalformedReply, match="out of order"):
                await connection.dispatch(echo, 1)

    async def test_idle_time_undecodable_then_good_worker(self, scripted) -> None:
        """Given one worker answering garbage and one answering a value, when both
        are asked, then only the first fails: the second's value comes back."""
        # Arrange
        good = await scripted(seconds=4.0)
        # Act
        async with (
            RawWorker(reply=UNDECODABLE) as bad,
            WorkerConnection(bad.address) as one,
            WorkerConnection(good.address) as two,
        ):
            with pytest.raises(MalformedReply):
                await one.idle_time(timeout=5)
            value = await two.idle_time(timeout=5)
        # Assert
        assert value == 4.0


class TestIdleReport:
    async def test_idle_report_our_worker_honours_conditional_stop(self, start_server) -> None:
        """Given our worker, when idle_report is awaited, then the reply says the
        conditional stop is honoured, and idle_time gives the same kind of value."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            report = await connection.idle_report(timeout=5)
            seconds = await connection.idle_time(timeout=5)
        # Assert
        assert report.conditional_stop is True
        assert 0.0 < report.seconds <= seconds

    async def test_idle_report_without_extension_is_not_honoured(self, scripted) -> None:
        """Given a worker whose reply carries only the seconds (as wool's does), when
        idle_report is awaited, then the conditional stop reads as not honoured."""
        # Arrange
        worker = await scripted(seconds=7.5)
        # Act
        async with WorkerConnection(worker.address) as connection:
            report = await connection.idle_report()
        # Assert
        assert report == IdleReport(seconds=7.5, conditional_stop=False)


class TestDispatchAfterAck:
    async def test_dispatch_abort_after_ack_is_outcome_lost(self) -> None:
        """Given a worker that acknowledges a task and then fails the call with a
        transient code, when the task is dispatched, then TaskOutcomeLost (not
        TransientRpcError: the task may have run) keeps the code."""
        # Arrange
        ack = Response(ack=Ack()).SerializeToString()
        aborting = RawWorker(stream=[ack], abort=grpc.StatusCode.UNAVAILABLE)
        # Act
        async with aborting as worker, WorkerConnection(worker.address) as connection:
            with pytest.raises(TaskOutcomeLost) as raised:
                await connection.dispatch(echo, 1)
        # Assert
        assert not isinstance(raised.value, TransientRpcError)
        assert raised.value.code is grpc.StatusCode.UNAVAILABLE

    async def test_dispatch_result_over_client_limit_is_outcome_lost(self, start_server) -> None:
        """Given a worker allowed to send more than the client receives, when a task
        returns a result over the client's limit, then the call fails with
        TaskOutcomeLost (never "retry elsewhere"), and the worker keeps serving."""
        # Arrange
        server = await start_server(service=WorkerService(max_outcome_bytes=64 * 1024 * 1024))
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(TaskOutcomeLost) as raised:
                await connection.dispatch(sized, 5 * 1024 * 1024)
            after = await connection.dispatch(echo, "still serving")
        # Assert
        assert raised.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert not isinstance(raised.value, TransientRpcError)
        assert after == "still serving"


class TestNestedDispatch:
    @pytest.mark.parametrize("together", [False, True])
    async def test_dispatch_task_whose_own_dispatch_was_refused_is_not_transient(
        self, start_server, tmp_path, together: bool
    ) -> None:
        """Given a task on a worker that, once the worker is draining for a stop,
        dispatches a subtask to that same worker (refused: UNAVAILABLE), or two in an
        asyncio.TaskGroup, and lets the subtask's TransientRpcError (or the group's
        ExceptionGroup of them) propagate, when its caller reads the outcome, then it
        gets NestedDispatchFailed carrying that error, never a TransientRpcError nor a
        group that ``except* TransientRpcError`` catches: the task ran, and a caller
        retrying it elsewhere would run it twice."""
        # Arrange
        server = await start_server()
        gate = tmp_path / "gate"
        task = gated_then_dispatches_together if together else gated_then_dispatches
        connection = WorkerConnection(server.address)
        outer = asyncio.ensure_future(connection.dispatch(task, str(gate), server.address, 1))
        assert await eventually_async(lambda: len(server.service.in_flight) == 1)
        stop = asyncio.ensure_future(connection.stop(30.0))
        assert await eventually_async(server.service.stopping.is_set)
        # Act
        gate.touch()
        outcome = (await asyncio.gather(outer, return_exceptions=True))[0]
        await stop
        await connection.close()
        # Assert
        assert isinstance(outcome, NestedDispatchFailed)
        carried = outcome.exception
        if together:
            assert isinstance(carried, ExceptionGroup)
            carried = carried.exceptions[0]
        assert isinstance(carried, TransientRpcError)
        assert carried.code is grpc.StatusCode.UNAVAILABLE


class TestDispatchOutcomeUnpickling:
    @pytest.mark.parametrize(("outcome", "code"), [("return", 5), ("raise", 6)])
    async def test_dispatch_outcome_exiting_when_unpickled_is_task_aborted(
        self, start_server, outcome: str, code: int
    ) -> None:
        """Given a task whose result (or exception) calls sys.exit when the caller
        unpickles it, when it is dispatched, then the caller gets TaskAborted carrying
        that SystemExit: the worker's code cannot end the caller's process."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(TaskAborted) as aborted:
                await connection.dispatch(outcome_exiting_when_unpickled, outcome)
        # Assert
        assert isinstance(aborted.value.exception, SystemExit)
        assert aborted.value.exception.code == code

    async def test_dispatch_abort_exiting_when_described_is_task_aborted(
        self, start_server
    ) -> None:
        """Given a task raising a BaseException whose repr and type check call sys.exit
        on the caller's side, when it is dispatched, then the caller gets TaskAborted
        carrying it: its code cannot end the caller's process."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(TaskAborted) as aborted:
                await connection.dispatch(aborts_exiting_when_described)
        # Assert
        assert type(aborted.value.exception).__name__ == "AbortExitingWhenDescribed"
        assert "failing repr" in str(aborted.value)

    async def test_dispatch_abort_described_by_exiting_text_is_task_aborted(
        self, start_server
    ) -> None:
        """Given a task raising a BaseException whose repr is a str subclass that calls
        sys.exit when formatted, when it is dispatched, then the caller gets
        TaskAborted quoting that text (formatting it ended the caller's process)."""
        # Arrange
        server = await start_server()
        # Act
        async with WorkerConnection(server.address) as connection:
            with pytest.raises(TaskAborted) as aborted:
                await connection.dispatch(aborts_described_by_exiting_text)
        # Assert
        assert str(aborted.value) == "task raised described"


class TestContractHelpers:
    @pytest.mark.parametrize(
        ("seconds", "valid"),
        [
            (0.0, True),
            (12.5, True),
            (0, True),
            (-0.0, True),
            (math.nan, False),
            (math.inf, False),
            (-math.inf, False),
            (-1e-9, False),
            (None, False),
            (True, False),
            (-1, False),
            (10**400, True),
            ("12", False),
        ],
    )
    def test_valid_idle(self, seconds, valid: bool) -> None:
        """Given an answered value, then only a finite number >= 0 is an idle value."""
        assert valid_idle(seconds) is valid

    @pytest.mark.parametrize(("grace", "deadline"), [(0.0, 10.0), (30.0, 40.0), (-1.0, None)])
    def test_stop_deadline_exceeds_grace(self, grace: float, deadline: float | None) -> None:
        """Given a grace, then the stop RPC's deadline lies past the drain (none if unbounded)."""
        assert stop_deadline(grace) == deadline


@pytest.fixture
def worker_process() -> Iterator[str]:
    """A real ``wool-idle worker`` subprocess on loopback; its address."""
    process = spawn_cli(["worker", "--listen", "127.0.0.1:0"])
    assert process.stdout is not None
    address = process.stdout.readline().strip()
    try:
        assert address, "the worker printed no address"
        yield address
    finally:
        process.kill()
        process.communicate()


class TestWorkerConnectionAcrossLoops:
    def test_idle_time_in_a_second_asyncio_run(self, worker_process: str) -> None:
        """Given a connection used under one asyncio.run and not closed, when it is used
        under a second asyncio.run, then it answers (it reused the first loop's
        channel, whose loop was closed: RuntimeError 'Event loop is closed')."""
        # Arrange
        connection = WorkerConnection(worker_process)
        first = asyncio.run(connection.idle_time(timeout=10))
        # Act
        second = asyncio.run(connection.idle_time(timeout=10))
        # Assert
        assert valid_idle(first) and valid_idle(second)

    def test_idle_time_from_two_threads_at_once(self, worker_process: str) -> None:
        """Given one connection, when the event loops of two threads call idle on it
        at once, then every call answers (each loop got the other's channel:
        RuntimeError 'attached to a different loop')."""
        # Arrange
        connection = WorkerConnection(worker_process)

        async def calls() -> list[float]:
            async with connection:
                return [await connection.idle_time(timeout=10) for _ in range(50)]

        # Act
        with ThreadPoolExecutor(2) as threads:
            answers = list(threads.map(lambda _: asyncio.run(calls()), range(2)))
        # Assert
        assert all(valid_idle(seconds) for thread in answers for seconds in thread)
        assert [len(thread) for thread in answers] == [50, 50]
