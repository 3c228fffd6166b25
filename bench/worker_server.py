"""The worker service on one server beside an empty generic unary handler.

Usage: ``python -m bench.worker_server``; prints its address, serves until
stdin closes. The empty handler (``/bench.Empty/call``) is the latency floor
the idle RPC is compared with on the same server.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import grpc

from wool_idle.proto import Void
from wool_idle.worker.server import worker_handlers
from wool_idle.worker.service import WorkerService

EMPTY = "/bench.Empty/call"


async def empty(request: Void, context: Any) -> Void:
    return Void()


async def serve() -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [
            worker_handlers(WorkerService()),
            grpc.method_handlers_generic_handler(
                "bench.Empty",
                {
                    "call": grpc.unary_unary_rpc_method_handler(
                        empty, Void.FromString, Void.SerializeToString
                    )
                },
            ),
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"127.0.0.1:{port}", flush=True)
    await asyncio.to_thread(sys.stdin.read)
    await server.stop(0)


if __name__ == "__main__":
    asyncio.run(serve())
