"""Real wool 0.15 pools for end-to-end tests: a namespace holder, tagged pools
and tag-filtered clients, each a process of ``wool_idle.demo.pools``.

Use ``WoolFleet`` as an async context manager: every process it started is
stopped (SIGTERM, then SIGKILL) and the namespace's leftovers in /tmp removed
when it exits, also when the test failed half-way.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from dataclasses import dataclass, field

from wool_idle.demo.fleet import remove_namespace_files

STOP_TIMEOUT = 20.0
READY_TIMEOUT = 60.0


def unique_namespace(prefix: str = "e2e") -> str:
    """A namespace no other test (or earlier run) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class WoolFleet:
    """Processes of one namespace; ``lan`` (an IP) puts pools and clients on
    ``LanDiscovery`` restricted to that interface instead of ``LocalDiscovery``."""

    namespace: str = field(default_factory=unique_namespace)
    lan: str | None = None
    processes: list[asyncio.subprocess.Process] = field(default_factory=list)

    async def __aenter__(self) -> WoolFleet:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _start(self, role: str, *options: str) -> asyncio.subprocess.Process:
        lan = ("--lan", self.lan) if self.lan else ()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "wool_idle.demo.pools",
            role,
            self.namespace,
            *lan,
            *options,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            stdin=asyncio.subprocess.DEVNULL,
        )
        self.processes.append(process)
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT)
        if not line:
            raise RuntimeError(f"wool {role} on {self.namespace} exited before it was ready")
        return process

    async def hold(self) -> asyncio.subprocess.Process:
        """Own the LocalDiscovery namespace (start it first, it goes last)."""
        return await self._start("hold")

    async def serve(
        self, tag: str, workers: int, *, host: str = "127.0.0.1"
    ) -> asyncio.subprocess.Process:
        """A pool of ``workers`` wool workers tagged ``tag``, bound on ``host``, published
        on the namespace."""
        return await self._start("serve", "--tag", tag, "--workers", str(workers), "--host", host)

    async def client(
        self, tag: str, *, seconds: float, interval: float = 0.25, task_seconds: float = 0.0
    ) -> asyncio.subprocess.Process:
        """A wool client dispatching to ``tag`` workers; read its counts with ``counts``."""
        return await self._start(
            "client",
            "--tag",
            tag,
            "--seconds",
            str(seconds),
            "--interval",
            str(interval),
            "--task-seconds",
            str(task_seconds),
        )

    @staticmethod
    async def counts(client: asyncio.subprocess.Process) -> dict[str, int]:
        """Wait for a client to finish and return its submitted/completed/failed counts."""
        assert client.stdout is not None
        output, _ = await client.communicate()
        counts: dict[str, int] = json.loads(output.decode().strip().splitlines()[-1])
        return counts

    async def close(self) -> None:
        """Stop every process, newest first (pools before the holder); clean /tmp."""
        for process in reversed(self.processes):
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
                except TimeoutError:
                    process.kill()
                    await process.wait()
        self.processes.clear()
        remove_namespace_files(self.namespace)
