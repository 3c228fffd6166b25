"""Running ``wool-idle`` subcommands as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

COMMAND = (sys.executable, "-m", "wool_idle")


def run_cli(
    args: Sequence[str], *, timeout: float = 60.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``wool-idle ARGS`` to completion and capture its output."""
    return subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def run_python(script: str, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``args`` in a fresh interpreter to completion (one that hangs
    is killed after ``timeout``: ``TimeoutExpired``) and capture its output."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def spawn_cli(args: Sequence[str], **kwargs: object) -> subprocess.Popen[str]:
    """Start ``wool-idle ARGS`` in the background with piped stdout and stderr."""
    return subprocess.Popen(
        [*COMMAND, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        **kwargs,  # type: ignore[call-overload]
    )


def processes_with_marker(marker: str) -> list[int]:
    """PIDs of live processes whose environment carries ``marker`` (``NAME=value``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found
