"""A gRPC server hosting one ``WorkerService`` plus the standard health service."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from typing import Final

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from wool_idle.proto import SERVICE, IdleTime, Request, Response, StopRequest, Void
from wool_idle.unix_socket import claim_unix_socket
from wool_idle.worker.address import UNIX_PREFIX, parse_address, split_host_port
from wool_idle.worker.service import WorkerService
from wool_idle.worker.tls import ServerTls

CLOSE_GRACE: Final = 5.0
"""Seconds the server gives RPCs still open (the stop reply, task results) after draining."""


class WorkerServer:
    """Serve ``service`` on ``address`` (``host:port``, port 0 for any, or ``unix:/path``).

    ``start`` binds and returns the address clients should use (with the real
    port); ``wait_closed`` returns once a stop has drained the service and the
    server has closed.
    """

    def __init__(
        self, address: str, service: WorkerService, *, tls: ServerTls | None = None
    ) -> None:
        self.requested_address = parse_address(address, listen=True)
        self.service = service
        self.tls = tls
        self.address = ""
        self.health = health.aio.HealthServicer()
        self._server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        self._server.add_generic_rpc_handlers([worker_handlers(service)])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        self._closer: asyncio.Task[None] | None = None

    async def start(self) -> str:
        """Bind, start serving, and return the bound address. ``OSError`` if the
        address is in use (for a Unix socket: a process accepts connections on it), or
        is not this host's, naming the address and the system's reason (gRPC's own
        error says only "Failed to bind")."""
        if self.requested_address.startswith(UNIX_PREFIX):
            claim_unix_socket(self.requested_address.removeprefix(UNIX_PREFIX))
        try:
            if self.tls is None:
                port = self._server.add_insecure_port(self.requested_address)
            else:
                port = self._server.add_secure_port(self.requested_address, self.tls.credentials())
        except RuntimeError as error:
            raise _bind_error(self.requested_address) or error from None
        self.address = _bound_address(self.requested_address, port)
        await self._server.start()
        for name in ("", SERVICE):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._closer = asyncio.ensure_future(self._close_when_stopped())
        return self.address

    async def _close_when_stopped(self) -> None:
        await self.service.stopping.wait()
        for name in ("", SERVICE):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.service.stopped.wait()
        await self._server.stop(CLOSE_GRACE)

    async def wait_closed(self) -> None:
        """Return once the server has shut down after a stop."""
        await self._server.wait_for_termination()

    async def close(self, grace: float = 0.0) -> None:
        """Stop the service with ``grace`` and close the server: for an owner in this
        process (the tests). The ``worker`` command's signals shut the service down
        and wait for ``wait_closed`` instead."""
        await self.service.shutdown(grace)
        await self._server.stop(CLOSE_GRACE)
        if self._closer is not None:
            await self._closer


def _bound_address(requested: str, port: int) -> str:
    if requested.startswith(UNIX_PREFIX):
        return requested
    if port == 0:
        raise OSError(f"cannot bind {requested}")
    host = requested.rpartition(":")[0]
    return f"{host}:{port}"


def _bind_error(address: str) -> OSError | None:
    """Why ``address`` (``host:port`` or ``unix:/path``) cannot be bound, found by
    binding it plainly (``OSError`` naming it), or None if it can be now."""
    if address.startswith(UNIX_PREFIX):
        return _unix_bind_error(address)
    host, port = split_host_port(address)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, sockaddr in infos:
            with socket.socket(family, kind, proto) as probe:
                probe.bind(sockaddr)
    except OSError as error:
        return OSError(error.errno, error.strerror, address)
    return None


def _unix_bind_error(address: str) -> OSError | None:
    """Why the Unix socket path of ``address`` cannot be bound (its directory missing,
    read-only or full), or None if it can be now (the socket made to find out is
    removed)."""
    path = address.removeprefix(UNIX_PREFIX)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.bind(path)
    except OSError as error:
        return OSError(error.errno, error.strerror, address)
    with contextlib.suppress(OSError):
        os.unlink(path)
    return None


def worker_handlers(service: WorkerService) -> grpc.GenericRpcHandler:
    """The Worker service's method handlers (dispatch, stop, idle) bound to ``service``."""
    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "dispatch": grpc.stream_stream_rpc_method_handler(
                service.dispatch,
                request_deserializer=Request.FromString,
                response_serializer=Response.SerializeToString,
            ),
            "stop": grpc.unary_unary_rpc_method_handler(
                service.stop,
                request_deserializer=StopRequest.FromString,
                response_serializer=Void.SerializeToString,
            ),
            "idle": grpc.unary_unary_rpc_method_handler(
                service.idle,
                request_deserializer=Void.FromString,
                response_serializer=IdleTime.SerializeToString,
            ),
        },
    )
