"""A reference-counted pool of gRPC channels, one pool per event loop.

Connections to the same worker with the same TLS settings and options share
one channel; the channel closes when the last connection releases it. gRPC
aio channels belong to the loop that made them, hence one pool per loop.

A TLS channel is made from its files as they were when it opened. The pool
has a TLS setting's files read again at most once per ``RECHECK_INTERVAL``, on
a thread of their own (``followed``: the event loop never waits for a file);
once they changed, the next ``acquire`` opens a new channel, and ``current``
tells a connection holding the old one to move (the old one closes when its
last user releases it). Before a connection opens a channel it awaits
``look_again``, so that one made once a cycle uses the files as they are, not
as of its previous look.

A channel dials its worker directly: the proxy environment (``grpc_proxy``,
``https_proxy``, ``http_proxy``), which gRPC would otherwise follow with an HTTP
``CONNECT`` for every address, loopback included, is ignored (``DIRECT``), as
Prometheus's scrapes ignore it. A worker is reached on its own network; a
corporate proxy would refuse it (every worker down) or stand between the
autoscaler and the worker it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import grpc

from wool_idle.daemon_thread import on_daemon_thread
from wool_idle.followed import Followed
from wool_idle.worker.address import dial_target
from wool_idle.worker.stubs import Stubs
from wool_idle.worker.tls import RECHECK_INTERVAL, ClientTls, PemSet

ChannelOptions = tuple[tuple[str, Any], ...]
DIRECT: Final = (("grpc.enable_http_proxy", 0),)
"""The option that keeps gRPC from dialling through the proxy environment."""
FRESH_WAIT: Final = 1.0
"""Seconds a connection about to open a channel waits for its TLS files to be read."""


@dataclass(frozen=True)
class ChannelKey:
    """What makes two channels interchangeable."""

    target: str
    tls: ClientTls | None = None
    options: ChannelOptions = ()


@dataclass
class _Entry:
    channel: grpc.aio.Channel
    pems: PemSet | None
    users: int = field(default=0)


class ChannelPool:
    """Channels keyed by ``ChannelKey``, opened on first acquire, closed on last release."""

    def __init__(
        self,
        *,
        recheck_interval: float = RECHECK_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._entries: dict[ChannelKey, list[_Entry]] = {}
        self._tls_files: dict[ClientTls, Followed[PemSet]] = {}
        self._recheck_interval = recheck_interval
        self._clock = clock

    def acquire(self, key: ChannelKey) -> grpc.aio.Channel:
        """Return the shared channel for ``key``, opening it if needed (or if its
        TLS files changed). ``OSError`` if the TLS files cannot be loaded at all."""
        entries = self._entries.setdefault(key, [])
        if not entries or self._stale(key, entries[-1]):
            try:
                entries.append(self._open(key))
            except BaseException:
                if not entries:
                    del self._entries[key]
                raise
        entry = entries[-1]
        entry.users += 1
        return entry.channel

    def current(self, key: ChannelKey, channel: grpc.aio.Channel) -> bool:
        """Whether ``channel`` is the one ``acquire(key)`` would return now."""
        entries = self._entries.get(key)
        if not entries or entries[-1].channel is not channel:
            return False
        return not self._stale(key, entries[-1])

    async def release(self, key: ChannelKey, channel: grpc.aio.Channel) -> None:
        """Drop one use of ``channel`` (acquired for ``key``); close it when no one uses it."""
        entries = self._entries.get(key, [])
        entry = next((e for e in entries if e.channel is channel), None)
        if entry is None:
            return
        entry.users -= 1
        if entry.users <= 0:
            entries.remove(entry)
            if not entries:
                del self._entries[key]
            await entry.channel.close()

    async def look_again(self, key: ChannelKey) -> None:
        """When ``key``'s TLS files were last read ``RECHECK_INTERVAL`` ago or more,
        have them read again and wait for it (at most ``FRESH_WAIT`` seconds; then
        the last good ones serve)."""
        if key.tls is not None:
            await self._files(key.tls).fresh(FRESH_WAIT)

    async def force(self, tls: ClientTls) -> str:
        """Read ``tls``'s files now, on a daemon thread (once a read under way has
        ended): the channels opened after it use what they give, and the ones open
        move, as after a change the interval found. Why they did not load (the last
        good ones serve), or ``""`` when they did. Before any channel of ``tls``, they
        are only loaded, to say so: the first channel reads them anyway."""
        followed = self._tls_files.get(tls)
        if followed is None:
            try:
                await on_daemon_thread("wool-idle-reload", tls.paths().load)
            except (OSError, ValueError) as error:
                return str(error)
            return ""
        return await on_daemon_thread("wool-idle-reload", followed.force)

    def users(self, key: ChannelKey) -> int:
        """How many connections hold a channel of ``key`` (0 when none is open)."""
        return sum(entry.users for entry in self._entries.get(key, ()))

    def _stale(self, key: ChannelKey, entry: _Entry) -> bool:
        return key.tls is not None and self._files(key.tls).current() != entry.pems

    def _files(self, tls: ClientTls) -> Followed[PemSet]:
        found = self._tls_files.get(tls)
        if found is None:
            found = self._tls_files[tls] = tls.paths().followed(self._recheck_interval, self._clock)
        return found

    def _open(self, key: ChannelKey) -> _Entry:
        options: Sequence[tuple[str, Any]] = [*DIRECT, *key.options]
        target = dial_target(key.target)
        if key.tls is None:
            return _Entry(grpc.aio.insecure_channel(target, options=options), None)
        pems = self._files(key.tls).current()
        options = [*options, *key.tls.channel_options()]
        channel = grpc.aio.secure_channel(target, key.tls.credentials(pems), options=options)
        return _Entry(channel, pems)


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ChannelPool] = (
    weakref.WeakKeyDictionary()
)


_releasing: set[asyncio.Task[None]] = set()
"""Releases of abandoned channels under way (asyncio keeps only weak references to tasks)."""


def loops_of(held: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]) -> list[Any]:
    """The loops ``held`` has entries for, listed at once: iterating the mapping
    itself fails when another thread's loop adds to it meanwhile."""
    return [loop for ref in held.keyrefs() if (loop := ref()) is not None]


def abandoned(
    key: ChannelKey, held: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Stubs]
) -> None:
    """A connection holding ``held`` (its stubs for ``key`` on each loop) was collected
    unclosed: from the collecting thread, have each loop still open drop the use in
    its pool, and say so with ``ResourceWarning``."""
    for loop in loops_of(held):
        stubs = held.get(loop)
        if stubs is not None and not stubs.released and _release_on(loop, key, stubs.channel):
            with contextlib.suppress(Warning):  # a filter made it an error: never raise here
                warnings.warn(f"unclosed WorkerConnection to {key.target}", ResourceWarning, 1)


def _release_on(loop: asyncio.AbstractEventLoop, key: ChannelKey, channel: Any) -> bool:
    """Have ``loop`` drop one use of ``channel`` from its pool; False if it is closed."""

    def release() -> None:
        found = _pools.get(loop)
        if found is not None:
            task = loop.create_task(found.release(key, channel))
            _releasing.add(task)
            task.add_done_callback(_releasing.discard)

    try:
        loop.call_soon_threadsafe(release)
    except RuntimeError:  # the loop is closed
        return False
    return True


def pool() -> ChannelPool:
    """The channel pool of the running event loop."""
    loop = asyncio.get_running_loop()
    found = _pools.get(loop)
    if found is None:
        found = _pools[loop] = ChannelPool()
    return found
