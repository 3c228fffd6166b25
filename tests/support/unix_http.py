"""HTTP over a Unix socket, from the ``http+unix://`` URLs the daemons print."""

from __future__ import annotations

import os
import urllib.parse

import aiohttp


def socket_path(name: str) -> str:
    """A fresh socket path under /tmp (Unix socket paths are limited to ~108 bytes)."""
    return f"/tmp/wool-idle-{name}-{os.getpid()}-{os.urandom(4).hex()}.sock"


def client_for(url: str) -> tuple[aiohttp.ClientSession, str]:
    """A session and the URL that reach ``url`` with it: an ``http+unix://`` one over
    its socket (the URL then names ``localhost``), any other as it is."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http+unix":
        return aiohttp.ClientSession(), url
    connector = aiohttp.UnixConnector(path=urllib.parse.unquote(parts.netloc))
    return aiohttp.ClientSession(connector=connector), f"http://localhost{parts.path}"


async def get(url: str, path: str) -> tuple[int, str]:
    """GET ``path`` from the daemon whose ready line was ``url`` (``http+unix://...``)."""
    parts = urllib.parse.urlsplit(url)
    assert parts.scheme == "http+unix", url
    connector = aiohttp.UnixConnector(path=urllib.parse.unquote(parts.netloc))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(f"http://localhost{path}") as response,
    ):
        return response.status, await response.text()
