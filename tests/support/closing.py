"""A TCP server that accepts connections and closes them at once (a port that is
open but answers nothing, like a worker dying as it is reached)."""

from __future__ import annotations

import asyncio


class ClosingServer:
    """Accepts TCP connections on loopback and closes each immediately; counts them."""

    def __init__(self) -> None:
        self.address = ""
        self.connections = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        async def close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.close()

        self._server = await asyncio.start_server(close, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self.address

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
