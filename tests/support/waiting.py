"""Waiting for what another thread does (a reload on a thread of its own)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

POLL = 0.01

T = TypeVar("T")


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


async def until(probe: Callable[[], T], done: Callable[[T], bool], seconds: float = 60.0) -> T:
    """The first result of ``probe`` (run in a thread: a blocking query) for which
    ``done`` holds, asked every 0.25 s; ``AssertionError`` with the last one after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        result = await asyncio.to_thread(probe)
        if done(result):
            return result
        assert time.monotonic() < deadline, f"never done; last: {result}"
        await asyncio.sleep(0.25)
