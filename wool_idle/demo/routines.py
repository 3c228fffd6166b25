"""The task a wool client of the demo (and of the tests) dispatches to a wool pool."""

from __future__ import annotations

import asyncio
import os

import wool


@wool.routine  # type: ignore[untyped-decorator]  # wool ships no type information
async def whoami(seconds: float = 0.0) -> int:
    """Runs on a wool worker: sleep ``seconds``, return the worker's process id."""
    await asyncio.sleep(seconds)
    return os.getpid()
