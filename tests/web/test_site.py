"""Serving an app on TCP or a Unix socket, over real HTTP."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from wool_idle.web.site import serve_app


def hello_app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello\n")

    app = web.Application()
    app.router.add_get("/hello", hello)
    return app


@pytest.fixture
def socket_path(tmp_path: Path) -> str:
    # Unix socket paths are limited to ~108 bytes; tmp_path can be longer.
    return f"/tmp/wool-idle-web-{os.getpid()}-{abs(hash(tmp_path)) % 10**8}.sock"


class TestServeApp:
    async def test_serve_app_on_unix_socket(self, socket_path: str) -> None:
        """Given `unix:/path`, when the app is served, then the URL is
        `http+unix://<percent-encoded path><path>`, a request over the socket is
        answered, and the socket file is gone once it stops."""
        # Act
        async with serve_app(hello_app(), f"unix:{socket_path}", path="/hello") as url:
            connector = aiohttp.UnixConnector(path=socket_path)
            async with (
                aiohttp.ClientSession(connector=connector) as session,
                session.get("http://localhost/hello") as response,
            ):
                status, body = response.status, await response.text()
        # Assert
        assert url == f"http+unix://{urllib.parse.quote(socket_path, safe='')}/hello"
        assert (status, body) == (200, "hello\n")
        assert not os.path.exists(socket_path)

    async def test_serve_app_on_tcp_port_zero(self) -> None:
        """Given `127.0.0.1:0`, then the URL carries the port picked, and it answers."""
        # Act
        async with (
            serve_app(hello_app(), "127.0.0.1:0") as url,
            aiohttp.ClientSession() as session,
            session.get(f"{url}/hello") as response,
        ):
            status = response.status
        # Assert
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        assert status == 200

    async def test_serve_app_address_in_use(self) -> None:
        """Given an address already bound, then OSError from entering."""
        # Arrange
        async with serve_app(hello_app(), "127.0.0.1:0") as url:
            taken = url.removeprefix("http://")
            # Act / Assert
            with pytest.raises(OSError):
                async with serve_app(hello_app(), taken):
                    pass

    async def test_serve_app_keeps_a_file_it_did_not_bind(self, socket_path: str) -> None:
        """Given a regular file where the socket should go, then OSError, and the file
        is still there (only a socket of ours is removed)."""
        # Arrange
        Path(socket_path).write_text("someone's file\n")
        # Act
        with pytest.raises(OSError):
            async with serve_app(hello_app(), f"unix:{socket_path}"):
                pass
        # Assert
        assert Path(socket_path).read_text() == "someone's file\n"
        os.unlink(socket_path)
