"""The demo's processes: a real wool fleet and the two daemons that follow it.

Every child is started with ``spawn_ready`` in a session (so a process group)
of its own: Ctrl-C reaches the demo only, which stops the children itself,
newest first (the client, the autoscaler, the exporter, the pools, and last
the namespace holder, which must outlive every pool). A child's process group
holds what it started (a pool's wool workers, multiprocessing's resource
tracker), so an empty group means the child left nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from wool_idle.demo.settings import COLD, HOT
from wool_idle.discovery.local import segment_name
from wool_idle.discovery.namespace_files import notify_path
from wool_idle.worker.process import kill_and_reap, spawn_ready

POOLS: Final = "wool_idle.demo.pools"
"""The module that runs the wool roles (``hold``, ``serve``, ``client``)."""
STOP_TIMEOUT: Final = 20.0
"""Seconds a child gets to exit after SIGTERM (a pool's wool shutdown takes up to 10)."""
CLIENT: Final = "client"
"""The wool client's name among the children."""
GROUP_EXIT_TIMEOUT: Final = 5.0
"""Seconds a child's process group gets to empty once the child exited."""


@dataclass(frozen=True)
class Child:
    """A process the demo started, by the name the demo gives it."""

    name: str
    process: asyncio.subprocess.Process


@dataclass
class ClientCounts:
    """A wool client's task counts, as it last printed them."""

    submitted: int = 0
    completed: int = 0
    failed: int = 0

    def read(self, line: bytes) -> None:
        """Take the counts from one of the client's JSON lines; ignore other lines."""
        with contextlib.suppress(ValueError, TypeError, KeyError):
            counts = json.loads(line)
            self.submitted, self.completed, self.failed = (
                int(counts["submitted"]),
                int(counts["completed"]),
                int(counts["failed"]),
            )


@dataclass
class Processes:
    """The children of one demo run, their logs in ``log_dir``."""

    namespace: str
    log_dir: Path
    children: list[Child] = field(default_factory=list)
    client: ClientCounts | None = None
    _logs: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _reader: asyncio.Task[None] | None = None

    async def start(self, name: str, args: Sequence[str], *, module: str = "wool_idle") -> str:
        """Start ``python -m MODULE ARGS`` as ``name``; its ready line."""
        log = self._logs.enter_context((self.log_dir / f"{name}.log").open("wb"))
        ready = await spawn_ready(args, stderr=log, new_session=True, module=module)
        self.children.append(Child(name, ready.process))
        return ready.line

    async def start_wool(self, hot: int, cold: int) -> None:
        """The namespace holder, then a pool per tag."""
        await self.start("holder", ["hold", self.namespace], module=POOLS)
        for tag, workers in ((HOT, hot), (COLD, cold)):
            options = ["--tag", tag, "--workers", str(workers)]
            await self.start(f"{tag} pool", ["serve", self.namespace, *options], module=POOLS)

    async def start_client(self, tag: str, *, interval: float, task_seconds: float) -> None:
        """A wool client dispatching to ``tag`` until stopped; ``client`` follows its counts."""
        options = ["--tag", tag, "--seconds", "0", "--progress"]
        options += ["--interval", str(interval), "--task-seconds", str(task_seconds)]
        await self.start(CLIENT, ["client", self.namespace, *options], module=POOLS)
        self.client = ClientCounts()
        self._reader = asyncio.create_task(self._read_counts(self.children[-1].process))

    async def _read_counts(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None and self.client is not None
        async for line in process.stdout:
            self.client.read(line)

    async def stop(self) -> list[str]:
        """Stop every child, newest first; the names of those that left a process
        behind (killed then). The namespace's files in the temp directory go too."""
        for child in reversed(self.children):
            await _terminate(child.process)
            if child.name == CLIENT and self._reader is not None:
                await self._reader  # its final counts: read up to the end of its output
        left = [child.name for child in self.children if not await _group_gone(child.process)]
        for child in self.children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.process.pid, signal.SIGKILL)
        self._logs.close()
        remove_namespace_files(self.namespace)
        return left


def remove_namespace_files(namespace: str) -> None:
    """Remove the notify directory and the lock file wool leaves in the temp directory
    for ``namespace`` (once nobody uses it)."""
    directory = notify_path(namespace).parent
    shutil.rmtree(directory, ignore_errors=True)
    (directory.parent / f"wool-lock-{segment_name(namespace)}").unlink(missing_ok=True)


async def _terminate(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL after ``STOP_TIMEOUT``; reaped either way."""
    if process.returncode is None:
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
    except TimeoutError:
        await kill_and_reap(process)


async def _group_gone(process: asyncio.subprocess.Process) -> bool:
    """Whether the process group ``process`` leads is empty (within a short wait)."""
    deadline = asyncio.get_running_loop().time() + GROUP_EXIT_TIMEOUT
    while True:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # a member we may not signal is a member still
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.1)
