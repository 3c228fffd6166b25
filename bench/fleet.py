"""A simulated fleet: one process answering the idle RPC (and stop) on N ports.

It also serves the standard health service (``grpc.health.v1.Health``, the
whole server and the Worker service SERVING), as a real worker does, so
blackbox_exporter's grpc prober can probe the same fleet.

A bench helper, not a stand-in for real workers in tests: it lets a 2-core
machine present 1,000+ workers. Usage::

    python -m bench.fleet --workers 1000 [--tls-cert CERT --tls-key KEY]

prints one JSON line ``{"addresses": [...]}`` once it serves, then on each
line read from stdin prints ``{"calls": total, "peers": {peer: count}}`` (the
idle calls since the last line, per client connection: one connection per
target, so per target), and exits when stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from wool_idle.proto import SERVICE, IdleTime, StopRequest, Void


class Fleet:
    """Counts idle calls per client connection."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    async def idle(self, request: Void, context: Any) -> IdleTime:
        self.calls[context.peer()] += 1
        return IdleTime(seconds=42.0)

    async def stop(self, request: StopRequest, context: Any) -> Void:
        return Void()


async def serve(workers: int, tls: tuple[str, str] | None = None) -> None:
    """Serve ``workers`` ports, over TLS with ``tls`` (certificate, key) when given."""
    fleet = Fleet()
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                SERVICE,
                {
                    "idle": grpc.unary_unary_rpc_method_handler(
                        fleet.idle, Void.FromString, IdleTime.SerializeToString
                    ),
                    "stop": grpc.unary_unary_rpc_method_handler(
                        fleet.stop, StopRequest.FromString, Void.SerializeToString
                    ),
                },
            )
        ]
    )
    checks = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    for name in ("", SERVICE):
        await checks.set(name, health_pb2.HealthCheckResponse.SERVING)
    if tls is None:
        ports = [server.add_insecure_port("127.0.0.1:0") for _ in range(workers)]
    else:
        pair = (Path(tls[1]).read_bytes(), Path(tls[0]).read_bytes())
        credentials = grpc.ssl_server_credentials([pair])
        ports = [server.add_secure_port("127.0.0.1:0", credentials) for _ in range(workers)]
    await server.start()
    print(json.dumps({"addresses": [f"127.0.0.1:{p}" for p in ports]}), flush=True)
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        print(
            json.dumps({"calls": sum(fleet.calls.values()), "peers": dict(fleet.calls)}), flush=True
        )
        fleet.calls.clear()
    await server.stop(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--tls-cert", help="PEM certificate: serve TLS")
    parser.add_argument("--tls-key", help="PEM key of --tls-cert")
    args = parser.parse_args()
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    asyncio.run(serve(args.workers, tls))


if __name__ == "__main__":
    main()
