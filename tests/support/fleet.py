"""Real worker processes and a real exporter process for the autoscaler's, end-to-end
and interop tests."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from support import tasks
from support.processes import spawn_cli
from wool_idle.worker import LocalWorker, WorkerConnection


@dataclass
class Fleet:
    """Worker processes, some kept busy with gated tasks."""

    workers: list[LocalWorker] = field(default_factory=list)
    gates: list[Path] = field(default_factory=list)
    running: list[asyncio.Future[object]] = field(default_factory=list)
    connections: list[WorkerConnection] = field(default_factory=list)

    @property
    def addresses(self) -> list[str]:
        return [w.address for w in self.workers]

    async def start(self, count: int) -> list[str]:
        tasks.by_value()
        new = [LocalWorker() for _ in range(count)]
        await asyncio.gather(*(w.start() for w in new))
        self.workers.extend(new)
        return [w.address for w in new]

    async def keep_busy(self, address: str, gate: Path) -> None:
        """Run a task on ``address`` until ``gate`` exists; return once it is tracked."""
        connection = WorkerConnection(address)
        self.connections.append(connection)
        self.gates.append(gate)
        self.running.append(asyncio.ensure_future(connection.dispatch(tasks.gated, str(gate))))
        while await connection.idle_time() != 0.0:
            await asyncio.sleep(0.01)

    def alive(self, address: str) -> bool:
        worker = next(w for w in self.workers if w.address == address)
        assert worker.process is not None
        return worker.process.returncode is None

    async def wait_exit(self, address: str, timeout: float = 30.0) -> int:
        worker = next(w for w in self.workers if w.address == address)
        assert worker.process is not None
        return await asyncio.wait_for(worker.process.wait(), timeout)

    async def close(self) -> None:
        for gate in self.gates:
            gate.touch()
        await asyncio.gather(*self.running, return_exceptions=True)
        for connection in self.connections:
            await connection.close()
        for worker in self.workers:
            await worker.kill()


class ExporterProcess:
    """``wool-idle exporter`` over fixed targets, restartable on the same address.

    Restarted, a TCP exporter binds the port it was given by the kernel the first
    time, which anyone may have taken meanwhile (any process binding port 0 or
    connecting from an ephemeral port): a test that restarts one listens on a Unix
    socket (``listen="unix:/path"``), whose path no one else takes.
    """

    def __init__(self, targets: Sequence[str], listen: str = "127.0.0.1:0") -> None:
        self.targets = list(targets)
        self.listen = listen
        self.url = ""
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> str:
        args = ["exporter", "--listen", self.listen, "--timeout", "2s"]
        for target in self.targets:
            args += ["--target", target]
        self.process = spawn_cli(args)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        assert self.url, self.process.stderr.read() if self.process.stderr else ""
        if self.url.startswith("http://"):  # the port bound, to bind again on restart
            self.listen = self.url.removeprefix("http://").removesuffix("/metrics")
        return self.url

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
