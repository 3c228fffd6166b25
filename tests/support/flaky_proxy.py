"""A real TCP proxy on loopback that breaks gRPC calls where a flaky network would.

It forwards bytes between a client and ``target`` (a worker's port, re-pointable
between connections) and reads the client's HTTP/2 frames (prior knowledge, no
TLS) to count the calls: each HEADERS frame on a new odd stream is one call, the
first on a connection being number 1. ``fault`` says what happens to the call
numbered ``at``:

- ``drop_before``: the connection is closed when the call's HEADERS arrive, before
  any of it is forwarded (the confirming idle reply went through; the stop never does);
- ``drop_reply``: the call is forwarded, and the connection is closed when the
  worker's reply to it begins (the stop is carried out; its reply never arrives);
- ``delay_reply``: the call is forwarded, and the worker's reply to it is held for
  ``delay`` seconds;
- ``reset_mid_frame``: the call's HEADERS frame is forwarded cut in half, then the
  connection is reset (RST, SO_LINGER 0);
- ``black_hole``: every connection is accepted and nothing is ever forwarded.

``repoint`` sends the next connections to another worker and closes those open.

Use it as ``async with FlakyProxy(target) as proxy`` and dial ``proxy.address``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import Self

from support.http2 import HEADERS, PREFACE_BYTES


class FlakyProxy:
    """A loopback TCP proxy to ``target`` (``host:port``) with one ``fault``."""

    def __init__(self, target: str, fault: str = "", at: int = 2, delay: float = 0.0) -> None:
        self.target, self.fault, self.at, self.delay = target, fault, at, delay
        self.calls = 0
        """Calls seen over every connection."""
        self.faulted = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stream = 0
        """The stream of the faulted call."""
        self.address = ""

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def repoint(self, target: str) -> None:
        """Send new connections to ``target``, and close every connection open now (the
        client's next call connects again, to ``target``)."""
        self.target = target
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self.fault == "black_hole":
                await asyncio.Event().wait()
            host, port = self.target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            sent = asyncio.Event()  # the faulted call went to the worker
            downstream = asyncio.ensure_future(self._down(up_reader, writer, sent))
            try:
                await self._up(reader, up_writer, writer, sent)
                await downstream
            finally:
                downstream.cancel()
                up_writer.close()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # cancelled: closed by ``repoint`` or on leaving, as asyncio's server wants
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _up(
        self,
        reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        client: asyncio.StreamWriter,
        sent: asyncio.Event,
    ) -> None:
        """Forward the client's frames, one at a time, counting the calls."""
        upstream.write(await reader.readexactly(PREFACE_BYTES))
        streams: set[int] = set()
        while True:
            head = await reader.readexactly(9)
            length = int.from_bytes(head[:3], "big")
            kind, stream = head[3], struct.unpack(">I", head[5:9])[0] & 0x7FFFFFFF
            payload = await reader.readexactly(length)
            if kind == HEADERS and stream % 2 == 1 and stream not in streams:
                streams.add(stream)
                self.calls += 1
                if self.calls == self.at and self.fault:
                    self._stream = stream
                    if self._fault_call(head + payload, upstream, client):
                        return
                    sent.set()
                    continue
            upstream.write(head + payload)
            await upstream.drain()

    def _fault_call(
        self, frame: bytes, upstream: asyncio.StreamWriter, client: asyncio.StreamWriter
    ) -> bool:
        """Break the call whose HEADERS ``frame`` arrived; True if the connection ends."""
        self.faulted.set()
        if self.fault == "drop_before":
            client.close()
            return True
        if self.fault == "reset_mid_frame":
            upstream.write(frame[: len(frame) // 2])
            for writer in (client, upstream):
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
            return True
        upstream.write(frame)
        return False

    async def _down(
        self, reader: asyncio.StreamReader, client: asyncio.StreamWriter, sent: asyncio.Event
    ) -> None:
        """Forward the worker's frames; once the reply to the faulted call begins (its
        HEADERS: the worker has answered), drop or delay it."""
        while True:
            head = await reader.readexactly(9)
            frame = head + await reader.readexactly(int.from_bytes(head[:3], "big"))
            stream = struct.unpack(">I", head[5:9])[0] & 0x7FFFFFFF
            if sent.is_set() and head[3] == HEADERS and stream == self._stream:
                if self.fault == "drop_reply":
                    client.close()
                    return
                if self.fault == "delay_reply":
                    await asyncio.sleep(self.delay)
            client.write(frame)
            with contextlib.suppress(ConnectionError):
                await client.drain()
