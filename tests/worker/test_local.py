"""Worker, LocalWorker: real worker subprocesses."""

from __future__ import annotations

import asyncio
import os
import warnings
from pathlib import Path

import grpc
import pytest
from support import tasks
from support.tls import TlsMaterial

from wool_idle.exceptions import RpcError
from wool_idle.worker import ClientTls, LocalWorker, WorkerConnection
from wool_idle.worker.channels import ChannelKey, pool
from wool_idle.worker.process import kill_and_reap


class TestWorker:
    async def test_stop_deprecated_timeout_forwards_as_grace(self, tmp_path: Path) -> None:
        """Given a started worker, when stop is called with the deprecated timeout
        keyword, then it emits a DeprecationWarning and the worker receives the value
        as its grace (its own log says so) and exits."""
        # Arrange
        log_path = tmp_path / "worker.log"
        with log_path.open("wb") as log_file:
            worker = LocalWorker(log_file=log_file)
            await worker.start()
            # Act
            with pytest.warns(DeprecationWarning, match="grace"):
                await worker.stop(timeout=7.0)
        # Assert
        assert worker.process is not None and worker.process.returncode == 0
        assert "stop accepted" in log_path.read_text()
        assert "grace=7.0" in log_path.read_text()

    async def test_stop_with_grace_does_not_warn(self) -> None:
        """Given a started worker, when stop is called with grace, then no warning is
        emitted and the process exits 0."""
        # Arrange
        worker = LocalWorker()
        await worker.start()
        # Act
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            await worker.stop(grace=1.0)
        # Assert
        assert worker.process is not None and worker.process.returncode == 0

    async def test_stop_rejects_grace_and_timeout_together(self) -> None:
        """Given a worker, when stop gets both grace and timeout, then TypeError."""
        # Arrange
        worker = LocalWorker()
        # Act / Assert
        with pytest.raises(TypeError, match="deprecated alias"):
            await worker.stop(1.0, timeout=2.0)


class TestLocalWorker:
    async def test_stop_rpc_error_propagates_and_channel_released(
        self, tls_material: TlsMaterial
    ) -> None:
        """Given a started worker whose stop RPC raises (the caller may not stop it),
        when stop is awaited, then the error propagates and the pooled channel is
        still released."""
        # Arrange
        files = tls_material.clients["caller"]
        tls = ClientTls(ca_file=tls_material.ca, cert_file=files.cert, key_file=files.key)
        server_flags = ["--tls-cert", tls_material.server.cert, "--tls-key"]
        server_flags += [tls_material.server.key, "--tls-client-ca", tls_material.ca]
        worker = LocalWorker(
            "localhost:0", extra_args=[*server_flags, "--allow-stop", "autoscaler"], tls=tls
        )
        address = await worker.start()
        try:
            # Act
            with pytest.raises(RpcError) as raised:
                await worker.stop(grace=1.0)
        finally:
            await worker.kill()
        # Assert
        assert raised.value.code is grpc.StatusCode.PERMISSION_DENIED
        assert pool().users(ChannelKey(address, tls)) == 0

    async def test_stop_after_process_exited_sends_nothing(self, tmp_path: Path) -> None:
        """Given a worker whose process was killed and another worker now serving its
        Unix socket, when the first is stopped, then stop returns and the other worker
        keeps serving (the stop went to whoever served the address: it stopped the
        other worker)."""
        # Arrange
        listen = f"unix:/tmp/wool-idle-{os.getpid()}-{abs(hash(tmp_path)) % 10**8}.sock"
        first, other = LocalWorker(listen), LocalWorker(listen)
        await first.start()
        await first.kill()
        await other.start()
        try:
            # Act
            await first.stop(grace=1.0)
            async with WorkerConnection(other.address) as connection:
                idle = await connection.idle_time(timeout=10)
        finally:
            await other.kill()
        # Assert
        assert idle >= 0.0

    async def test_stop_twice_returns(self) -> None:
        """Given a worker stopped once, when it is stopped again, then stop returns (it
        raised TransientRpcError, unreachable, for a worker that had exited)."""
        # Arrange
        worker = LocalWorker()
        await worker.start()
        await worker.stop(grace=1.0)
        # Act
        await worker.stop(grace=1.0)
        # Assert
        assert worker.process is not None and worker.process.returncode == 0

    async def test_start_serves_on_printed_address(self) -> None:
        """Given a LocalWorker, when started, then the printed address answers idle."""
        # Arrange
        worker = LocalWorker()
        # Act
        address = await worker.start()
        async with WorkerConnection(address) as connection:
            idle = await connection.idle_time()
        await worker.stop(grace=1.0)
        # Assert
        assert idle > 0.0

    async def test_task_writing_a_lot_on_stdout_runs(self) -> None:
        """Given a LocalWorker, when a task writes 1 MiB on stdout, then it returns
        and the worker still answers idle (its stdout was a pipe nobody read once
        the address line was: the write blocked the worker's event loop for good,
        and even ``kill`` never returned, waiting for the pipe's end)."""
        # Arrange
        tasks.by_value()
        worker = LocalWorker()
        address = await worker.start()
        connection = WorkerConnection(address)
        call = asyncio.ensure_future(connection.dispatch(tasks.prints, 2**20))
        try:
            # Act
            await asyncio.wait([call], timeout=60)
            answered = call.done() and await connection.idle_time(timeout=10) >= 0.0
        finally:
            await worker.kill()  # first: a call to a blocked worker never ends
            await asyncio.gather(call, return_exceptions=True)
            await connection.close()
        # Assert
        assert answered
        assert call.result() == 2**20

    async def test_start_twice_raises_and_first_worker_stops(self) -> None:
        """Given a started LocalWorker, when start is called again, then RuntimeError
        and stop still stops the first process (a second start spawned a second
        worker in its place: the first ran on, with no one to stop it)."""
        # Arrange
        worker = LocalWorker()
        await worker.start()
        first = worker.process
        try:
            # Act
            with pytest.raises(RuntimeError, match="started already"):
                await worker.start()
            await worker.stop(grace=1.0)
        finally:
            assert first is not None
            await kill_and_reap(first)
            await worker.kill()
        # Assert
        assert worker.process is first
        assert first.returncode == 0

    async def test_start_while_starting_raises(self) -> None:
        """Given a LocalWorker whose start is under way, when start is called again,
        then RuntimeError and one process serves."""
        # Arrange
        worker = LocalWorker()
        starting = asyncio.ensure_future(worker.start())
        await asyncio.sleep(0)
        try:
            # Act
            with pytest.raises(RuntimeError, match="started already"):
                await worker.start()
            address = await starting
        finally:
            await asyncio.gather(starting, return_exceptions=True)
            await worker.kill()
        # Assert
        assert address == worker.address

    @pytest.mark.parametrize("started", [False, True])
    async def test_stop_before_start_returned_raises_runtime_error(self, started: bool) -> None:
        """Given a LocalWorker not started, or whose start is under way, when stop is
        awaited, then RuntimeError saying it is not started (it was a ValueError
        about the invalid address '')."""
        # Arrange
        worker = LocalWorker()
        starting = asyncio.ensure_future(worker.start() if started else asyncio.sleep(0))
        await asyncio.sleep(0)
        try:
            # Act / Assert
            with pytest.raises(RuntimeError, match="not started"):
                await worker.stop(grace=1.0)
        finally:
            await asyncio.gather(starting, return_exceptions=True)
            await worker.kill()
