"""A real gRPC server on loopback serving hand-written handlers of the Worker service."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc

from wool_idle.proto import SERVICE


async def serve_worker_methods(methods: Mapping[str, Any]) -> tuple[grpc.aio.Server, str]:
    """Start a server answering ``methods`` (name -> rpc method handler) under wool's
    Worker service on a free loopback port; the started server and its address."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, methods)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"
