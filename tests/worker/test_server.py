"""The worker's gRPC server: binding, and why it could not."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest

from wool_idle.worker.server import WorkerServer
from wool_idle.worker.service import WorkerService


class TestWorkerServer:
    async def test_start_on_a_tcp_port_in_use_names_the_address_and_reason(self) -> None:
        """Given a TCP port another socket listens on, when a worker server starts on
        it, then OSError EADDRINUSE naming the address (gRPC's own error says only
        "Failed to bind", and the worker logged that), and the other socket still
        listens."""
        # Arrange
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            address = f"127.0.0.1:{taken.getsockname()[1]}"
            server = WorkerServer(address, WorkerService())
            # Act
            with pytest.raises(OSError) as refused:
                await server.start()
            # Assert
            assert refused.value.errno == errno.EADDRINUSE
            assert address in str(refused.value) and "in use" in str(refused.value)
            with socket.create_connection(taken.getsockname(), timeout=5):
                pass

    async def test_start_on_a_unix_path_that_cannot_be_bound_names_the_address_and_reason(
        self, tmp_path: Path
    ) -> None:
        """Given a Unix socket path whose directory is missing (as one read-only or
        out of inodes, the path cannot be bound), when a worker server starts on it,
        then OSError naming the address and the system's reason (it raised a
        ValueError from reading the path as host:port, a traceback)."""
        # Arrange
        address = f"unix:{tmp_path}/missing/w.sock"
        server = WorkerServer(address, WorkerService())
        # Act
        with pytest.raises(OSError) as refused:
            await server.start()
        # Assert
        assert refused.value.errno == errno.ENOENT
        assert address in str(refused.value)
