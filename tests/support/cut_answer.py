"""An HTTP server on loopback that answers every request with raw bytes and then ends
the connection, cleanly (``close``: FIN) or not (``reset``: RST, SO_LINGER 0): the
answer cut short by a flaky network or a dying server. Use it as
``async with CutAnswer(raw, end) as server`` and read ``server.url``."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Self


class CutAnswer:
    """Sends ``raw`` (status line, headers, body as given) to each request, then ends."""

    def __init__(self, raw: bytes, end: str = "reset") -> None:
        self.raw, self.end = raw, end
        self.url = ""
        self._server: asyncio.Server | None = None
        self._answering: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/metrics"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await asyncio.gather(*self._answering, return_exceptions=True)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(self.raw)
            await writer.drain()
            await asyncio.sleep(0.05)  # the bytes reach the client before the end
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        if self.end == "reset":
            linger = struct.pack("ii", 1, 0)
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            writer.transport.abort()
        else:
            writer.close()
