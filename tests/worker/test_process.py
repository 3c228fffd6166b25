"""spawn_ready: a wool-idle child process and its ready line, or no child at all."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from wool_idle.worker import WorkerConnection
from wool_idle.worker.process import spawn_ready


def children_mentioning(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (a zombie's is empty)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


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
        marker = f"/tmp/wool-idle-ready-{uuid.uuid4().hex}.sock"
        # Act
        with pytest.raises(TimeoutError, match="printed nothing"):
            await spawn_ready(["worker", "--listen", f"unix:{marker}"], timeout=0.001)
        # Assert
        assert children_mentioning(marker) == []

    async def test_spawn_ready_cancelled_caller_kills_child(self) -> None:
        """Given a spawn in progress, when the caller is cancelled, then the child is
        killed and reaped as well."""
        # Arrange
        marker = f"/tmp/wool-idle-ready-{uuid.uuid4().hex}.sock"
        spawning = asyncio.ensure_future(
            spawn_ready(["worker", "--listen", f"unix:{marker}"], timeout=60)
        )
        while not children_mentioning(marker):
            await asyncio.sleep(0.001)
        # Act
        spawning.cancel()
        with pytest.raises(asyncio.CancelledError):
            await spawning
        # Assert
        assert children_mentioning(marker) == []
