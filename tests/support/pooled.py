"""Watching the channel pool: how many users a worker's channel has, and waiting
for a condition without asserting on time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from wool_idle.exporter.connections import CHANNEL_OPTIONS
from wool_idle.worker.channels import ChannelKey, pool


def users(address: str) -> int:
    """How many connections hold the exporter's pooled channel to ``address`` (0: closed)."""
    return pool().users(ChannelKey(address, None, CHANNEL_OPTIONS))


async def settled(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait until ``condition()`` holds; the bound only detects a hang."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
