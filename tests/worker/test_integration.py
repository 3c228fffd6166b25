"""Idle reporting and the control surface end to end, over every transport."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import pytest
from support import tasks

from wool_idle.exceptions import (
    DispatchRejected,
    IdleUnavailable,
    RpcError,
    TaskAborted,
    TransientRpcError,
)
from wool_idle.worker import LocalWorker, WorkerConnection


class TestWorkerIdleReporting:
    async def test_idle_accrues_from_startup(self, start_server, transport) -> None:
        """Given a freshly started real worker over each transport, when idle_time is
        polled twice with a wait, then both readings are positive and non-decreasing,
        and the second grew by at least the time between the two polls (the first poll
        did not restart the count: polling never enters the in-flight set)."""
        # Arrange
        server = await start_server(transport.listen, tls=transport.server_tls)
        await asyncio.sleep(0.05)
        # Act
        async with WorkerConnection(server.address, tls=transport.client_tls) as connection:
            first = await connection.idle_time(timeout=5.0)
            answered = time.monotonic()
            await asyncio.sleep(0.1)
            between = time.monotonic() - answered
            second = await connection.idle_time(timeout=5.0)
        # Assert
        assert 0.0 < first <= second
        assert second - first >= between

    async def test_idle_zero_while_busy(self, start_server, transport, tmp_path: Path) -> None:
        """Given a real worker with one in-flight routine, when idle_time is polled,
        then it reports zero while the in-flight set is non-empty."""
        # Arrange
        server = await start_server(transport.listen, tls=transport.server_tls)
        gate = tmp_path / "gate"
        async with WorkerConnection(server.address, tls=transport.client_tls) as connection:
            running = asyncio.ensure_future(connection.dispatch(tasks.gated, str(gate)))
            while not len(server.service.in_flight):
                await asyncio.sleep(0.005)
            # Act
            readings = [await connection.idle_time() for _ in range(3)]
            gate.touch()
            await running
        # Assert
        assert readings == [0.0, 0.0, 0.0]

    async def test_idle_unavailable_for_legacy_servicer(self, scripted) -> None:
        """Given a servicer without the idle RPC, when idle_time is polled over a real
        channel, then it raises IdleUnavailable, not RpcError."""
        # Arrange
        legacy = await scripted(with_idle=False)
        # Act
        async with WorkerConnection(legacy.address) as connection:
            with pytest.raises(IdleUnavailable) as raised:
                await connection.idle_time()
        # Assert
        assert not isinstance(raised.value, RpcError)


class TestWorkerControlSurface:
    async def test_poll_then_retire(self) -> None:
        """Given an idle real worker process, when the caller polls idle, stops it,
        then polls again, then the stop terminates the process (exit 0) and the later
        poll raises TransientRpcError."""
        # Arrange
        worker = LocalWorker()
        address = await worker.start()
        connection = WorkerConnection(address)
        # Act
        idle = await connection.idle_time()
        await connection.stop(grace=5.0)
        assert worker.process is not None
        status = await asyncio.wait_for(worker.process.wait(), 15)
        with pytest.raises(TransientRpcError):
            await connection.idle_time(timeout=2.0)
        await connection.close()
        # Assert
        assert idle > 0.0
        assert status == 0

    async def test_dispatch_to_process_worker(self, tmp_path: Path) -> None:
        """Given a worker process, when a task defined in the tests is dispatched, then
        it runs there and its result comes back."""
        # Arrange
        tasks.by_value()
        worker = LocalWorker()
        address = await worker.start()
        # Act
        async with WorkerConnection(address) as connection:
            result = await connection.dispatch(tasks.sleep_for, 0.01)
        await worker.stop(grace=1.0)
        # Assert
        assert result == 0.01


class TestTaskIsolation:
    @pytest.mark.parametrize(
        ("how", "raised"),
        [
            ("sys_exit", SystemExit),
            ("system_exit", SystemExit),
            ("keyboard_interrupt", KeyboardInterrupt),
            ("unusual", tasks.Unusual),
        ],
    )
    async def test_dispatch_process_exit_fails_only_its_task(
        self, tmp_path: Path, how: str, raised: type[BaseException]
    ) -> None:
        """Given a worker process running a gated task, when a second task calls
        sys.exit or raises SystemExit, KeyboardInterrupt or another BaseException,
        then only that task fails (TaskAborted carrying its exception), the gated
        task still completes, idle keeps answering and the worker stays up until
        it is stopped."""
        # Arrange
        tasks.by_value()
        worker = LocalWorker()
        address = await worker.start()
        gate = tmp_path / "gate"
        try:
            async with WorkerConnection(address) as connection:
                running = asyncio.ensure_future(connection.dispatch(tasks.gated, str(gate)))
                while await connection.idle_time() != 0.0:
                    await asyncio.sleep(0.01)
                # Act
                with pytest.raises(TaskAborted) as aborted:
                    await connection.dispatch(tasks.exits, how)
                gate.touch()
                other = await running
                idle = await connection.idle_time(timeout=5)
                assert worker.process is not None
                still_running = worker.process.returncode is None
            await worker.stop(grace=5.0)
        finally:
            await worker.kill()
        # Assert
        assert type(aborted.value.exception) is raised
        assert other == "ok"
        assert idle >= 0.0 and still_running
        assert worker.process.returncode == 0


@pytest.fixture
async def busy_worker(tmp_path: Path) -> AsyncIterator[tuple[LocalWorker, WorkerConnection, Path]]:
    """A worker process with a gated task in flight (the witness), and a connection."""
    tasks.by_value()
    worker = LocalWorker()
    address = await worker.start()
    try:
        async with WorkerConnection(address) as connection:
            yield worker, connection, tmp_path / "gate"
        await worker.stop(grace=5.0)
    finally:
        await worker.kill()


async def witness_survives(
    worker: LocalWorker, connection: WorkerConnection, gate: Path, act: Awaitable[object]
) -> tuple[object, bool]:
    """Run ``act`` while a gated witness task is in flight; return what ``act`` gave
    (or the exception it raised) and whether the witness then completed, the worker
    still answering and running."""
    witness = asyncio.ensure_future(connection.dispatch(tasks.gated, str(gate)))
    while await connection.idle_time(timeout=5) != 0.0:
        await asyncio.sleep(0.01)
    try:
        outcome: object = await act
    except Exception as error:
        outcome = error
    gate.touch()
    survived = await witness == "ok" and await connection.idle_time(timeout=5) >= 0.0
    assert worker.process is not None
    return outcome, survived and worker.process.returncode is None


class TestTaskIsolationOfPickling:
    @pytest.mark.parametrize(
        ("how", "raised"), [("system_exit", SystemExit), ("keyboard_interrupt", KeyboardInterrupt)]
    )
    async def test_dispatch_result_exiting_when_pickled_fails_only_its_task(
        self, busy_worker, how: str, raised: type[BaseException]
    ) -> None:
        """Given a task whose result raises SystemExit or KeyboardInterrupt while the
        worker pickles it, then that task fails with it (TaskAborted), and the worker
        and its other task carry on."""
        # Arrange
        worker, connection, gate = busy_worker
        dispatch = connection.dispatch(tasks.returns_exit_when_pickled, how)
        # Act
        outcome, survived = await witness_survives(worker, connection, gate, dispatch)
        # Assert
        assert isinstance(outcome, TaskAborted) and type(outcome.exception) is raised
        assert survived

    async def test_dispatch_exception_exiting_when_pickled_fails_only_its_task(
        self, busy_worker
    ) -> None:
        """Given a task raising an exception that raises SystemExit while the worker
        pickles it, then the caller gets a RuntimeError describing it, and the worker
        and its other task carry on."""
        # Arrange
        worker, connection, gate = busy_worker
        # Act
        outcome, survived = await witness_survives(
            worker, connection, gate, connection.dispatch(tasks.raises_error_exiting_when_pickled)
        )
        # Assert
        assert isinstance(outcome, RuntimeError) and "ErrorExitingWhenPickled" in str(outcome)
        assert survived

    async def test_dispatch_argument_exiting_when_unpickled_is_rejected(self, busy_worker) -> None:
        """Given an argument that calls sys.exit while the worker unpickles it, then
        the task is rejected (DispatchRejected, not a TransientRpcError: a retry
        elsewhere would do the same), and the worker and its other task carry on."""
        # Arrange
        worker, connection, gate = busy_worker
        # Act
        outcome, survived = await witness_survives(
            worker, connection, gate, connection.dispatch(tasks.returns, tasks.ExitWhenUnpickled())
        )
        # Assert
        assert isinstance(outcome, DispatchRejected) and "SystemExit(5)" in str(outcome)
        assert survived

    async def test_dispatch_return_exiting_when_type_checked_is_rejected(self, busy_worker) -> None:
        """Given a callable posing as a coroutine function whose return value calls
        sys.exit when the worker checks whether it is a coroutine, then the task is
        rejected (DispatchRejected; the call hung, never answered), and the worker and
        its other task carry on."""
        # Arrange
        worker, connection, gate = busy_worker
        dispatch = connection.dispatch(tasks.PosingAsCoroutineFunction())  # type: ignore[arg-type]
        # Act
        outcome, survived = await witness_survives(
            worker, connection, gate, asyncio.wait_for(dispatch, 10)
        )
        # Assert
        assert isinstance(outcome, DispatchRejected) and "SystemExit(4)" in str(outcome)
        assert survived

    @pytest.mark.parametrize(
        ("task", "described"),
        [
            (tasks.raises_error_exiting_on_type_check, "ErrorExitingOnTypeCheck"),
            (tasks.raises_error_named_by_exit, "ErrorNamedByExit object"),
        ],
        ids=["type_check_exits", "name_and_repr_exit"],
    )
    async def test_dispatch_exception_whose_description_exits_is_answered(
        self, busy_worker, task, described: str
    ) -> None:
        """Given a task raising an exception whose type check (its __class__) calls
        sys.exit, or whose repr and whose type's name (a metaclass's) do, so that
        pickling and describing it exit, then the caller gets a RuntimeError
        describing it (the call hung after the Ack, never answered), and the worker
        and its other task carry on."""
        # Arrange
        worker, connection, gate = busy_worker
        dispatch = connection.dispatch(task)
        # Act
        outcome, survived = await witness_survives(
            worker, connection, gate, asyncio.wait_for(dispatch, 10)
        )
        # Assert
        assert isinstance(outcome, RuntimeError) and described in str(outcome)
        assert survived


class TestTaskIsolationBeyondTheTask:
    @pytest.mark.parametrize("how", ["inner_task", "call_soon", "call_later", "done_callback"])
    async def test_dispatch_exit_beside_the_task_ends_only_that(
        self, busy_worker, how: str
    ) -> None:
        """Given a task that starts a task calling sys.exit, or schedules a callback
        (call_soon, call_later, a done callback) raising SystemExit or
        KeyboardInterrupt, then only that inner task or callback ends: the task
        returns, and the worker and its other task carry on."""
        # Arrange
        worker, connection, gate = busy_worker
        # Act
        outcome, survived = await witness_survives(
            worker, connection, gate, connection.dispatch(tasks.exits_beside, how)
        )
        # Assert
        assert (outcome, survived) == (how, True)

    async def test_dispatch_exit_beside_described_by_exiting_text_ends_only_that(
        self, busy_worker
    ) -> None:
        """Given a task scheduling a callback raising a SystemExit whose repr is a str
        subclass that calls sys.exit when formatted, then only that callback ends: the
        task returns, and the worker and its other task carry on (logging the contained
        exit ended the worker's event loop, exit 70)."""
        # Arrange
        worker, connection, gate = busy_worker
        dispatch = connection.dispatch(tasks.exits_beside_described_by_exiting_text)
        # Act
        outcome, survived = await witness_survives(worker, connection, gate, dispatch)
        # Assert
        assert (outcome, survived) == ("ok", True)
