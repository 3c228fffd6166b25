"""The channel pool: shared channels, replaced when their TLS files change."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from support.connect_proxy import RefusingProxy
from support.tasks import gated
from support.tls import TlsMaterial, issue, make_tls_material
from support.waiting import eventually_async

from wool_idle.exceptions import RpcError, StopRefused
from wool_idle.worker import ClientTls, ServerTls, WorkerConnection, WorkerService
from wool_idle.worker.auth import MethodPolicy
from wool_idle.worker.channels import ChannelKey, ChannelPool, pool
from wool_idle.worker.tls import RECHECK_INTERVAL


@pytest.fixture
def material(tmp_path: Path) -> TlsMaterial:
    """TLS files of this test alone (the tests rewrite them)."""
    return make_tls_material(tmp_path, ("caller", "stranger"))


def client_tls(material: TlsMaterial, identity: str) -> ClientTls:
    files = material.clients[identity]
    return ClientTls(ca_file=material.ca, cert_file=files.cert, key_file=files.key)


async def caller_only_stops(start_server, material: TlsMaterial):
    """A worker serving mutual TLS whose stop only the identity `caller` may call."""
    tls = ServerTls(
        cert_file=material.server.cert,
        key_file=material.server.key,
        client_ca_file=material.ca,
    )
    policy = MethodPolicy({"stop": frozenset({"caller"})})
    return await start_server("localhost:0", tls=tls, service=WorkerService(authorization=policy))


class TestChannelPool:
    async def test_acquire_opens_new_channel_once_tls_files_changed(
        self, material: TlsMaterial
    ) -> None:
        """Given a pool on a fake clock holding a TLS channel, when the client
        certificate files are rewritten, then the channel stays current until the
        recheck interval passed, after which the files are read again on a thread,
        and then acquire opens a new channel; the old one closes when its last user
        releases it."""
        # Arrange
        now = [0.0]
        channels = ChannelPool(recheck_interval=1.0, clock=lambda: now[0])
        key = ChannelKey("localhost:1", client_tls(material, "caller"))
        old = channels.acquire(key)
        issue(material.ca, material.clients["caller"], ("caller",))
        # Act
        before_interval = channels.acquire(key)
        now[0] += 1.0
        moved = await eventually_async(lambda: not channels.current(key, old))
        new = channels.acquire(key)
        users = channels.users(key)
        await channels.release(key, old)
        old_open_with_one_user = old.get_state() is not grpc.ChannelConnectivity.SHUTDOWN
        await channels.release(key, old)
        # Assert
        assert before_interval is old
        assert moved
        assert new is not old and channels.current(key, new)
        assert users == 3
        assert old_open_with_one_user
        assert old.get_state() is grpc.ChannelConnectivity.SHUTDOWN
        assert channels.users(key) == 1
        await channels.release(key, new)

    async def test_acquire_keeps_channel_when_new_files_are_bad(
        self, material: TlsMaterial, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a pool holding a TLS channel, when the client key is replaced by
        garbage and read again, then the failure is logged and the channel stays
        current (the last good files are kept)."""
        # Arrange
        now = [0.0]
        channels = ChannelPool(recheck_interval=1.0, clock=lambda: now[0])
        key = ChannelKey("localhost:1", client_tls(material, "caller"))
        first = channels.acquire(key)
        # Act
        Path(material.clients["caller"].key).write_text("garbage\n")
        now[0] += 5.0
        looked = channels.current(key, first)  # starts the read
        logged = await eventually_async(lambda: "keeping the TLS files" in caplog.text)
        second = channels.acquire(key)
        # Assert
        assert looked and logged
        assert second is first and channels.current(key, first)
        await channels.release(key, first)
        await channels.release(key, first)

    async def test_acquire_plaintext_never_stale(self) -> None:
        """Given a plaintext key, then its channel is shared and always current."""
        # Arrange
        channels = ChannelPool(recheck_interval=0.0)
        key = ChannelKey("127.0.0.1:1")
        # Act
        first, second = channels.acquire(key), channels.acquire(key)
        # Assert
        assert first is second and channels.current(key, first)
        await channels.release(key, first)
        await channels.release(key, first)
        assert channels.users(key) == 0

    @pytest.mark.parametrize("variable", ["http_proxy", "https_proxy", "grpc_proxy"])
    async def test_acquire_dials_workers_directly_whatever_the_proxy_environment(
        self, start_server, monkeypatch, variable: str
    ) -> None:
        """Given a worker on loopback and a host whose environment names a forward
        proxy (``variable``, as on a corporate network) that refuses everything,
        when a connection asks the worker's idle time, then the channel dialled the
        worker itself: the call is answered and the proxy saw nothing (as
        Prometheus's scrapes ignore the proxy environment)."""
        # Arrange
        server = await start_server()
        async with RefusingProxy() as proxy:
            monkeypatch.setenv(variable, proxy.url)
            monkeypatch.delenv("no_proxy", raising=False)
            monkeypatch.delenv("NO_PROXY", raising=False)
            # Act
            async with WorkerConnection(server.address) as connection:
                idle = await connection.idle_time(timeout=5.0)
            # Assert
            assert idle >= 0.0
            assert proxy.seen == []


class TestConnectionRotation:
    async def test_dispatch_persistent_connection_moves_to_rotated_identity(
        self, start_server, material: TlsMaterial, tmp_path: Path
    ) -> None:
        """Given a persistent connection presenting `stranger` to a worker that lets
        only `caller` stop it, with a task in flight on it, when the client files are
        rewritten with a `caller` certificate, then the connection's next calls
        present `caller` (the stop is now refused for the task, not the caller),
        the task in flight on the old channel still completes, and the old channel
        is given back."""
        # Arrange
        server = await caller_only_stops(start_server, material)
        connection = WorkerConnection(server.address, tls=client_tls(material, "stranger"))
        gate = tmp_path / "gate"
        running = asyncio.ensure_future(connection.dispatch(gated, str(gate)))
        while len(server.service.in_flight) == 0:
            await asyncio.sleep(0.01)
        with pytest.raises(RpcError) as denied:
            await connection.stop(5.0, if_idle_for=0.0)
        # Act
        issue(material.ca, material.clients["stranger"], ("caller",))
        refused: StopRefused | None = None
        deadline = asyncio.get_running_loop().time() + 15
        while refused is None and asyncio.get_running_loop().time() < deadline:
            try:
                await connection.stop(5.0, if_idle_for=0.0)
            except StopRefused as error:
                refused = error
            except RpcError:
                await asyncio.sleep(0.1)
        gate.touch()
        result = await running
        users = pool().users(connection.key)
        await connection.close()
        # Assert
        assert denied.value.code is grpc.StatusCode.PERMISSION_DENIED
        assert refused is not None
        assert result == "ok"
        assert users == 1
        assert pool().users(connection.key) == 0

    async def test_one_call_connections_move_to_rotated_identity(
        self, start_server, material: TlsMaterial
    ) -> None:
        """Given a worker that lets only `caller` stop it, and one short-lived
        connection per call presenting `stranger` (the autoscaler's way: no channel
        outlives its call), when the client files are rewritten with a `caller`
        certificate, then the first connection made past the recheck interval presents
        `caller` (its stop is refused for the worker's idle time, not for the
        caller)."""
        # Arrange
        server = await caller_only_stops(start_server, material)

        async def stop_once() -> str:
            async with WorkerConnection(
                server.address, tls=client_tls(material, "stranger")
            ) as connection:
                try:
                    await connection.stop(5.0, if_idle_for=3600.0)  # refused: not idle so long
                except StopRefused:
                    return "refused"
                except RpcError as error:
                    return error.code.name
                return "stopped"

        before = await stop_once()
        # Act
        issue(material.ca, material.clients["stranger"], ("caller",))
        await asyncio.sleep(RECHECK_INTERVAL + 0.2)  # the next connection looks again
        after = await stop_once()
        # Assert
        assert before == "PERMISSION_DENIED"
        assert after == "refused"
