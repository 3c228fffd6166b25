"""Running ``wool-idle`` subcommands as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

COMMAND = (sys.executable, "-m", "wool_idle")
STALLED = "read stalls"
"""What a process of ``spawn_with_stalled_reads`` says on stderr when a read stalls."""
_STALLED_READS = f"""\
import importlib, sys, threading
from wool_idle.cli import main
module, stalled_path = importlib.import_module(sys.argv.pop(1)), sys.argv.pop(1)
read, reads = module.read_regular_file, []
def stalled(path, *, limit):
    reads.extend([path] if str(path) == stalled_path else [])
    if len(reads) > 1:
        print({STALLED!r}, file=sys.stderr, flush=True)
        threading.Event().wait()
    return read(path, limit=limit)
module.read_regular_file = stalled
sys.exit(main(sys.argv[1:], own_process=True))
"""
_STALLED_LOOKUPS = f"""\
import socket, sys, threading
from wool_idle.cli import main
stalled_host, lookup = sys.argv.pop(1), socket.getaddrinfo
def stalled(host, *args, **kwargs):
    if host == stalled_host:
        print({STALLED!r}, file=sys.stderr, flush=True)
        threading.Event().wait()
    return lookup(host, *args, **kwargs)
socket.getaddrinfo = stalled
sys.exit(main(sys.argv[1:], own_process=True))
"""


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


def spawn_with_stalled_reads(
    module: str, path: str | Path, args: Sequence[str]
) -> subprocess.Popen[str]:
    """Start ``wool-idle ARGS`` like ``spawn_cli``, its reads of the file ``path``
    through ``module``'s ``read_regular_file`` after the first (at start) stalled for
    good, as on a hung network mount (which cannot be made here); it says ``STALLED``
    on stderr as one stalls."""
    return subprocess.Popen(
        [sys.executable, "-c", _STALLED_READS, module, str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def spawn_with_stalled_lookups(host: str, args: Sequence[str]) -> subprocess.Popen[str]:
    """Start ``wool-idle ARGS`` like ``spawn_cli``, its name lookups (``getaddrinfo``) of
    ``host`` stalled for good, as against a DNS server that does not answer (which cannot
    be made here); it says ``STALLED`` on stderr as one stalls."""
    return subprocess.Popen(
        [sys.executable, "-c", _STALLED_LOOKUPS, host, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def terminated_once_stalled(process: subprocess.Popen[str], timeout: float = 30.0) -> int:
    """Send ``process`` (of ``spawn_with_stalled_reads`` or ``spawn_with_stalled_lookups``)
    SIGTERM once a read of it stalled (or it exited) and return its exit status
    (``TimeoutExpired`` past ``timeout``)."""
    assert process.stderr is not None
    for line in process.stderr:  # to its end if the process exits first
        if STALLED in line:
            break
    process.terminate()
    return process.wait(timeout=timeout)
