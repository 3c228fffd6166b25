"""A forward proxy on loopback that refuses every request and notes it (a corporate
proxy that reaches nothing internal): ``seen`` holds each request line received, a
``CONNECT host:port`` from a gRPC channel, a ``GET http://...`` from an HTTP client.
Use it as ``async with RefusingProxy() as proxy`` and put ``proxy.url`` in
``http_proxy`` and its kin."""

from __future__ import annotations

import asyncio
from typing import Self


class RefusingProxy:
    """Answers every request ``403 Forbidden`` and closes; ``seen`` lists them."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._refuse, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            self.seen.append((await reader.readline()).decode("latin-1").strip())
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
