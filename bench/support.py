"""Shared bench plumbing: child processes, their CPU and memory, timing stats."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def machine() -> str:
    """One line: cores, Python, grpcio."""
    return (
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"grpcio {version('grpcio')}, protobuf {version('protobuf')}"
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mib(pid: int) -> float:
    """Peak resident set size of ``pid`` in MiB."""
    return _status_mib(pid, "VmHWM:")


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` now, in MiB."""
    return _status_mib(pid, "VmRSS:")


def _status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return float("nan")


class Child:
    """A Python child process speaking one JSON line per request on stdin/stdout."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=None if env is None else dict(env),
        )
        self.first = self.read()

    def read(self) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.process.args!r} exited")
        return json.loads(line) if line.startswith("{") else line.strip()

    def ask(self, text: str = "") -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        return self.read()

    def finish(self) -> Any:
        """Close stdin (the child's cue to report) and return its last line."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        result = self.read()
        self.close()
        return result

    def close(self) -> None:
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def summary(samples: Sequence[float]) -> tuple[float, float]:
    """(median, max)."""
    return statistics.median(samples), max(samples)


def verdict(ratio: float, goal: float) -> str:
    """``(goal <= 0.33x: met)`` or ``... not met``."""
    return f"(goal <= {goal:.2f}x: {'met' if ratio <= goal else 'not met'})"


def verdict_at_least(ratio: float, goal: float) -> str:
    """``(goal >= 0.97: met)`` or ``... not met``."""
    return f"(goal >= {goal:.2f}: {'met' if ratio >= goal else 'not met'})"
