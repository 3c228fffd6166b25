"""HTTP basic auth against bcrypt hashes, as aiohttp middleware.

Every request must authenticate before any handler runs, so an
unauthenticated scrape triggers no fan-out. An unknown user is checked
against a dummy hash of the same cost as the real ones, so it takes as long
as a wrong password. Successful checks are remembered (by a SHA-256 of the
credentials) so a scraper does not pay bcrypt's cost on every scrape.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import bcrypt
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REMEMBERED_MAX: Final = 1024
CHALLENGE: Final = {"WWW-Authenticate": 'Basic realm="wool-idle"'}


class BasicAuth:
    """Checks ``Authorization: Basic`` against ``users`` (user -> bcrypt hash)."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self.users = dict(users)
        cost = int(next(iter(self.users.values())).split(b"$")[2]) if self.users else 10
        self._dummy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(rounds=cost))
        self._remembered: set[bytes] = set()

    async def check(self, header: str | None) -> bool:
        """Whether ``header`` carries a known user with the right password."""
        credentials = _decode(header)
        if credentials is None:
            return False
        user, password = credentials
        fingerprint = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        if any(hmac.compare_digest(fingerprint, known) for known in self._remembered):
            return True
        hashed = self.users.get(user, self._dummy)
        ok = await asyncio.to_thread(bcrypt.checkpw, password.encode(), hashed)
        ok = ok and user in self.users
        if ok and len(self._remembered) < REMEMBERED_MAX:
            self._remembered.add(fingerprint)
        return ok

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Answer 401 unless the request authenticates; then call ``handler``."""
        if not await self.check(request.headers.get("Authorization")):
            raise web.HTTPUnauthorized(text="Unauthorized\n", headers=CHALLENGE)
        return await handler(request)


def _decode(header: str | None) -> tuple[str, str] | None:
    if not header or not header.startswith("Basic "):
        return None
    try:
        text = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep else None
