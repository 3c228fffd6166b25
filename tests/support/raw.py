"""A real gRPC server on loopback that answers the Worker methods with raw bytes.

It stands in for a broken or foreign worker whose replies do not decode as
wool's messages: ``idle`` and ``stop`` answer ``reply``; ``dispatch`` answers
each of ``stream`` in turn, then aborts with ``abort`` if one is given. Use it
as ``async with RawWorker(...) as worker``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from support.generic_server import serve_worker_methods

UNDECODABLE = b"\xff\xff"
"""Bytes that no message of worker.proto parses (a truncated field)."""


def length_delimited(field: int, payload: bytes) -> bytes:
    """A protobuf field of wire type 2 (bytes): tag, varint length, payload."""
    header, size = bytes([field << 3 | 2]), len(payload)
    length = bytearray()
    while True:
        length.append(size & 0x7F | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            return header + bytes(length) + payload


def _same(data: bytes) -> bytes:
    return data


@dataclass
class RawWorker:
    reply: bytes = UNDECODABLE
    stream: list[bytes] = field(default_factory=lambda: [UNDECODABLE])
    abort: grpc.StatusCode | None = None
    address: str = ""
    _server: Any = None

    async def _unary(self, request: bytes, context: Any) -> bytes:
        return self.reply

    async def _dispatch(self, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for _ in requests:
            break
        for message in self.stream:
            yield message
        if self.abort is not None:
            await context.abort(self.abort, f"raw {self.abort.name}")

    async def start(self) -> str:
        unary = {"request_deserializer": _same, "response_serializer": _same}
        methods = {
            "idle": grpc.unary_unary_rpc_method_handler(self._unary, **unary),
            "stop": grpc.unary_unary_rpc_method_handler(self._unary, **unary),
            "dispatch": grpc.stream_stream_rpc_method_handler(self._dispatch, **unary),
        }
        self._server, self.address = await serve_worker_methods(methods)
        return self.address

    async def __aenter__(self) -> RawWorker:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._server.stop(0)
