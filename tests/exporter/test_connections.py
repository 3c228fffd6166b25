"""The exporter's connection cache over real gRPC servers."""

from __future__ import annotations

import asyncio

import pytest
from support.pooled import settled, users

from wool_idle.exporter.connections import ConnectionCache, ConnectionsExhausted
from wool_idle.worker import ClientTls


async def call(cache: ConnectionCache, address: str, *, adhoc: bool, healthy: bool = True) -> None:
    """One idle call over the cache, released as ``healthy``."""
    lease = cache.lease(address, adhoc=adhoc)
    try:
        await lease.connection.idle_time(timeout=5.0)
    finally:
        cache.release(lease, healthy=healthy)


def leasable(cache: ConnectionCache, address: str) -> bool:
    """Whether ``address`` can be leased now (the lease is given back at once)."""
    try:
        lease = cache.lease(address)
    except ConnectionsExhausted:
        return False
    cache.release(lease, healthy=True)
    return True


class TestConnectionCache:
    async def test_lease_adhoc_beyond_limit_closes_least_recent(self, scripted) -> None:
        """Given an ad-hoc limit of 2, when three unconfigured workers are called in
        turn, then the first one's channel is closed and the last two stay open."""
        # Arrange
        workers = [await scripted(seconds=1.0) for _ in range(3)]
        cache = ConnectionCache(adhoc_limit=2)
        # Act
        for worker in workers:
            await call(cache, worker.address, adhoc=True)
        await settled(lambda: users(workers[0].address) == 0)
        # Assert
        assert cache.open() == {workers[1].address, workers[2].address}
        assert [users(w.address) for w in workers] == [0, 1, 1]
        await cache.close()

    async def test_lease_beyond_max_open_refused_until_one_closes(self, scripted) -> None:
        """Given at most 2 connections open (the open files limit's share), when a third
        worker is leased, then ``ConnectionsExhausted`` and no channel is opened for it;
        once one of the two left the configured set and closed, it is leased."""
        # Arrange
        workers = [await scripted(seconds=1.0) for _ in range(3)]
        cache = ConnectionCache(max_open=2)
        cache.keep(w.address for w in workers)
        for worker in workers[:2]:
            await call(cache, worker.address, adhoc=False)
        # Act
        with pytest.raises(ConnectionsExhausted, match="2 are open"):
            cache.lease(workers[2].address)
        refused = users(workers[2].address)
        cache.keep(w.address for w in workers[1:])
        await settled(lambda: leasable(cache, workers[2].address))
        await call(cache, workers[2].address, adhoc=False)
        # Assert
        assert refused == 0
        assert cache.open() == {workers[1].address, workers[2].address}
        await cache.close()

    async def test_release_unhealthy_adhoc_closes_at_once(self, scripted) -> None:
        """Given an unconfigured worker whose call went wrong, when released as not
        healthy, then its channel is closed (no reconnecting in the background)."""
        # Arrange
        worker = await scripted(seconds=1.0)
        cache = ConnectionCache()
        # Act
        await call(cache, worker.address, adhoc=True, healthy=False)
        await settled(lambda: users(worker.address) == 0)
        # Assert
        assert (cache.open(), users(worker.address)) == (set(), 0)

    async def test_release_adhoc_closes_after_its_lifetime(self, scripted) -> None:
        """Given an ad-hoc lifetime of 50 ms, when an unconfigured worker's call ends,
        then its channel stays open, and is closed once the lifetime passes unused."""
        # Arrange
        worker = await scripted(seconds=1.0)
        cache = ConnectionCache(adhoc_ttl=0.05)
        # Act
        await call(cache, worker.address, adhoc=True)
        right_after = users(worker.address)
        await settled(lambda: users(worker.address) == 0)
        # Assert
        assert right_after == 1
        assert (cache.open(), users(worker.address)) == (set(), 0)

    async def test_keep_retires_in_use_connection_after_its_call(self, scripted) -> None:
        """Given a configured worker with a call in flight, when the configured set
        drops it, then the call still gets its answer, and the channel is closed only
        after it."""
        # Arrange
        worker = await scripted(seconds=7.0, delay=0.3)
        cache = ConnectionCache()
        lease = cache.lease(worker.address)
        calling = asyncio.ensure_future(lease.connection.idle_time(timeout=5.0))
        await settled(lambda: worker.idle_calls == 1)
        # Act
        cache.keep([])
        during = users(worker.address)
        answer = await calling
        cache.release(lease, healthy=True)
        await settled(lambda: users(worker.address) == 0)
        # Assert
        assert (answer, during) == (7.0, 1)
        assert (cache.open(), users(worker.address)) == (set(), 0)

    async def test_keep_adopts_adhoc_and_never_evicts_configured(self, scripted) -> None:
        """Given an ad-hoc limit of 1 and a worker first called ad hoc, when it joins
        the configured set and two others are called ad hoc, then it stays open (the
        limit and lifetime apply to ad-hoc ones only), and so does the latest one."""
        # Arrange
        configured, first, second = [await scripted(seconds=1.0) for _ in range(3)]
        cache = ConnectionCache(adhoc_limit=1, adhoc_ttl=0.05)
        await call(cache, configured.address, adhoc=True)
        # Act
        cache.keep([configured.address])
        await call(cache, first.address, adhoc=True)
        await call(cache, second.address, adhoc=True)
        await asyncio.sleep(0.1)
        await call(cache, configured.address, adhoc=True, healthy=False)
        # Assert
        assert configured.address in cache.open()
        assert users(configured.address) == 1
        assert first.address not in cache.open()
        await cache.close()
        assert [users(w.address) for w in (configured, first, second)] == [0, 0, 0]

    async def test_lease_adhoc_of_configured_address_is_never_evicted(self, scripted) -> None:
        """Given an ad-hoc limit of 1 and a configured set made before any call, when
        its worker is first called ad hoc (``/probe``) and then two unconfigured ones
        are, then the configured worker's channel stays open and the one it opened
        first serves it again."""
        # Arrange
        configured, first, second = [await scripted(seconds=1.0) for _ in range(3)]
        cache = ConnectionCache(adhoc_limit=1)
        cache.keep([configured.address])
        # Act
        await call(cache, configured.address, adhoc=True)
        await call(cache, first.address, adhoc=True)
        await call(cache, second.address, adhoc=True)
        await call(cache, configured.address, adhoc=True)
        await settled(lambda: users(first.address) == 0)
        # Assert
        assert cache.configured(configured.address)
        assert not cache.configured(first.address)
        assert cache.open() == {configured.address, second.address}
        assert len(set(configured.peers)) == 1
        await cache.close()

    async def test_lease_other_kind_replaces_the_connection(
        self, start_server, tls_material
    ) -> None:
        """Given a TLS cache with a TLS connection open to an address, when a plaintext
        lease of that address is asked for (the worker's record changed), then a new
        plaintext connection replaces it and answers; the old one is closed."""
        # Arrange
        server = await start_server()
        cache = ConnectionCache(tls=ClientTls(ca_file=tls_material.ca))
        first = cache.lease(server.address)
        cache.release(first, healthy=False)
        # Act
        second = cache.lease(server.address, plaintext=True)
        try:
            seconds = await second.connection.idle_time(timeout=5.0)
        finally:
            cache.release(second, healthy=True)
        # Assert
        assert second is not first and second.plaintext and not first.plaintext
        assert first.retired
        assert seconds >= 0
        assert cache.open() == {server.address}
        await cache.close()
