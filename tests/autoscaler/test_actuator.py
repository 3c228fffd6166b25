"""The actuator against real gRPC servers: confirm, then a conditional stop; one
worker's failure, whatever it is, is that worker's result."""

from __future__ import annotations

import asyncio
import json
import logging
import math

import grpc
import pytest
from support import unix_http
from support.draining import draining
from support.raw import length_delimited
from support.scripted import ScriptedWorker
from support.waiting import eventually_async
from support.wool_pools import WoolFleet

from wool_idle.autoscaler import actuator as actuator_module
from wool_idle.autoscaler.actuator import ActionSettings, WorkerActuator
from wool_idle.autoscaler.policy import Decision
from wool_idle.autoscaler.stop_outcome import StopAttempt
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.contract import MAX_REPLY_BYTES
from wool_idle.discovery.published import read_records
from wool_idle.exceptions import RpcError, TransientRpcError
from wool_idle.logs import TextFormatter
from wool_idle.proto import IdleTime
from wool_idle.worker import WorkerConnection
from wool_idle.worker.channels import ChannelKey, pool

ANSWER_WAIT = 30.0
"""Seconds a real worker is given to answer, or to go: a bound on a loaded machine's
slowness, never what an assertion is about."""


def actuator(*, dry_run: bool = False, before_stop=None) -> WorkerActuator:
    return WorkerActuator(
        ActionSettings(grace=1.0, rpc_timeout=2.0),
        max_idle=60.0,
        dry_run=dry_run,
        before_stop=before_stop,
    )


def recording(grace: float) -> tuple[WorkerActuator, list[tuple[str, StopResult]]]:
    """An actuator with ``grace`` and the (worker, outcome) of each stop that ended in the
    background, as handed to ``stop_ended``."""
    ended: list[tuple[str, StopResult]] = []

    async def stop_ended(decision: Decision, result: StopResult) -> None:
        ended.append((decision.worker, result))

    actuator = WorkerActuator(
        ActionSettings(grace=grace), max_idle=60.0, dry_run=False, stop_ended=stop_ended
    )
    return actuator, ended


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

    async def test_retire_worker_draining_for_another_stop_is_refused_busy(
        self, start_server, tmp_path
    ) -> None:
        """Given a real worker draining a task for a stop another caller sent (an
        operator's ``wool-idle stop``, SIGTERM), which refuses idle as stopping, when
        retired, then the result is refused_busy, as when it answered 0 while it
        drained, not failed (counted towards WoolAutoscalerStopsFailing), and no stop
        is sent."""
        # Arrange
        gate = tmp_path / "gate"
        server, connection, running, other_stop = await draining(start_server, gate)
        # Act
        try:
            attempt = await actuator().retire(stop(server.address))
        finally:
            gate.touch()
            await asyncio.gather(running, other_stop, return_exceptions=True)
            await connection.close()
        # Assert
        assert attempt.result is StopResult.REFUSED_BUSY

    @pytest.mark.parametrize(
        ("stop_code", "expected"),
        [
            (grpc.StatusCode.FAILED_PRECONDITION, StopResult.REFUSED_BUSY),
            (grpc.StatusCode.PERMISSION_DENIED, StopResult.FAILED),
            (grpc.StatusCode.UNAVAILABLE, StopResult.UNANSWERED),
            (grpc.StatusCode.DEADLINE_EXCEEDED, StopResult.UNANSWERED),
            (grpc.StatusCode.INTERNAL, StopResult.UNANSWERED),
            (grpc.StatusCode.CANCELLED, StopResult.UNANSWERED),
        ],
    )
    async def test_retire_stop_answers(
        self, scripted, stop_code: grpc.StatusCode, expected: StopResult
    ) -> None:
        """Given a worker confirming its idle time whose stop reply is a refusal (busy,
        not permitted) or any other error status, when retired, then a refusal is
        refused_busy or failed, and any other status is unanswered (the stop may have
        been carried out: the worker counts as retiring)."""
        # Arrange
        worker = await scripted(seconds=100.0, stop_code=stop_code)
        # Act
        attempt = await actuator().retire(stop(worker.address))
        # Assert
        assert attempt == StopAttempt(expected, 100.0)
        assert len(worker.stop_requests) == 1

    @pytest.mark.parametrize("grace", [-1.0, 3600.0])
    async def test_retire_draining_stop_goes_on_in_the_background(
        self, scripted, monkeypatch: pytest.MonkeyPatch, grace: float
    ) -> None:
        """Given a long or unbounded grace and a worker that answers its stop only once
        drained, later than the cycle waits, when retired, then the result is
        unanswered at once (it counts as retiring; the cycle goes on), and the call is
        not cut short: it ends in the background, answered (a wool worker whose stop
        call is cancelled never exits)."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.3)
        worker = await scripted(seconds=100.0, stop_delay=1.5)
        draining = WorkerActuator(ActionSettings(grace=grace), max_idle=60.0, dry_run=False)
        # Act
        attempt = await draining.retire(stop(worker.address))
        answered_then = worker.stops_answered
        await draining.finish_stops(10.0)
        # Assert
        assert attempt == StopAttempt(StopResult.UNANSWERED, 100.0, going_on=True)
        assert answered_then == 0
        assert (worker.stops_answered, worker.stops_cancelled) == (1, 0)

    async def test_retire_late_answer_is_handed_on_and_no_second_stop_is_sent(
        self, scripted, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given a worker whose stop answers only after the cycle gave up waiting, when
        it is retired again while that stop goes on, then no second stop is sent (it
        stays unanswered); once the first is answered, its decision is handed to
        `stop_ended` as answered, so its stop is recorded and its drop published then."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.2)
        worker = await scripted(seconds=100.0, stop_delay=1.0)
        draining, late = recording(grace=30.0)
        # Act
        first = await draining.retire(stop(worker.address))
        again = await draining.retire(stop(worker.address))
        await draining.finish_stops(10.0)
        # Assert
        assert first == StopAttempt(StopResult.UNANSWERED, 100.0, going_on=True)
        assert again == StopAttempt(StopResult.UNANSWERED, going_on=True)
        assert len(worker.stop_requests) == 1 and worker.stops_answered == 1
        assert late == [(worker.address, StopResult.STOPPED)]

    async def test_retire_background_stop_cut_off_is_handed_on_unanswered(
        self, scripted, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given a stop going on in the background whose worker goes away before
        answering (it exited while draining), when the call ends, then its decision is
        handed to `stop_ended` as not answered (the worker stays retiring; no drop)."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.2)
        worker = await scripted(seconds=100.0, stop_delay=3600.0)
        draining, ended = recording(grace=-1.0)
        await draining.retire(stop(worker.address))
        # Act
        await worker.close()
        await draining.finish_stops(10.0)
        # Assert
        assert ended == [(worker.address, StopResult.UNANSWERED)]

    @pytest.mark.parametrize(
        ("stop_code", "expected"),
        [
            (grpc.StatusCode.FAILED_PRECONDITION, StopResult.REFUSED_BUSY),
            (grpc.StatusCode.PERMISSION_DENIED, StopResult.FAILED),
        ],
    )
    async def test_retire_background_stop_refused_late_is_handed_on_refused(
        self, scripted, monkeypatch: pytest.MonkeyPatch, stop_code, expected: StopResult
    ) -> None:
        """Given a stop going on in the background that the worker refuses after all,
        when the call ends, then its decision is handed to `stop_ended` with the
        refusal (the worker is alive: not retiring, not retired)."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.2)
        worker = await scripted(seconds=100.0, stop_delay=0.6, stop_code=stop_code)
        draining, ended = recording(grace=30.0)
        # Act
        first = await draining.retire(stop(worker.address))
        await draining.finish_stops(10.0)
        # Assert
        assert first.result is StopResult.UNANSWERED
        assert ended == [(worker.address, expected)]

    async def test_background_stop_cancelled_at_exit_gives_its_channel_back(
        self, scripted, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given a stop going on in the background, when the loop cancels it (the
        process leaving past its wait), then its connection is closed and nothing is
        left going on."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.1)
        worker = await scripted(seconds=100.0, stop_delay=3600.0)
        draining = WorkerActuator(ActionSettings(grace=-1.0), max_idle=60.0, dry_run=False)
        await draining.retire(stop(worker.address))
        (ending,) = draining._going_on.values()
        await asyncio.sleep(0.1)  # it runs, waiting for the call, as at any exit
        key = ChannelKey(worker.address, None, actuator_module.CHANNEL_OPTIONS)
        users_before = pool().users(key)
        # Act
        ending.cancel()
        await asyncio.gather(ending, return_exceptions=True)
        released = await eventually_async(lambda: pool().users(key) == 0)
        # Assert
        assert users_before == 1
        assert draining._going_on == {} and released

    async def test_finish_stops_leaves_after_its_timeout(
        self, scripted, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a stop going on in the background that outlasts the wait, when the
        stops are finished with a short timeout, then it returns after it and logs that
        a stop was still going on."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.1)
        worker = await scripted(seconds=100.0, stop_delay=3600.0)
        draining = WorkerActuator(ActionSettings(grace=-1.0), max_idle=60.0, dry_run=False)
        await draining.retire(stop(worker.address))
        # Act
        await draining.finish_stops(0.3)
        # Assert
        assert worker.stops_answered == 0
        assert "leaving with 1 stop(s) still going on" in caplog.text

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

    async def test_retire_worker_label_cannot_forge_a_decision_line(self, caplog) -> None:
        """Given a worker on a Unix socket whose path holds blanks and the text of a
        decision on another worker (``decision worker=10.9.9.9:1 verdict=stop
        result=stopped``), and which does not say it honours the conditional stop, when
        retired, then each line logged about it (text format) names it as one quoted
        value: no line reads as a decision on 10.9.9.9:1 (a grep, a logfmt parser)."""
        # Arrange
        forged = " decision worker=10.9.9.9:1 verdict=stop result=stopped"
        worker = ScriptedWorker(seconds=100.0)
        address = await worker.start(f"unix:{unix_http.socket_path('forge')}{forged}")
        # Act
        try:
            with caplog.at_level(logging.INFO, logger="wool_idle.autoscaler"):
                attempt = await actuator().retire(stop(address))
        finally:
            await worker.close()
        # Assert
        lines = [TextFormatter().format(record) for record in caplog.records]
        assert attempt.result is StopResult.STOPPED and lines
        assert all(json.dumps(address) in line for line in lines), lines
        assert not any(forged in line.replace(json.dumps(address), "") for line in lines)

    async def test_retire_long_error_details_cannot_split_into_a_forged_line(
        self, scripted, caplog
    ) -> None:
        """Given a worker failing the idle RPC with a status message of thousands of
        control characters then a decision on another worker (gRPC takes up to 16 KiB
        of them; each is escaped as six characters, so the line grew past the 16 KiB
        at which Docker and the CRI split a line, its end read as a line of its own),
        when retired, then the line logged (text format) keeps the start of the
        message only, and the forged decision is not in it."""
        # Arrange
        forged = "2026-01-01T00:00:00.000Z INFO wool_idle.autoscaler: decision worker=10.9.9.9:1"
        worker = await scripted(code=grpc.StatusCode.INTERNAL, details="\x01" * 2600 + forged)
        # Act
        with caplog.at_level(logging.INFO, logger="wool_idle.autoscaler"):
            attempt = await actuator().retire(stop(worker.address))
        # Assert
        (line,) = [TextFormatter().format(record) for record in caplog.records]
        assert attempt.result is StopResult.FAILED and "\\u0001" in line
        assert forged not in line and f"({2600 + len(forged)} characters)" in line
        assert len(line.encode()) < 8 * 1024

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

    async def test_retire_idle_reply_over_the_limit_is_failed(self, scripted) -> None:
        """Given a worker whose idle reply carries an idle value past the rule and a
        field bloating it past ``MAX_REPLY_BYTES``, when retired, then the reply is not
        taken in (``RESOURCE_EXHAUSTED``, transient: unreachable) and no stop is sent."""
        # Arrange
        padding = length_delimited(15, bytes(MAX_REPLY_BYTES + 1024))  # a field IdleTime lacks
        worker = await scripted(reply=IdleTime(seconds=100.0).SerializeToString() + padding)
        # Act
        attempt = await actuator().retire(stop(worker.address))
        # Assert
        assert attempt == StopAttempt(StopResult.UNREACHABLE)
        assert worker.stop_requests == []

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


def graceful(grace: float, before_stop=None) -> WorkerActuator:
    """An actuator with ``grace`` that gives a real worker's confirmation ``ANSWER_WAIT``."""
    return WorkerActuator(
        ActionSettings(grace=grace, rpc_timeout=ANSWER_WAIT),
        max_idle=0.2,
        dry_run=False,
        before_stop=before_stop,
    )


def window_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "conditional stop" in r.getMessage()]


class TestConditionalStop:
    @pytest.mark.parametrize("dry_run", [False, True])
    async def test_retire_grace_zero_unconditional_worker_sends_no_stop(
        self, scripted, caplog: pytest.LogCaptureFixture, dry_run: bool
    ) -> None:
        """Given a worker whose idle reply does not say it honours the conditional stop
        (as a wool worker's never does) and grace 0, when retired (dry run or not),
        then no stop is sent, the result is unconditional_grace_zero with the confirmed
        idle time, and one log line names the worker and the grace."""
        # Arrange
        worker = await scripted(seconds=100.0)
        actuator = WorkerActuator(
            ActionSettings(grace=0.0, rpc_timeout=2.0), max_idle=60.0, dry_run=dry_run
        )
        # Act
        with caplog.at_level(logging.INFO, logger="wool_idle.autoscaler"):
            attempt = await actuator.retire(stop(worker.address))
        # Assert
        assert attempt == StopAttempt(StopResult.UNCONDITIONAL_GRACE_ZERO, 100.0)
        assert worker.stop_requests == []
        (line,) = window_lines(caplog)
        assert worker.address in line and "grace 0s" in line

    @pytest.mark.parametrize(("grace", "shown"), [(1.5, "grace 1.5s"), (-1.0, "without limit")])
    async def test_retire_unconditional_worker_logs_the_open_window(
        self, scripted, caplog: pytest.LogCaptureFixture, grace: float, shown: str
    ) -> None:
        """Given a worker that does not honour the conditional stop and a grace other
        than 0, when retired, then it is stopped with that grace and one log line says
        the window is open, with the worker and the grace."""
        # Arrange
        worker = await scripted(seconds=100.0)
        actuator = WorkerActuator(ActionSettings(grace=grace), max_idle=60.0, dry_run=False)
        # Act
        with caplog.at_level(logging.INFO, logger="wool_idle.autoscaler"):
            attempt = await actuator.retire(stop(worker.address))
        # Assert
        assert attempt.result is StopResult.STOPPED
        assert [r.timeout for r in worker.stop_requests] == [grace]
        (line,) = window_lines(caplog)
        assert worker.address in line and "window is open" in line and shown in line

    async def test_retire_our_worker_with_grace_zero_is_stopped_conditionally(
        self, fleet, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given our worker (it says it honours the conditional stop) idle past the rule
        and grace 0, when retired, then it is stopped (the worker itself refuses if work
        arrived), exits, and nothing is logged about a window."""
        # Arrange
        (address,) = await fleet.start(1)
        await asyncio.sleep(0.3)
        # Act
        with caplog.at_level(logging.INFO, logger="wool_idle.autoscaler"):
            attempt = await graceful(0.0).retire(stop(address))
        # Assert
        assert attempt.result is StopResult.STOPPED
        assert await fleet.wait_exit(address) == 0
        assert window_lines(caplog) == []

    async def test_retire_leaving_as_the_write_before_the_stop_ends_sends_no_stop(
        self, fleet
    ) -> None:
        """Given our worker (it honours the conditional stop: confirmed once) idle past
        the rule, when the daemon is signalled just as the write before its stop ends
        (the signal handled in the same turn of the loop), then no stop is sent after the
        signal and nothing came of it (the stop went out: the confirmation had ended)."""
        # Arrange
        (address,) = await fleet.start(1)
        await asyncio.sleep(0.3)
        leaving = asyncio.Event()

        async def written(worker: str) -> None:
            leaving.set()

        retiring = graceful(1.0, before_stop=written)
        retiring.leaving = leaving
        # Act
        attempt = await retiring.retire(stop(address))
        # Assert
        assert attempt is None
        assert fleet.alive(address)

    @pytest.mark.parametrize(("written_down", "asked"), [(False, 1), (True, 2)])
    async def test_retire_unconditional_worker_asked_again_only_after_a_write(
        self, scripted, written_down: bool, asked: int
    ) -> None:
        """Given an idle worker that does not honour the conditional stop, when retired
        with and without a ``before_stop`` (the state file's write), then it is stopped,
        asked its idle time once more only when something was awaited in between."""
        # Arrange
        worker = await scripted(seconds=100.0)

        async def write_down(address: str) -> None:
            pass

        # Act
        attempt = await actuator(before_stop=write_down if written_down else None).retire(
            stop(worker.address)
        )
        # Assert
        assert attempt == StopAttempt(StopResult.STOPPED, 100.0)
        assert worker.idle_calls == asked

    async def test_retire_unconditional_worker_busy_once_the_stop_is_written_down(
        self, scripted
    ) -> None:
        """Given a worker that does not honour the conditional stop, idle past the rule
        at the confirmation, which gets a task while the stop is written down before it
        is sent (the state file's write may take up to 10 s), when retired, then no stop
        is sent and the result is refused_busy with the idle time read last: the one
        confirmation was no longer the worker's state."""
        # Arrange
        worker = await scripted(seconds=100.0)

        async def task_arrives(address: str) -> None:
            worker.seconds = 0.0

        # Act
        attempt = await actuator(before_stop=task_arrives).retire(stop(worker.address))
        # Assert
        assert attempt == StopAttempt(StopResult.REFUSED_BUSY, 0.0)
        assert worker.stop_requests == []

    @pytest.mark.e2e
    async def test_retire_real_wool_worker_given_a_task_before_the_stop_is_sent(
        self,
    ) -> None:
        """Given a real wool 0.15.7 worker idle past the rule, and a wool client whose
        task (longer than the grace) reaches it after the confirmation, while the stop
        is written down, when retired, then it is not stopped, and the client's task
        completes (stopped, the task was cancelled once the grace ran out)."""
        # Arrange
        async with WoolFleet() as pools:
            await pools.hold()
            await pools.serve("hot", 1)
            (address,) = [r.address for r in read_records(pools.namespace)]
            await asyncio.sleep(0.3)
            clients = []

            async def task_arrives(worker: str) -> None:
                # One task: its 4 s outlast the client's 2 s (a window of 0.1 s could
                # close before the client, starved a moment, sent its first task).
                clients.append(await pools.client("hot", seconds=2.0, task_seconds=4.0))
                assert await eventually_async_idle_zero(worker)

            # Act
            attempt = await graceful(1.0, before_stop=task_arrives).retire(stop(address))
            counts = await pools.counts(clients[0])
            # Assert
            assert attempt.result is StopResult.REFUSED_BUSY
            assert counts == {"submitted": 1, "completed": 1, "failed": 0}
            assert await answers(address)

    @pytest.mark.e2e
    async def test_retire_real_wool_worker(self, caplog: pytest.LogCaptureFixture) -> None:
        """Given two real wool 0.15.7 workers idle past the rule, when one is retired
        with grace 0 and the other with grace 1s, then the first gets no stop (it keeps
        answering, result unconditional_grace_zero) and the second is stopped (it stops
        answering: refuses connections once its server shut down, after its stop reply)
        with a log line saying the window is open."""
        # Arrange
        async with WoolFleet() as pools:
            await pools.hold()
            await pools.serve("hot", 2)
            first, second = sorted(r.address for r in read_records(pools.namespace))
            await asyncio.sleep(0.3)
            # Act
            with caplog.at_level(logging.INFO, logger="wool_idle.autoscaler"):
                kept = await graceful(0.0).retire(stop(first))
                stopped = await graceful(1.0).retire(stop(second))
            # Assert
            assert kept.result is StopResult.UNCONDITIONAL_GRACE_ZERO
            assert stopped.result is StopResult.STOPPED
            assert await answers(first) and await eventually_gone(second)
            assert len(window_lines(caplog)) == 2
            assert "window is open" in window_lines(caplog)[1]


async def eventually_async_idle_zero(address: str) -> bool:
    """Whether the worker at ``address`` reads busy (idle 0) within ``ANSWER_WAIT``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWER_WAIT
    async with WorkerConnection(address) as connection:
        while await connection.idle_time(timeout=ANSWER_WAIT) > 0:
            if loop.time() > deadline:
                return False
            await asyncio.sleep(0.05)
    return True


async def answers(address: str) -> bool:
    """Whether the worker at ``address`` answers its idle RPC, however slowly (up to
    ``ANSWER_WAIT``): a worker a loaded machine starves for a moment is still there."""
    async with WorkerConnection(address) as connection:
        try:
            await connection.idle_time(timeout=ANSWER_WAIT)
        except TransientRpcError:
            return False
    return True


async def eventually_gone(address: str) -> bool:
    """Whether the worker at ``address`` refuses connections (``UNAVAILABLE``) within
    ``ANSWER_WAIT``. A wool worker answers its stop before its server shuts down, so
    a call just after the stop may still be answered, or cut (``CANCELLED``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWER_WAIT
    async with WorkerConnection(address) as connection:
        while loop.time() < deadline:
            try:
                await connection.idle_time(timeout=2.0)
            except RpcError as error:
                if error.code is grpc.StatusCode.UNAVAILABLE:
                    return True
            await asyncio.sleep(0.05)
    return False
