"""spawn_ready: a wool-idle child process and its ready line, or no child at all."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from support.processes import processes_with_marker

from wool_idle.worker import WorkerConnection
from wool_idle.worker.process import spawn_ready


class TestSpawnReady:
    async def test_spawn_ready_returns_process_and_line(self) -> None:
        """Given `wool-idle worker`, when spawned, then the returned line is the
        address it serves on and the process runs."""
        # Act
        ready = await spawn_ready(["worker", "--listen", "127.0.0.1:0"])
        async with WorkerConnection(ready.line) as connection:
            idle = await connection.idle_time(timeout=5)
            await connection.stop(1.0, timeout=15)
        status = await ready.process.wait()
        # Assert
        assert idle > 0.0
        assert status == 0

    async def test_spawn_ready_child_exits_first(self, tmp_path: Path) -> None:
        """Given a subcommand that exits at once (a bad flag), when spawned, then
        RuntimeError names it and its status, and its stderr went where asked."""
        # Arrange
        log = tmp_path / "child.log"
        # Act
        with log.open("wb") as stderr, pytest.raises(RuntimeError) as raised:
            await spawn_ready(["worker", "--listen", "not an address"], stderr=stderr)
        # Assert
        assert "wool-idle worker exited with status 2 before it was ready" in str(raised.value)
        assert "--listen" in log.read_text()

    async def test_spawn_ready_silent_child_is_killed(self) -> None:
        """Given a child that prints nothing within the timeout, when spawned, then
        TimeoutError is raised and the child is killed and reaped."""
        # Arrange
        # Not a WOOL_IDLE_* name: the CLI refuses those no subcommand reads.
        name, value = "WOOLIDLE_SPAWN_TEST", uuid.uuid4().hex
        # Act
        with pytest.raises(TimeoutError, match="printed nothing"):
            await spawn_ready(["worker"], timeout=0.001, env={name: value})
        # Assert
        assert processes_with_marker(f"{name}={value}") == []
