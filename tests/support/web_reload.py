"""A daemon's web config over HTTPS, rewritten on disk, and requests to it: for the
tests of ``POST /-/reload``."""

from __future__ import annotations

import base64
import shutil
import ssl
from pathlib import Path

import aiohttp
import bcrypt
from aiohttp import web

BEARER = "Bearer tok"
ALICE = "Basic " + base64.b64encode(b"alice:a").decode()
BOB = "Basic " + base64.b64encode(b"bob:b").decode()
HASHES = {name: bcrypt.hashpw(pw, bcrypt.gensalt(rounds=4)).decode() for name, pw in
          (("alice", b"a"), ("bob", b"b"))}  # fmt: skip
NEVER = 3600.0
"""A follow interval no test reaches: what changes, the forced re-read changed."""


def web_config(directory: Path, tls_material, *users: str) -> Path:
    """``web.yml`` in ``directory``: HTTPS from copies of the server files, ``users``."""
    if not (directory / "server.crt").exists():
        shutil.copy(tls_material.server.cert, directory / "server.crt")
        shutil.copy(tls_material.server.key, directory / "server.key")
    path = directory / "web.yml"
    entries = "".join(f"  {user}: '{HASHES[user]}'\n" for user in users)
    path.write_text(
        "tls_server_config: {cert_file: server.crt, key_file: server.key}\n"
        f"basic_auth_users:\n{entries}"
    )
    return path


async def ask(
    url: str, tls_material, method: str = "GET", auth: str | None = ALICE
) -> tuple[int, str]:
    """``method`` ``url`` over HTTPS (verified by the test CA) with ``auth``, an
    ``Authorization`` header."""
    client = ssl.create_default_context(cafile=tls_material.ca)
    headers = {} if auth is None else {"Authorization": auth}
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, url, headers=headers, ssl=client, server_hostname="localhost"
        ) as answer,
    ):
        return answer.status, await answer.text()


def recording_source(seen: list[str | None]) -> web.Application:
    """A source answering every GET with empty exposition text (no worker), recording
    each request's ``Authorization`` header in ``seen``."""

    async def metrics(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(text="", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def http_config(directory: Path, tls_material, auth: str, ca_file: str = "ca.crt") -> Path:
    """``http.yml`` in ``directory``: ``auth`` (a line of YAML, or nothing) and a
    ``tls_config`` trusting ``ca_file`` (a copy of the test CA by default)."""
    shutil.copy(tls_material.ca, directory / "ca.crt")
    path = directory / "http.yml"
    path.write_text(f"{auth}\ntls_config: {{ca_file: {ca_file}, server_name: localhost}}\n")
    return path
