"""A reference-counted pool of gRPC channels, one pool per event loop.

Connections to the same worker with the same TLS settings and options share
one channel; the channel closes when the last connection releases it. gRPC
aio channels belong to the loop that made them, hence one pool per loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from wool_idle.worker.tls import ClientTls

ChannelOptions = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class ChannelKey:
    """What makes two channels interchangeable."""

    target: str
    tls: ClientTls | None = None
    options: ChannelOptions = ()


@dataclass
class _Entry:
    channel: grpc.aio.Channel
    users: int = field(default=0)


class ChannelPool:
    """Channels keyed by ``ChannelKey``, opened on first acquire, closed on last release."""

    def __init__(self) -> None:
        self._entries: dict[ChannelKey, _Entry] = {}

    def acquire(self, key: ChannelKey) -> grpc.aio.Channel:
        """Return the shared channel for ``key``, opening it if needed."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(_open(key))
        entry.users += 1
        return entry.channel

    async def release(self, key: ChannelKey) -> None:
        """Drop one use of ``key``'s channel; close it when no one uses it."""
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.users -= 1
        if entry.users <= 0:
            del self._entries[key]
            await entry.channel.close()

    def users(self, key: ChannelKey) -> int:
        """How many connections hold ``key``'s channel (0 when it is closed)."""
        entry = self._entries.get(key)
        return entry.users if entry else 0


def _open(key: ChannelKey) -> grpc.aio.Channel:
    options: Sequence[tuple[str, Any]] = list(key.options)
    if key.tls is None:
        return grpc.aio.insecure_channel(key.target, options=options)
    options = [*options, *key.tls.channel_options()]
    return grpc.aio.secure_channel(key.target, key.tls.credentials(), options=options)


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ChannelPool] = (
    weakref.WeakKeyDictionary()
)


def pool() -> ChannelPool:
    """The channel pool of the running event loop."""
    loop = asyncio.get_running_loop()
    found = _pools.get(loop)
    if found is None:
        found = _pools[loop] = ChannelPool()
    return found
