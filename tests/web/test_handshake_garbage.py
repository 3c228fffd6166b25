"""The garbage of failed TLS handshakes, collected before it piles up."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import gc
import shutil
from pathlib import Path

from aiohttp import web

from wool_idle.exporter.runtime import settle_garbage_collector
from wool_idle.web.handshake_garbage import COLLECT_EVERY, FULL_COLLECT_EVERY
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.site import serve_app


def served_over_tls(directory: Path, tls_material) -> LiveWebConfig:
    """A web config serving copies of the server certificate over TLS."""
    shutil.copy(tls_material.server.cert, directory / "server.crt")
    shutil.copy(tls_material.server.key, directory / "server.key")
    path = directory / "web.yml"
    path.write_text("tls_server_config: {cert_file: server.crt, key_file: server.key}\n")
    return LiveWebConfig.load(str(path))


class TestHandshakeGarbage:
    async def test_new_connection_failed_handshakes_wait_for_no_more_than_a_collection(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given an app served over TLS with the exporter's garbage collector settings
        (a young generation collected seldom), when 200 clients in turn send plain HTTP
        to it (each handshake fails), then at most ``COLLECT_EVERY`` of their TLS
        connections, and those under way at each young collection, are left for the
        collector (each holds a 256 KiB buffer)."""
        # Arrange
        before = gc.get_threshold()
        try:
            config = served_over_tls(tmp_path, tls_material)
            async with serve_app(web.Application(), "127.0.0.1:0", config) as url:
                host, port = url.removeprefix("https://").rsplit(":", 1)
                settle_garbage_collector()
                # Act
                for _ in range(200):
                    reader, writer = await asyncio.open_connection(host, int(port))
                    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                    await reader.read()  # the server closes once the handshake failed
                    writer.close()
                    await writer.wait_closed()
                left = sum(isinstance(o, asyncio.sslproto.SSLProtocol) for o in gc.get_objects())
        finally:
            gc.unfreeze()
            gc.set_threshold(*before)
        # Assert
        assert left <= COLLECT_EVERY + FULL_COLLECT_EVERY // COLLECT_EVERY
