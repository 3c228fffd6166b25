"""A TCP server that accepts connections and never answers (a hung worker)."""

from __future__ import annotations

import asyncio


class HungServer:
    """Accepts TCP connections on loopback and holds them open, silent."""

    def __init__(self) -> None:
        self.address = ""
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            self._writers.append(writer)

        self._server = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self.address

    async def close(self) -> None:
        for writer in self._writers:
            writer.close()
        assert self._server is not None
        self._server.close()
