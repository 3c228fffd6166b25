"""The prober over real gRPC servers: persistent connections, faults per target."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterator

import pytest
from support.blackhole import Blackhole
from support.closing import ClosingServer
from support.pooled import settled, users
from support.tls import TlsMaterial

from wool_idle.exporter.connections import CHANNEL_OPTIONS, ConnectionCache
from wool_idle.exporter.outcome import ErrorReason
from wool_idle.exporter.probe import AdhocProbesBusy, Prober
from wool_idle.exporter.target import Target
from wool_idle.worker import ClientTls, ServerTls, WorkerConnection


@pytest.fixture
def closed_ports() -> Iterator[Callable[[int], list[str]]]:
    """Make loopback addresses nothing listens on: ports bound and never listened on,
    held until the test ends (a connection is refused; released, a port could be
    bound meanwhile by another process, and answer)."""
    sockets: list[socket.socket] = []

    def make(count: int) -> list[str]:
        made = [socket.socket() for _ in range(count)]
        sockets.extend(made)
        for sock in made:
            sock.bind(("127.0.0.1", 0))
        return [f"127.0.0.1:{sock.getsockname()[1]}" for sock in made]

    yield make
    for sock in sockets:
        sock.close()


class CutOffConnection(WorkerConnection):
    """A connection whose call is cancelled under it, as when its channel closes."""

    async def idle_time(self, timeout: float | None = None) -> float:
        raise asyncio.CancelledError


class TestProber:
    async def test_fan_out_closes_removed_targets_keeps_recent_adhoc(self, scripted) -> None:
        """Given connections to two configured workers and one probed ad hoc, when the
        set shrinks to one, then the removed worker's channel closes and the ad-hoc
        one stays open; closing the prober closes everything."""
        # Arrange
        a, b, c = [await scripted(seconds=1.0) for _ in range(3)]
        prober = Prober(tls=None, timeout=5.0, concurrency=4)
        await prober.fan_out([Target(a.address), Target(b.address)], 5.0)
        await prober.probe_adhoc(Target(c.address), time.monotonic() + 5.0)
        opened = [users(w.address) for w in (a, b, c)]
        # Act
        await prober.fan_out([Target(a.address)], 5.0)
        await settled(lambda: users(b.address) == 0)
        after_shrink = [users(w.address) for w in (a, b, c)]
        await prober.close()
        # Assert
        assert opened == [1, 1, 1]
        assert after_shrink == [1, 0, 1]
        assert [users(w.address) for w in (a, b, c)] == [0, 0, 0]
        assert (a.idle_calls, b.idle_calls, c.idle_calls) == (2, 1, 1)

    async def test_fan_out_short_budget_scrape_does_not_cut_a_longer_one(self, scripted) -> None:
        """Given a worker that takes 0.2 s to answer and a scrape with a 0.05 s budget in
        flight (a client announcing a tiny scrape timeout), when a scrape with a 5 s
        budget arrives meanwhile, then it gets the worker's idle value, not the short
        round's missed deadline."""
        # Arrange
        worker = await scripted(seconds=7.0, delay=0.2)
        prober = Prober(tls=None, timeout=5.0, concurrency=4)
        targets = [Target(worker.address)]
        # Act
        short, full = await asyncio.gather(
            prober.fan_out(targets, 0.05), prober.fan_out(targets, 5.0)
        )
        await prober.close()
        # Assert
        assert [r.error for r in short] == [ErrorReason.DEADLINE]
        assert [(r.idle, r.error) for r in full] == [(7.0, None)]

    async def test_fan_out_reuses_one_channel_per_target(self, scripted) -> None:
        """Given a worker, when fanned out over three times, then one channel serves all."""
        # Arrange
        worker = await scripted(seconds=1.0)
        prober = Prober(tls=None, timeout=5.0, concurrency=4)
        # Act
        for _ in range(3):
            await prober.fan_out([Target(worker.address)], 5.0)
        # Assert
        assert users(worker.address) == 1
        assert len(set(worker.peers)) == 1
        await prober.close()

    async def test_fan_out_calls_in_flight_bounded_by_concurrency(self, scripted) -> None:
        """Given concurrency 2 and seven workers that take 0.1 s to answer, when fanned
        out over, then never more than two calls are in flight, every worker is asked
        once, and the results come in the targets' order."""
        # Arrange
        workers = [await scripted(seconds=float(i), delay=0.1) for i in range(7)]
        in_flight, most = 0, 0

        class Counting(WorkerConnection):
            async def idle_time(self, timeout: float | None = None) -> float:
                nonlocal in_flight, most
                in_flight += 1
                most = max(most, in_flight)
                try:
                    return await super().idle_time(timeout=timeout)
                finally:
                    in_flight -= 1

        def connect(address: str, tls: ClientTls | None) -> WorkerConnection:
            return Counting(address, tls=tls, options=CHANNEL_OPTIONS)

        prober = Prober(
            tls=None, timeout=5.0, concurrency=2, connections=ConnectionCache(connect=connect)
        )
        # Act
        results = await prober.fan_out([Target(w.address) for w in workers], 5.0)
        # Assert
        assert most == 2
        assert [r.idle for r in results] == [float(i) for i in range(7)]
        assert [w.idle_calls for w in workers] == [1] * 7
        await prober.close()

    async def test_fan_out_hung_workers_never_hold_the_lanes_from_the_others(
        self, scripted
    ) -> None:
        """Given twice as many hung workers as lanes, listed before a healthy one, when
        fanned out over four times, then once every hung worker has missed a deadline
        (two rounds: the first rounds cannot know), every round asks the healthy one
        first and it has its idle value; the hung ones miss the deadline, and the
        results come in the targets' order."""
        # Arrange
        hung = [await scripted(hang=True) for _ in range(4)]
        healthy = await scripted(seconds=7.0)
        targets = [Target(w.address) for w in (*hung, healthy)]
        prober = Prober(tls=None, timeout=5.0, concurrency=2)
        for _ in range(2):
            await prober.fan_out(targets, 1.0)
        # Act
        rounds = [await prober.fan_out(targets, 1.0) for _ in range(2)]
        # Assert
        for results in rounds:
            assert [r.idle for r in results] == [None] * 4 + [7.0]
            assert [r.error for r in results] == [ErrorReason.DEADLINE] * 4 + [None]
        await prober.close()

    async def test_fan_out_call_cut_off_is_that_targets_failure(self, scripted) -> None:
        """Given a target whose call is cancelled under the probe (its channel closed)
        and a healthy one, when fanned out, then the round completes: the first is
        unavailable, the second has its value."""
        # Arrange
        healthy = await scripted(seconds=4.0)
        cut_off = "127.0.0.1:1"

        def connect(address: str, tls: ClientTls | None) -> WorkerConnection:
            kind = CutOffConnection if address == cut_off else WorkerConnection
            return kind(address, tls=tls, options=CHANNEL_OPTIONS)

        prober = Prober(
            tls=None, timeout=5.0, concurrency=4, connections=ConnectionCache(connect=connect)
        )
        # Act
        results = await prober.fan_out([Target(cut_off), Target(healthy.address)], 5.0)
        # Assert
        assert [(r.idle, r.error) for r in results] == [
            (None, ErrorReason.UNAVAILABLE),
            (4.0, None),
        ]
        await prober.close()

    async def test_probe_adhoc_burst_to_closed_ports_leaves_nothing_open(
        self, closed_ports
    ) -> None:
        """Given an ad-hoc limit of 16, when /probe asks at once about 12 closed ports
        and a port that accepts then drops every connection, then no channel stays open
        and nothing reconnects in the background afterwards (the drop-port sees no
        new connection over the next 1.5 s, twice the longest reconnect backoff)."""
        # Arrange
        dropping = ClosingServer()
        await dropping.start()
        addresses = [*closed_ports(12), dropping.address]
        prober = Prober(
            tls=None,
            timeout=2.0,
            concurrency=16,
            connections=ConnectionCache(adhoc_limit=16, adhoc_ttl=300.0),
        )
        # Act
        results = await asyncio.gather(
            *(prober.probe_adhoc(Target(a), time.monotonic() + 2.0) for a in addresses)
        )
        await settled(lambda: all(users(a) == 0 for a in addresses))
        attempts = dropping.connections
        await asyncio.sleep(1.5)
        # Assert
        assert {r.error for r in results} == {ErrorReason.UNAVAILABLE}
        assert prober.connections.open() == set()
        assert [users(a) for a in addresses] == [0] * len(addresses)
        assert attempts >= 1
        assert dropping.connections == attempts
        await dropping.close()

    async def test_probe_adhoc_healthy_burst_capped_then_expires(self, scripted) -> None:
        """Given an ad-hoc limit of 4 and a lifetime of 0.3 s, when /probe asks six
        healthy unconfigured workers in turn, then only the last four stay open, and
        none once the lifetime has passed."""
        # Arrange
        workers = [await scripted(seconds=float(i)) for i in range(6)]
        prober = Prober(
            tls=None,
            timeout=5.0,
            concurrency=4,
            connections=ConnectionCache(adhoc_limit=4, adhoc_ttl=0.3),
        )
        # Act
        for worker in workers:
            await prober.probe_adhoc(Target(worker.address), time.monotonic() + 5.0)
        await settled(lambda: sum(users(w.address) for w in workers) <= 4)
        capped = [users(w.address) for w in workers]
        await settled(lambda: all(users(w.address) == 0 for w in workers))
        # Assert
        assert capped == [0, 0, 1, 1, 1, 1]
        assert prober.connections.open() == set()
        assert [users(w.address) for w in workers] == [0] * 6

    async def test_probe_adhoc_pending_connects_count_against_the_limit(self) -> None:
        """Given an ad-hoc limit of 2 and three unconfigured addresses that never answer
        a handshake, when /probe asks each in turn with a short budget, then the first
        two miss the deadline and the third is refused: the connects the first two left
        pending (gRPC gives a connect ``CONNECT_TIMEOUT``, even after its channel
        closed) still hold their places, so no more sockets connect than the limit."""
        # Arrange
        holes = [Blackhole() for _ in range(3)]
        prober = Prober(
            tls=None, timeout=2.0, concurrency=4, connections=ConnectionCache(adhoc_limit=2)
        )
        outcomes: list[ErrorReason | str | None] = []
        connecting = []
        # Act
        for hole in holes:
            try:
                result = await prober.probe_adhoc(Target(hole.address), time.monotonic() + 0.3)
            except AdhocProbesBusy:
                outcomes.append("busy")
            else:
                outcomes.append(result.error)
            connecting.append(sum(h.connecting() for h in holes))
        # Assert
        assert outcomes == [ErrorReason.DEADLINE, ErrorReason.DEADLINE, "busy"]
        assert max(connecting) <= 2
        await prober.close()
        for hole in holes:
            hole.close()


class TestProberTls:
    """TLS per target: a discovered worker's record decides (``Target.secure``)."""

    @staticmethod
    def client_tls(material: TlsMaterial, *, ca: str | None = None) -> ClientTls:
        return ClientTls(ca_file=ca or material.ca)

    async def test_probe_secure_record_without_client_tls_is_tls_not_dialled(
        self, closed_ports
    ) -> None:
        """Given a discovered worker whose record says it serves TLS, and no client TLS,
        when probed, then the reason is tls and no connection was opened."""
        # Arrange
        prober = Prober(tls=None, timeout=5.0, concurrency=4)
        target = Target(closed_ports(1)[0], secure=True)
        # Act
        result = await prober.probe(target, time.monotonic() + 5.0)
        # Assert
        assert (result.up, result.idle, result.error) == (False, None, ErrorReason.TLS)
        assert prober.connections.open() == set()
        await prober.close()

    async def test_probe_secure_flag_picks_tls_or_plaintext(
        self, start_server, tls_material: TlsMaterial
    ) -> None:
        """Given client TLS and two discovered workers, one serving TLS (secure) and one
        plaintext (not secure), when fanned out, then both answer: the flag picked TLS
        for the first and plaintext for the second."""
        # Arrange
        server_tls = ServerTls(cert_file=tls_material.server.cert, key_file=tls_material.server.key)
        secure = await start_server("localhost:0", tls=server_tls)
        plain = await start_server()
        prober = Prober(tls=self.client_tls(tls_material), timeout=5.0, concurrency=4)
        targets = [Target(secure.address, secure=True), Target(plain.address, secure=False)]
        # Act
        results = await prober.fan_out(targets, 5.0)
        # Assert
        assert [(r.up, r.error) for r in results] == [(True, None), (True, None)]
        await prober.close()

    async def test_probe_handshake_failure_is_tls(
        self, start_server, tls_material: TlsMaterial, closed_ports
    ) -> None:
        """Given client TLS, when probing a plaintext worker listed statically (TLS by
        the flags), a TLS worker whose certificate another CA signed, and one whose
        certificate does not name the server name the exporter expects, then all fail
        their handshake: reason tls, not unavailable; a closed port stays
        unavailable."""
        # Arrange
        server_tls = ServerTls(cert_file=tls_material.server.cert, key_file=tls_material.server.key)
        secure = await start_server("localhost:0", tls=server_tls)
        plain = await start_server()
        wrong_ca = Prober(
            tls=self.client_tls(tls_material, ca=tls_material.other_ca),
            timeout=5.0,
            concurrency=4,
        )
        wrong_name = Prober(
            tls=ClientTls(ca_file=tls_material.ca, server_name="elsewhere.example"),
            timeout=5.0,
            concurrency=4,
        )
        prober = Prober(tls=self.client_tls(tls_material), timeout=5.0, concurrency=4)
        # Act
        static = await prober.probe(Target(plain.address), time.monotonic() + 5.0)
        misnamed = await wrong_name.probe(
            Target(secure.address, secure=True), time.monotonic() + 5.0
        )
        closed = await prober.probe(Target(closed_ports(1)[0]), time.monotonic() + 5.0)
        untrusted = await wrong_ca.probe(
            Target(secure.address, secure=True), time.monotonic() + 5.0
        )
        # Assert
        assert (static.up, static.error) == (False, ErrorReason.TLS)
        assert (untrusted.up, untrusted.error) == (False, ErrorReason.TLS)
        assert (misnamed.up, misnamed.error) == (False, ErrorReason.TLS)
        assert closed.error is ErrorReason.UNAVAILABLE
        await prober.close()
        await wrong_ca.close()
        await wrong_name.close()
