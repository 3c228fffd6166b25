"""Start a ``wool-idle`` subcommand as a child process and wait until it is ready.

Every long-running ``wool-idle`` subcommand prints one line on stdout once it
serves (a worker its address, the exporter and autoscaler their URL). A child
that exits, stays silent past the timeout, or whose caller is cancelled while
waiting is killed and reaped: no half-started process is left behind.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Final

READY_TIMEOUT: Final = 30.0
"""Seconds a child gets to print its ready line."""


@dataclass(frozen=True)
class ReadyProcess:
    """A child that printed its ready line, and that line (stripped)."""

    process: asyncio.subprocess.Process
    line: str


async def spawn_ready(
    args: Sequence[str],
    *,
    timeout: float = READY_TIMEOUT,
    stderr: IO[bytes] | None = None,
    env: Mapping[str, str] | None = None,
    new_session: bool = False,
    module: str = "wool_idle",
) -> ReadyProcess:
    """Run ``wool-idle ARGS`` (this interpreter) and return once it printed a line.

    ``stderr`` receives the child's log (discarded by default); ``env`` is added
    to this process's environment; ``new_session`` detaches the child from the
    terminal's signals (it then leads a process group of its own); ``module``
    runs ``python -m MODULE ARGS`` instead. Raises ``TimeoutError`` if no line
    comes within ``timeout`` seconds and ``RuntimeError`` if the child exits
    first; in both cases, and on cancellation, the child is killed and reaped.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr if stderr is not None else asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=new_session,
    )
    assert process.stdout is not None
    command = "wool-idle" if module == "wool_idle" else module
    name = f"{command} {args[0]}" if args else command
    try:
        try:
            line = await asyncio.wait_for(process.stdout.readline(), timeout)
        except TimeoutError:
            raise TimeoutError(f"{name} printed nothing within {timeout}s") from None
        if not line:
            code = await process.wait()
            raise RuntimeError(f"{name} exited with status {code} before it was ready")
    except BaseException:
        await kill_and_reap(process)
        raise
    return ReadyProcess(process, line.decode(errors="replace").strip())


async def kill_and_reap(process: asyncio.subprocess.Process) -> None:
    """Kill ``process`` at once unless it has exited, and reap it."""
    if process.returncode is None:
        process.kill()
    await process.wait()
