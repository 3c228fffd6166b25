"""Waiting for what another thread does (a reload on a thread of its own)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

POLL = 0.01


def eventually(holds: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Whether ``holds()`` became true within ``timeout`` seconds (asked every 10 ms)."""
    deadline = time.monotonic() + timeout
    while not holds():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True


async def eventually_async(holds: Callable[[], bool], timeout: float = 10.0) -> bool:
    """``eventually`` for a test on the event loop: the loop runs while it waits."""
    deadline = time.monotonic() + timeout
    while not holds():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL)
    return True
