"""Per-method authorization over mutual TLS, with real certificates."""

from __future__ import annotations

import grpc
import pytest
from support.tasks import echo

from wool_idle.exceptions import RpcError, TransientRpcError
from wool_idle.worker import ClientTls, ServerTls, WorkerConnection, WorkerService
from wool_idle.worker.auth import MethodPolicy

POLICY = MethodPolicy({"stop": frozenset({"autoscaler"}), "dispatch": frozenset({"caller"})})
EXPECTED = {
    # identity: (idle, stop, dispatch)
    "exporter": ("ok", "PERMISSION_DENIED", "PERMISSION_DENIED"),
    "autoscaler": ("ok", "ok", "PERMISSION_DENIED"),
    "caller": ("ok", "PERMISSION_DENIED", "ok"),
    "stranger": ("ok", "PERMISSION_DENIED", "PERMISSION_DENIED"),
}


async def outcome(call) -> str:
    try:
        await call
    except RpcError as error:
        return error.code.name
    return "ok"


def client(tls_material, identity: str | None, ca: str | None = None) -> ClientTls:
    files = tls_material.clients.get(identity) if identity else None
    return ClientTls(
        ca_file=ca or tls_material.ca,
        cert_file=files.cert if files else None,
        key_file=files.key if files else None,
    )


@pytest.fixture
async def mtls_worker(start_server, tls_material):
    """A worker over mutual TLS with POLICY's allow-lists."""
    return await start_server(
        "localhost:0",
        service=WorkerService(authorization=POLICY),
        tls=ServerTls(
            cert_file=tls_material.server.cert,
            key_file=tls_material.server.key,
            client_ca_file=tls_material.ca,
        ),
    )


class TestMethodAuthorization:
    @pytest.mark.parametrize("identity", list(EXPECTED))
    async def test_identity_method_matrix(self, mtls_worker, tls_material, identity: str) -> None:
        """Given a worker over mutual TLS allowing stop to `autoscaler` and dispatch to
        `caller`, when each identity calls idle, dispatch and (conditionally, so an
        allowed stop is refused for not being idle long enough) stop, then each outcome
        is as the allow-lists say and the worker keeps serving."""
        # Arrange
        server = mtls_worker
        # Act
        async with WorkerConnection(server.address, tls=client(tls_material, identity)) as c:
            idle = await outcome(c.idle_time(timeout=5))
            dispatch = await outcome(c.dispatch(echo, 1))
            stop = await outcome(c.stop(5.0, if_idle_for=3600.0))
        # Assert
        expected_idle, expected_stop, expected_dispatch = EXPECTED[identity]
        assert (idle, dispatch) == (expected_idle, expected_dispatch)
        assert stop == ("FAILED_PRECONDITION" if expected_stop == "ok" else expected_stop)
        assert not server.service.stopping.is_set()

    async def test_denied_call_names_the_identity_and_the_flag(
        self, mtls_worker, tls_material
    ) -> None:
        """Given the same worker, when `exporter` calls stop and dispatch, then each
        PERMISSION_DENIED names the identity the worker read from its certificate and
        the allow-list flag that left it out: the caller's operator sees what to fix
        without the worker's log."""
        # Arrange
        server = mtls_worker
        # Act
        async with WorkerConnection(server.address, tls=client(tls_material, "exporter")) as c:
            with pytest.raises(RpcError) as stop:
                await c.stop(5.0, if_idle_for=3600.0)
            with pytest.raises(RpcError) as dispatch:
                await c.dispatch(echo, 1)
        # Assert
        assert "exporter" in stop.value.details and "--allow-stop" in stop.value.details
        assert "exporter" in dispatch.value.details
        assert "--allow-dispatch" in dispatch.value.details

    async def test_allowed_identity_stops(self, mtls_worker, tls_material) -> None:
        """Given the same worker, when `autoscaler` stops it unconditionally, then it stops."""
        # Arrange
        server = mtls_worker
        # Act
        async with WorkerConnection(server.address, tls=client(tls_material, "autoscaler")) as c:
            await c.stop(1.0)
        # Assert
        assert server.service.stopped.is_set()

    @pytest.mark.parametrize("case", ["no_certificate", "other_ca"])
    async def test_handshake_refused(self, mtls_worker, tls_material, case: str) -> None:
        """Given a worker requiring client certificates, when a client without one (or
        trusting another CA) calls idle, then the call fails as unavailable and the
        worker keeps serving."""
        # Arrange
        server = mtls_worker
        tls = (
            client(tls_material, None)
            if case == "no_certificate"
            else client(tls_material, "autoscaler", ca=tls_material.other_ca)
        )
        # Act
        async with WorkerConnection(server.address, tls=tls) as connection:
            with pytest.raises(TransientRpcError) as raised:
                await connection.idle_time(timeout=3)
        # Assert
        assert raised.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        assert not server.service.stopping.is_set()
