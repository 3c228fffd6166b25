"""``wool-idle worker``, ``idle`` and ``stop`` as real processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO

import grpc
import pytest
from support import tasks
from support.processes import run_cli, spawn_cli
from support.tls import client_flags

from wool_idle.exceptions import WoolError
from wool_idle.proto import IDLE
from wool_idle.worker import WorkerConnection
from wool_idle.worker.leaving import LEAVING_TIME

IN_PROCESS_CALLER = """
import asyncio, os, threading, time
from concurrent.futures import ThreadPoolExecutor
from wool_idle.cli import main
from wool_idle.worker import WorkerConnection

async def stop():
    while not os.path.exists({path!r}):
        await asyncio.sleep(0.05)
    async with WorkerConnection("unix:" + {path!r}) as connection:
        await connection.stop(1.0, timeout=10)

pool = ThreadPoolExecutor(1)  # its thread starts with its first call: in the block
threading.Timer(0.5, lambda: pool.submit(asyncio.run, stop())).start()
main(["worker", "--listen", "unix:" + {path!r}])
time.sleep({wait})
print("went on", flush=True)
raise SystemExit(3)
"""
"""A caller running a worker in-process, then going on past LEAVING_TIME."""


def start_worker(*args: str) -> tuple[object, str]:
    process = spawn_cli(["worker", *args])
    assert process.stdout is not None
    address = process.stdout.readline().strip()
    assert address, process.stderr.read() if process.stderr else ""
    return process, address


async def _admits_tasks(connection: WorkerConnection) -> bool:
    """Whether the worker still runs a task dispatched now (no stop has begun)."""
    try:
        await connection.dispatch(tasks.echo, None)
    except WoolError:
        return False
    return True


def server_mtls_flags(material) -> list[str]:
    return [
        "--listen",
        "localhost:0",
        "--tls-cert",
        material.server.cert,
        "--tls-key",
        material.server.key,
        "--tls-client-ca",
        material.ca,
    ]


class TestWorkerCli:
    def test_worker_idle_then_stop_exits_zero(self) -> None:
        """Given `wool-idle worker` started as a process, when it is polled twice with
        `wool-idle idle` and stopped with `wool-idle stop`, then idle grows and the
        process exits 0."""
        # Arrange
        process, address = start_worker("--listen", "127.0.0.1:0")
        # Act
        first = run_cli(["idle", address])
        time.sleep(0.2)
        second = run_cli(["idle", address])
        stopped = run_cli(["stop", address, "--grace", "5s"])
        status = process.wait(timeout=30)
        # Assert
        assert first.returncode == second.returncode == stopped.returncode == 0
        assert 0 < float(first.stdout) < float(second.stdout)
        assert status == 0

    def test_conditional_stop_refused_then_accepted(self) -> None:
        """Given a fresh worker process, when `wool-idle stop --if-idle-for 1h` then
        `--if-idle-for 0.1s` are run, then the first exits 3 and the worker keeps
        serving, the second stops it."""
        # Arrange
        process, address = start_worker()
        time.sleep(0.2)
        # Act
        refused = run_cli(["stop", address, "--grace", "5s", "--if-idle-for", "1h"])
        still_serving = run_cli(["idle", address])
        accepted = run_cli(["stop", address, "--grace", "5s", "--if-idle-for", "0.1s"])
        status = process.wait(timeout=30)
        # Assert
        assert refused.returncode == 3 and "FAILED_PRECONDITION" in refused.stderr
        assert still_serving.returncode == 0
        assert accepted.returncode == 0 and status == 0

    def test_worker_sigterm_drains_and_exits_zero(self) -> None:
        """Given a worker process, when it gets SIGTERM, then it exits 0."""
        # Arrange
        process, _ = start_worker()
        # Act
        process.terminate()
        # Assert
        assert process.wait(timeout=30) == 0

    async def test_worker_sighup_keeps_serving_and_in_flight_tasks(self, tmp_path: Path) -> None:
        """Given a worker process running a task, when it gets SIGHUP (logrotate, a
        closed terminal), then the task still finishes with its result, the worker
        still answers, and SIGTERM then drains it (exit 0)."""
        # Arrange
        tasks.by_value()
        process, address = start_worker("--grace", "30s")
        gate = str(tmp_path / "gate")
        async with WorkerConnection(address) as connection:
            running = asyncio.ensure_future(connection.dispatch(tasks.gated, gate))
            while await connection.idle_time(timeout=5) != 0.0:  # the task is in flight
                await asyncio.sleep(0.01)
            # Act
            process.send_signal(signal.SIGHUP)
            answered = await connection.idle_time(timeout=5)
            Path(gate).touch()
            result = await running
        process.terminate()
        status = await asyncio.to_thread(process.wait, 30)
        # Assert
        assert (answered, result, status) == (0.0, "ok", 0)

    async def test_worker_sigterm_during_a_longer_drain_drains_for_its_own_grace(
        self, tmp_path: Path
    ) -> None:
        """Given a worker (--grace 1s) draining a task that never ends for a stop whose
        grace has no limit, when it gets SIGTERM (systemd or the kubelet, whose own
        deadline is set for --grace), then the drain ends within --grace from then: the
        task is cancelled (its caller told so) and the worker exits 0. It kept the
        stop's grace, and stayed until the supervisor killed it and its task."""
        # Arrange
        tasks.by_value()
        process, address = start_worker("--grace", "1s")
        gate = str(tmp_path / "gate")  # never created
        async with WorkerConnection(address) as connection:
            running = asyncio.ensure_future(connection.dispatch(tasks.gated, gate))
            while await connection.idle_time(timeout=5) != 0.0:  # the task is in flight
                await asyncio.sleep(0.01)
            stopping = asyncio.ensure_future(connection.stop(-1))
            while await _admits_tasks(connection):  # until the stop has begun the drain
                await asyncio.sleep(0.01)
            # Act
            process.send_signal(signal.SIGTERM)
            try:
                status = await asyncio.to_thread(process.wait, 30)
            finally:
                process.kill()
            outcome = (await asyncio.gather(running, return_exceptions=True))[0]
            await asyncio.gather(stopping, return_exceptions=True)
        # Assert
        assert status == 0
        assert type(outcome).__name__ == "TaskCancelled"

    async def test_worker_exit_escaping_the_loop_exits_70_with_a_log_line(self) -> None:
        """Given a task that makes a signal handler call sys.exit (a callback the
        worker's loop cannot contain), when it runs, then the worker logs that the
        exit ended its loop and exits 70 (a failure: restarted where configured)
        instead of 3 (the task's code) or hanging."""
        # Arrange
        tasks.by_value()
        process, address = start_worker()
        # Act
        async with WorkerConnection(address) as connection:
            with pytest.raises(WoolError):
                await connection.dispatch(tasks.exits_from_signal_handler)
        status = await asyncio.to_thread(process.wait, 30)
        # Assert
        assert status == 70
        assert "SystemExit(3) ended the event loop" in process.stderr.read()

    async def test_worker_task_stopping_the_loop_fails_nothing(self) -> None:
        """Given a task that stops the worker's event loop (loop.stop()), when it runs,
        then the loop runs again: the task returns, the worker answers idle, and a
        later stop ends it with status 0 (it died of a RuntimeError, tasks lost)."""
        # Arrange
        tasks.by_value()
        process, address = start_worker()
        # Act
        async with WorkerConnection(address) as connection:
            result = await connection.dispatch(tasks.stops_the_loop)
            idle = await connection.idle_time(timeout=5)
            await connection.stop(1.0, timeout=15)
        status = await asyncio.to_thread(process.wait, 30)
        # Assert
        assert (result, idle >= 0, status) == ("ok", True, 0)
        assert "a task stopped the event loop" in process.stderr.read()

    async def test_worker_task_stopping_the_loop_at_shutdown_exits_0(self) -> None:
        """Given a task that left a task behind which stops the event loop when it is
        cancelled, when the worker is stopped (shutdown cancels the tasks left), then
        it still exits 0 (it died of a RuntimeError, exit 1: systemd's
        Restart=on-failure brought a retired worker back)."""
        # Arrange
        tasks.by_value()
        process, address = start_worker()
        # Act
        async with WorkerConnection(address) as connection:
            await connection.dispatch(tasks.leaves_a_task_stopping_the_loop_when_cancelled)
            await connection.stop(1.0, timeout=15)
        status = await asyncio.to_thread(process.wait, 30)
        # Assert
        assert status == 0, process.stderr.read()

    @pytest.mark.parametrize("left", ["task", "thread", "own thread"])
    async def test_worker_stopped_leaves_whatever_its_tasks_left(self, left: str) -> None:
        """Given a task that left behind a task ignoring its cancellation, or an hour's
        blocking call on a thread (the loop's or its own), when the worker is stopped,
        then it exits 0 within LEAVING_TIME and logs why (asyncio's clean-up waited
        for the first two without limit, the interpreter's exit for the last: a
        retired worker's process lived on)."""
        # Arrange
        tasks.by_value()
        process, address = start_worker()
        # Act
        async with WorkerConnection(address) as connection:
            await connection.dispatch(tasks.leaves_work_ignoring_its_end, left)
            await connection.stop(1.0, timeout=15)
        status = await asyncio.to_thread(process.wait, LEAVING_TIME + 20)
        # Assert
        assert status == 0
        assert "it leaves without them (status 0)" in process.stderr.read()

    async def test_worker_stopped_leaves_a_task_ignoring_its_cancellation(self) -> None:
        """Given a dispatched task that swallows every cancellation, when the worker
        is stopped with a grace of 0, then the stop returns, the task's caller loses
        its outcome, and the process exits 0 and logs why (the stop waited for the
        task for ever: the retired worker's process never left)."""
        # Arrange
        tasks.by_value()
        process, address = start_worker()
        async with WorkerConnection(address) as connection:
            call = asyncio.ensure_future(connection.dispatch(tasks.ignores_its_cancellation))
            while await connection.idle_time(timeout=5) != 0.0:
                await asyncio.sleep(0.01)
            # Act
            await connection.stop(0.0, timeout=60)
            lost = await asyncio.gather(call, return_exceptions=True)
        status = await asyncio.to_thread(process.wait, LEAVING_TIME + 60)
        # Assert
        assert isinstance(lost[0], WoolError)
        assert status == 0
        assert "stopping without 1 task(s) ignoring their cancellation" in process.stderr.read()

    async def test_worker_interrupted_clean_up_still_leaves(self) -> None:
        """Given a task that left an hour's blocking call on the loop's executor, when
        the worker is stopped by SIGTERM and gets SIGINT during its clean-up, then it
        still exits 0 within LEAVING_TIME (the interrupt left the clean-up's block,
        which disarmed the bound, and the interpreter's exit waited for the thread
        for good)."""
        # Arrange
        tasks.by_value()
        process, address = start_worker()
        async with WorkerConnection(address) as connection:
            await connection.dispatch(tasks.leaves_work_ignoring_its_end, "thread")
        # Act
        process.send_signal(signal.SIGTERM)
        await asyncio.sleep(1.0)
        process.send_signal(signal.SIGINT)
        status = await asyncio.to_thread(process.wait, LEAVING_TIME + 20)
        # Assert
        assert status == 0
        assert "it leaves without them (status 0)" in process.stderr.read()

    def test_worker_called_in_process_leaves_its_caller_going_on(self) -> None:
        """Given ``main(["worker", ...])`` called in-process, stopped from a thread
        pool the caller made before (its thread, started while the worker served,
        stays idle), when the caller goes on past LEAVING_TIME, then its process
        lives on to its own end and status (the bound counted the pool's thread as
        one the worker left and ended the caller's process, status 0)."""
        # Arrange
        directory = tempfile.mkdtemp(prefix="wi-", dir="/tmp")
        caller = IN_PROCESS_CALLER.format(path=f"{directory}/w.sock", wait=LEAVING_TIME + 2)
        # Act
        done = subprocess.run(
            [sys.executable, "-c", caller],
            capture_output=True,
            text=True,
            timeout=LEAVING_TIME + 30,
            stdin=subprocess.DEVNULL,
        )
        shutil.rmtree(directory, ignore_errors=True)
        # Assert
        assert (done.returncode, done.stdout.splitlines()[-1:]) == (3, ["went on"]), done.stderr

    async def test_worker_logs_a_repeated_grpc_error_once(self) -> None:
        """Given a worker, when clients send it idle requests that do not decode, then
        gRPC's error about them is logged once, not once per request (any client
        could flood the log with tracebacks)."""
        # Arrange
        process, address = start_worker()
        # Act
        async with grpc.aio.insecure_channel(address) as channel:
            idle = channel.unary_unary(IDLE, request_serializer=bytes, response_deserializer=bytes)
            for _ in range(5):
                with pytest.raises(grpc.aio.AioRpcError):
                    await idle(b"\xff\xff", timeout=5)
        process.terminate()
        await asyncio.to_thread(process.wait, 30)
        # Assert
        assert process.stderr.read().count("Unexpected [DecodeError]") == 1

    def test_worker_on_unix_socket(self, tmp_path: Path) -> None:
        """Given a worker on a Unix socket, when polled through the CLI, then it answers."""
        # Arrange
        socket = f"unix:/tmp/wool-idle-cli-{time.monotonic_ns()}.sock"
        process, address = start_worker("--listen", socket)
        # Act
        answer = run_cli(["idle", address])
        run_cli(["stop", address, "--grace", "1s"])
        # Assert
        assert address == socket
        assert answer.returncode == 0 and float(answer.stdout) > 0
        assert process.wait(timeout=30) == 0

    def test_worker_with_tls_and_mutual_tls(self, tls_material) -> None:
        """Given a worker requiring client certificates, when polled with and without
        one, then only the client with a certificate gets an answer."""
        # Arrange
        process, address = start_worker(*server_mtls_flags(tls_material))
        exporter = client_flags(tls_material, "exporter")
        # Act
        with_cert = run_cli(["idle", address, *exporter])
        without_cert = run_cli(["idle", address, "--tls-ca", tls_material.ca, "--timeout", "2s"])
        run_cli(["stop", address, "--grace", "1s", *exporter])
        # Assert
        assert with_cert.returncode == 0
        assert without_cert.returncode == 4
        assert process.wait(timeout=30) == 0

    def test_worker_logs_stop_decisions_with_identity(self, tls_material) -> None:
        """Given a worker allowing only `autoscaler` to stop it, when `exporter` tries
        and then `autoscaler` does, then the first exits 5 (PERMISSION_DENIED), the
        worker logs both decisions with the caller's identity, idle and grace, and exits 0."""
        # Arrange
        process, address = start_worker(
            *server_mtls_flags(tls_material), "--allow-stop", "autoscaler"
        )

        def stop_as(identity: str):
            return run_cli(
                ["stop", address, "--grace", "2s", *client_flags(tls_material, identity)]
            )

        # Act
        denied = stop_as("exporter")
        accepted = stop_as("autoscaler")
        status = process.wait(timeout=30)
        log = process.stderr.read()
        # Assert
        assert denied.returncode == 5 and "PERMISSION_DENIED" in denied.stderr
        assert accepted.returncode == 0 and status == 0
        assert "stop refused caller=exporter idle=" in log and "reason=PERMISSION_DENIED" in log
        assert "stop accepted caller=autoscaler idle=" in log and "grace=2.0" in log


@contextlib.asynccontextmanager
async def draining(
    address: str, gate: str, begin: Callable[[WorkerConnection], object]
) -> AsyncIterator[WorkerConnection]:
    """A connection to the worker at ``address``, running a task that waits for the
    file ``gate``, once ``begin(connection)`` has begun the shutdown (the worker
    admits no task any more)."""
    async with WorkerConnection(address) as connection:
        running = asyncio.ensure_future(connection.dispatch(tasks.gated, gate))
        try:
            while await connection.idle_time(timeout=5) != 0.0:  # the task is in flight
                await asyncio.sleep(0.01)
            begin(connection)
            while await _admits_tasks(connection):
                await asyncio.sleep(0.01)
            yield connection
        finally:
            await asyncio.gather(running, return_exceptions=True)


def _read_until(stream: IO[str], text: str) -> bool:
    """Read ``stream`` until a line holds ``text`` (True) or it ends (False)."""
    return any(text in line for line in stream)


class TestWorkerSignalExitCode:
    @pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
    def test_run_worker_signal_exits_with_the_signal_exit_code(self, signum: int) -> None:
        """Given a worker with WOOL_IDLE_SIGNAL_EXIT_CODE=143, when it gets SIGTERM or
        SIGINT (a pod evicted by a node drain, or deleted), then it exits 143, so that
        Kubernetes starts its Job index again rather than count it complete."""
        # Arrange
        process = spawn_cli(["worker"], env={**os.environ, "WOOL_IDLE_SIGNAL_EXIT_CODE": "143"})
        assert process.stdout is not None and process.stdout.readline().strip()
        # Act
        process.send_signal(signum)
        status = process.wait(timeout=30)
        # Assert
        assert status == 143

    def test_run_worker_stop_exits_zero_with_a_signal_exit_code(self) -> None:
        """Given a worker with --signal-exit-code 143, when a stop RPC retires it, then
        it exits 0 (its Job index completes)."""
        # Arrange
        process, address = start_worker("--signal-exit-code", "143")
        # Act
        stopped = run_cli(["stop", address, "--grace", "5s"])
        status = process.wait(timeout=30)
        # Assert
        assert (stopped.returncode, status) == (0, 0)

    async def test_run_worker_signal_during_a_stops_drain_exits_zero(self, tmp_path: Path) -> None:
        """Given a worker with --signal-exit-code 143 draining a task for a stop, when
        it gets SIGTERM (its pod deleted meanwhile), then it exits 0: a stop retired it."""
        # Arrange
        tasks.by_value()
        process, address = start_worker("--signal-exit-code", "143", "--grace", "1s")
        gate = str(tmp_path / "gate")  # never created: the SIGTERM's grace ends the drain
        stopping: list[asyncio.Future[None]] = []
        try:
            async with draining(
                address, gate, lambda c: stopping.append(asyncio.ensure_future(c.stop(-1)))
            ):
                # Act
                process.send_signal(signal.SIGTERM)
                status = await asyncio.to_thread(process.wait, 30)
        finally:
            process.kill()
            await asyncio.gather(*stopping, return_exceptions=True)
        # Assert
        assert status == 0

    async def test_run_worker_stop_during_a_signals_drain_exits_with_the_code(
        self, tmp_path: Path
    ) -> None:
        """Given a worker with --signal-exit-code 143 draining a task for a SIGTERM,
        when a stop RPC comes and is accepted (it joins the drain, its idle condition
        unchecked), then the worker still exits 143: the signal, not a retirement,
        began its shutdown."""
        # Arrange
        tasks.by_value()
        process, address = start_worker("--signal-exit-code", "143", "--grace", "30s")
        assert process.stderr is not None
        gate = tmp_path / "gate"
        stopping: list[asyncio.Future[None]] = []
        try:
            async with draining(
                address, str(gate), lambda _: process.send_signal(signal.SIGTERM)
            ) as connection:
                # Act
                stopping.append(asyncio.ensure_future(connection.stop(30, if_idle_for=3600)))
                accepted = await asyncio.to_thread(_read_until, process.stderr, "stop accepted")
                gate.touch()
                status = await asyncio.to_thread(process.wait, 30)
        finally:
            process.kill()
            await asyncio.gather(*stopping, return_exceptions=True)
        # Assert
        assert (accepted, status) == (True, 143)
