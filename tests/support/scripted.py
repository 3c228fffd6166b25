"""A real gRPC server on loopback whose ``idle`` and ``stop`` answers are scripted.

It stands in for the shapes of worker a test cannot get otherwise: one that
answers a given status code, a given double, raw bytes that are not an
``IdleTime`` (``reply``), or lacks the idle method (a wool worker older than
0.14). It records what it received.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import grpc

from wool_idle.proto import SERVICE, IdleTime, StopRequest, Void


@dataclass
class ScriptedWorker:
    """Answers ``idle`` with ``seconds`` (or aborts with ``code``); answers ``stop``
    after ``stop_delay`` seconds (a drain), or then aborts with ``code``, else
    ``stop_code``; an abort says ``details`` (default: ``scripted <CODE>``); records
    calls, and how each stop call ended."""

    seconds: float = 0.0
    code: grpc.StatusCode | None = None
    stop_code: grpc.StatusCode | None = None
    stop_delay: float = 0.0
    with_idle: bool = True
    hang: bool = False
    delay: float = 0.0
    reply: bytes | None = None
    details: str | None = None
    idle_calls: int = 0
    peers: list[str] = field(default_factory=list)
    deadlines: list[float | None] = field(default_factory=list)
    stop_requests: list[StopRequest] = field(default_factory=list)
    stops_answered: int = 0
    stops_cancelled: int = 0
    address: str = ""
    _server: Any = None

    async def _idle(self, request: Void, context: Any) -> IdleTime | bytes:
        self.idle_calls += 1
        self.peers.append(context.peer())
        self.deadlines.append(context.time_remaining())
        if self.hang:
            await asyncio.Event().wait()
        await asyncio.sleep(self.delay)
        if self.code is not None:
            await context.abort(self.code, self.details or f"scripted {self.code.name}")
        if self.reply is not None:
            return self.reply
        return IdleTime(seconds=self.seconds)

    async def _stop(self, request: StopRequest, context: Any) -> Void:
        self.stop_requests.append(request)
        try:
            await asyncio.sleep(self.stop_delay)
        except asyncio.CancelledError:  # the caller cut the call short
            self.stops_cancelled += 1
            raise
        self.stops_answered += 1
        code = self.code or self.stop_code
        if code is not None:
            await context.abort(code, self.details or f"scripted {code.name}")
        return Void()

    async def start(self, listen: str = "127.0.0.1:0") -> str:
        methods = {
            "stop": grpc.unary_unary_rpc_method_handler(
                self._stop,
                request_deserializer=StopRequest.FromString,
                response_serializer=Void.SerializeToString,
            )
        }
        if self.with_idle:
            methods["idle"] = grpc.unary_unary_rpc_method_handler(
                self._idle,
                request_deserializer=Void.FromString,
                response_serializer=_serialize,
            )
        self._server = grpc.aio.server()
        self._server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(SERVICE, methods)]
        )
        port = self._server.add_insecure_port(listen)
        await self._server.start()
        self.address = listen if listen.startswith("unix:") else f"127.0.0.1:{port}"
        return self.address

    async def close(self) -> None:
        await self._server.stop(0)


def _serialize(reply: IdleTime | bytes) -> bytes:
    """An ``IdleTime`` as its bytes; scripted raw bytes as they are."""
    return reply if isinstance(reply, bytes) else reply.SerializeToString()
