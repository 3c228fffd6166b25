"""``UnreadAnswers``: what it keeps watching, over a real aiohttp server."""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web
from support.waiting import eventually_async

from wool_idle.web.unread import UnreadAnswers


class TestUnreadAnswers:
    async def test_look_forgets_connections_closed_with_their_answer_unsent(self) -> None:
        """Given clients that ask for answers larger than the sockets' buffers and
        close without reading, then once they are gone no answer stays under watch
        (each stayed for the whole wait, holding its connection's objects), and the
        watch stops; a later answer unread is watched again."""
        # Arrange
        hook = UnreadAnswers(60.0)
        hook.period = 0.05

        async def large(request: web.Request) -> web.Response:
            return web.Response(body=b"x" * 8 * 1024 * 1024)

        app = web.Application()
        app.router.add_get("/large", large)
        app.on_response_prepare.append(hook)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.SockSite(runner, socket.create_server(("127.0.0.1", 0)))
        await site.start()
        host, port = runner.addresses[0][:2]
        loop = asyncio.get_running_loop()
        try:
            for _ in range(20):
                with socket.create_connection((host, port)) as client:
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    client.setblocking(False)
                    await loop.sock_sendall(client, b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
                    await loop.sock_recv(client, 1024)
            # Act
            forgotten = await eventually_async(lambda: len(hook) == 0, timeout=30)
            stopped = await eventually_async(lambda: hook._sweep is None)
            with socket.create_connection((host, port)) as client:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                client.sendall(b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
                answered = await asyncio.to_thread(client.recv, 1024)
                watched_again = await eventually_async(
                    lambda: len(hook) == 1 and hook._sweep is not None
                )
        finally:
            await runner.cleanup()
            hook.close()
        # Assert
        assert forgotten and stopped
        assert answered.startswith(b"HTTP/1.1 200")
        assert watched_again
