"""A real HTTP/2 server on loopback that is no gRPC server: every request is answered
with one HTTP status and no gRPC status (a web server, a proxy's error page, another
service that took the port), or with a ``grpc_status`` but never a message (a gRPC
"trailers-only" answer, which with status 0 says OK and carries no reply), or reset
at once with an HTTP/2 error code (``reset``: ``REFUSED_STREAM``, the stream was not
processed; a server refusing streams beyond its limit, or closing). Frames
are written by hand (prior knowledge, no TLS), enough for gRPC's client: SETTINGS
and PING acknowledged, each request's HEADERS answered by a HEADERS frame that
ends the stream. Use it as
``async with PlainHttp2Server(404) as server`` and dial ``server.address``.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Final, Self

PREFACE_BYTES: Final = 24
HEADERS, RST_STREAM, SETTINGS, PING = 1, 3, 4, 6
ACK, END_STREAM_AND_HEADERS = 0x1, 0x5
REFUSED_STREAM: Final = 7
"""The HTTP/2 error code of a stream the server did not process (gRPC: UNAVAILABLE)."""
STATIC_STATUS_INDEX: Final = {200: 8, 204: 9, 206: 10, 304: 11, 400: 12, 404: 13, 500: 14}
"""HPACK's static table: the ``:status`` values it can send as one byte."""


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def _status_block(status: int) -> bytes:
    """An HPACK header block of ``:status`` alone."""
    index = STATIC_STATUS_INDEX.get(status)
    if index is not None:
        return bytes([0x80 | index])
    digits = str(status).encode()
    return bytes([0x08, len(digits)]) + digits  # literal, name ``:status`` (index 8)


def _literal(name: bytes, value: bytes) -> bytes:
    """An HPACK header, literal name and value (short ones: lengths under 127)."""
    return bytes([0x00, len(name)]) + name + bytes([len(value)]) + value


class PlainHttp2Server:
    """Answers every HTTP/2 request with ``status`` (and ``grpc-status`` if given), or
    resets it with the error code ``reset`` (an HTTP/2 RST_STREAM, no status at all)."""

    def __init__(
        self, status: int = 200, grpc_status: int | None = None, *, reset: int | None = None
    ) -> None:
        self.reset = reset
        self.block = _status_block(status)
        if grpc_status is not None:
            self.block += _literal(b"content-type", b"application/grpc")
            self.block += _literal(b"grpc-status", str(grpc_status).encode())
        self.address = ""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()  # each handler sees the end of its stream and returns
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        with contextlib.suppress(Exception):
            await reader.readexactly(PREFACE_BYTES)
            writer.write(_frame(SETTINGS, 0, 0))
            while True:
                head = await reader.readexactly(9)
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                payload = await reader.readexactly(int.from_bytes(head[:3], "big"))
                if kind in (SETTINGS, PING) and not flags & ACK:
                    writer.write(_frame(kind, ACK, 0, payload if kind == PING else b""))
                elif kind == HEADERS and self.reset is not None:
                    writer.write(_frame(RST_STREAM, 0, stream, struct.pack(">I", self.reset)))
                elif kind == HEADERS:
                    writer.write(_frame(HEADERS, END_STREAM_AND_HEADERS, stream, self.block))
                await writer.drain()
        writer.close()
