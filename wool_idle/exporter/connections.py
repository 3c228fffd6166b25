"""The exporter's one cache of connections to workers.

The configured set (``keep``: the exporter's targets, set when they load or
change) keeps its connections while configured, so every scrape and every
``/probe`` of a configured target reuses an open channel. A target only
``/probe`` asked about is ad hoc: at most ``adhoc_limit`` of those stay open (least recently used
goes first), each for ``adhoc_ttl`` after its last use, and one whose probe
found the worker down is closed at once, so no channel keeps reconnecting in
the background to an address nobody asks about again.

A connection is closed only when no call uses it: ``lease`` counts the calls
in flight, and a connection retired while one is in flight closes when the
last one is released. Removing a target never cuts off a call.

At most ``max_open`` connections are open at once (closing ones included): each
holds a descriptor, and more targets than the open files limit leaves would take
every descriptor, the listening socket's ``accept`` failing with them, so that
``/metrics`` and ``/-/healthy`` would go unanswered. A lease beyond it raises
``ConnectionsExhausted``: that target's probe fails (``unavailable``), the others
are answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from wool_idle.contract import MAX_REPLY_BYTES
from wool_idle.exceptions import WoolError
from wool_idle.worker import ClientTls, WorkerConnection

log = logging.getLogger("wool_idle.exporter")

ADHOC_LIMIT: Final = 10_000
"""Connections kept open for targets that only ``/probe`` asked about (the default of
``--probe.adhoc-limit``): above a shard's worth of workers, so a Prometheus probing
its own list of workers reuses channels instead of opening one per probe."""
ADHOC_TTL: Final = 300.0
"""Seconds such a connection is kept after its last use."""

CONNECT_TIMEOUT: Final = 20.0
"""Seconds gRPC gives one connection attempt (``grpc.min_reconnect_backoff_ms``, its
default made explicit). An attempt to an address that never answers the handshake
holds a socket that long, even after its channel closed."""

CHANNEL_OPTIONS: Final = (
    # Pick up a worker restarted on the same address within about a second.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Also the connect timeout: left at gRPC's default, named for the ad-hoc limit.
    ("grpc.min_reconnect_backoff_ms", int(CONNECT_TIMEOUT * 1000)),
    # An idle reply is 9 bytes: no bandwidth-delay probing pings to size flow-control
    # windows, and no retry machinery (a failed idle call is that scrape's answer;
    # the next scrape asks again).
    ("grpc.http2.bdp_probe", 0),
    ("grpc.enable_retries", 0),
    ("grpc.max_receive_message_length", MAX_REPLY_BYTES),
)


class ConnectionsExhausted(WoolError):
    """No connection opened: ``max_open`` are open already."""


Connect = Callable[[str, ClientTls | None], WorkerConnection]
"""Open a connection to an address, over TLS with the given settings or in plaintext."""


@dataclass(eq=False)
class Lease:
    """One address's connection, and how many calls use it right now."""

    address: str
    connection: WorkerConnection
    plaintext: bool = False
    calls: int = 0
    configured: bool = False
    retired: bool = False
    expiry: asyncio.TimerHandle | None = field(default=None, repr=False)


class ConnectionCache:
    """Open connections by address; see the module docstring for their lifetimes."""

    def __init__(
        self,
        *,
        tls: ClientTls | None = None,
        connect: Connect | None = None,
        adhoc_limit: int = ADHOC_LIMIT,
        adhoc_ttl: float = ADHOC_TTL,
        max_open: int | None = None,
    ) -> None:
        self.tls = tls
        self.max_open = max_open
        self._open = 0
        """Connections made and not yet closed."""
        self._open_refused = 0
        self._connect = connect or (
            lambda address, tls: WorkerConnection(address, tls=tls, options=CHANNEL_OPTIONS)
        )
        self.adhoc_limit = adhoc_limit
        self.adhoc_ttl = adhoc_ttl
        self._leases: dict[str, Lease] = {}
        self._configured: frozenset[str] = frozenset()
        self._adhoc: OrderedDict[str, Lease] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def open(self) -> set[str]:
        """The addresses that have a connection in the cache."""
        return set(self._leases)

    def configured(self, address: str) -> bool:
        """Whether ``address`` is in the configured set (its lease is never ad hoc)."""
        return address in self._configured

    def lease(self, address: str, *, adhoc: bool = False, plaintext: bool = False) -> Lease:
        """The connection to ``address`` for one call; give it back with ``release``.

        An ``adhoc`` lease (``/probe``) of an address outside the configured set
        counts against the ad-hoc limit; any other lease, and an ``adhoc`` one of a
        configured address, holds a configured connection. A ``plaintext`` lease
        connects without TLS even when ``tls`` is set; asking for the other kind
        than the open connection's replaces it.
        """
        plaintext = plaintext and self.tls is not None  # no TLS at all: one kind only
        found = self._leases.get(address)
        if found is not None and found.plaintext != plaintext:
            self._retire(found)
            found = None
        if found is None:
            self._reserve()
            tls = None if plaintext else self.tls
            configured = not adhoc or address in self._configured
            try:
                connection = self._connect(address, tls)
            except BaseException:
                self._open -= 1
                raise
            found = Lease(address, connection, plaintext, configured=configured)
            self._leases[address] = found
        elif not found.configured and not adhoc:
            self._configure(found)
        if not found.configured:
            self._touch(found)
        found.calls += 1
        return found

    def release(self, lease: Lease, *, healthy: bool) -> None:
        """End one call on ``lease``. An ad-hoc connection whose worker was not
        ``healthy`` is retired; a healthy one is kept for ``adhoc_ttl``."""
        lease.calls -= 1
        if lease.retired:
            if lease.calls == 0:
                self._close(lease)
        elif lease.configured:
            return
        elif not healthy:
            self._retire(lease)
        elif lease.calls == 0:
            loop = asyncio.get_running_loop()
            lease.expiry = loop.call_later(self.adhoc_ttl, self._expire, lease)

    def keep(self, addresses: Iterable[str]) -> None:
        """Make ``addresses`` the configured set: retire the connections of those
        that left it (each once its calls are done); ad-hoc ones that joined it stay."""
        wanted = self._configured = frozenset(addresses)
        for lease in list(self._leases.values()):
            if lease.address not in wanted:
                if lease.configured:
                    self._retire(lease)
            elif not lease.configured:
                self._configure(lease)

    async def close(self) -> None:
        """Close every connection (those in use as their calls end) and wait for it."""
        for lease in list(self._leases.values()):
            self._retire(lease)
        while self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _configure(self, lease: Lease) -> None:
        """Move ad-hoc ``lease`` into the configured set."""
        self._disarm(lease)
        self._adhoc.pop(lease.address, None)
        lease.configured = True

    def _touch(self, lease: Lease) -> None:
        """Mark ad-hoc ``lease`` most recently used; evict beyond the limit."""
        self._disarm(lease)
        self._adhoc[lease.address] = lease
        self._adhoc.move_to_end(lease.address)
        while len(self._adhoc) > self.adhoc_limit:
            _, oldest = self._adhoc.popitem(last=False)
            self._retire(oldest)

    def _expire(self, lease: Lease) -> None:
        lease.expiry = None
        if lease.calls == 0 and not lease.configured and not lease.retired:
            self._retire(lease)

    def _retire(self, lease: Lease) -> None:
        """Take ``lease`` out of the cache; close it now, or when its last call ends."""
        if lease.retired:
            return
        lease.retired = True
        self._disarm(lease)
        if self._leases.get(lease.address) is lease:
            del self._leases[lease.address]
        if self._adhoc.get(lease.address) is lease:
            del self._adhoc[lease.address]
        if lease.calls == 0:
            self._close(lease)

    def _reserve(self) -> None:
        """Count one more connection open; ``ConnectionsExhausted`` (logged the first
        time) if ``max_open`` are open already."""
        if self.max_open is not None and self._open >= self.max_open:
            if self._open_refused == 0:
                log.warning(
                    "%d connections to workers are open, the most the open files limit "
                    "leaves: the probes of other targets fail (unavailable) until some "
                    "close; raise the limit (systemd LimitNOFILE) or shard the targets",
                    self._open,
                )
            self._open_refused += 1
            raise ConnectionsExhausted(
                f"no connection opened: {self._open} are open, the most the open files limit leaves"
            )
        self._open += 1

    def _close(self, lease: Lease) -> None:
        task = asyncio.ensure_future(lease.connection.close())
        self._closing.add(task)
        task.add_done_callback(self._closed)

    def _closed(self, task: asyncio.Task[None]) -> None:
        self._closing.discard(task)
        self._open -= 1

    @staticmethod
    def _disarm(lease: Lease) -> None:
        if lease.expiry is not None:
            lease.expiry.cancel()
            lease.expiry = None
