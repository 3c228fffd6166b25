"""Task functions the tests dispatch to real workers.

Workers in subprocesses cannot import this module, so ``by_value`` makes
cloudpickle ship these functions by value. Gates are files: a task blocks
until the test creates its gate file, which works in-process and across
processes alike.
"""

from __future__ import annotations

import asyncio
import os
import sys

import cloudpickle


def by_value() -> None:
    """Pickle this module's functions by value (for workers in other processes)."""
    import support.tasks

    cloudpickle.register_pickle_by_value(support.tasks)


async def echo(value: object) -> object:
    return value


async def sleep_for(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


async def gated(gate: str, outcome: str = "return") -> str:
    """Wait for the file ``gate``, then return ``"ok"`` or raise ``ValueError``."""
    while not os.path.exists(gate):
        await asyncio.sleep(0.01)
    if outcome == "raise":
        raise ValueError("task failed")
    return "ok"


def not_a_coroutine() -> str:
    return "sync"


class Unusual(BaseException):
    """A BaseException that is neither an Exception nor a process exit."""


async def exits(how: str) -> str:
    """End the task the way ``how`` says: ``sys.exit``, ``SystemExit``,
    ``KeyboardInterrupt`` or a custom ``BaseException``."""
    await asyncio.sleep(0)
    if how == "sys_exit":
        sys.exit(3)
    if how == "system_exit":
        raise SystemExit("bye")
    if how == "keyboard_interrupt":
        raise KeyboardInterrupt
    raise Unusual("unusual")


async def sized(size: int, outcome: str = "return") -> bytes:
    """Return (or raise a ValueError carrying) ``size`` bytes."""
    if outcome == "raise":
        raise ValueError(b"x" * size)
    return b"x" * size
