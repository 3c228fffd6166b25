"""HTTP basic auth against bcrypt hashes, as aiohttp middleware.

As exporter-toolkit does it:

- every request must authenticate before any handler runs, so an
  unauthenticated scrape triggers no fan-out;
- one bcrypt check runs at a time (a burst of wrong passwords queues instead
  of taking every core);
- each verdict, success or failure, is remembered (``REMEMBERED_MAX`` of
  them, least recently used first out), keyed by a SHA-256 of the user, the
  hash and the password, so a scraper pays bcrypt's cost once and a client
  repeating a wrong password pays nothing;
- an unknown user is checked against a dummy hash of the same cost as the
  real ones, so it takes as long as a wrong password.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import bcrypt
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REMEMBERED_MAX: Final = 1024
CHALLENGE: Final = {"WWW-Authenticate": 'Basic realm="wool-idle"'}


def checkpw(password: bytes, hashed: bytes) -> bool:
    """bcrypt's verdict on ``password`` against ``hashed`` (False for a malformed hash)."""
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:
        return False


class BasicAuth:
    """Checks ``Authorization: Basic`` against ``users`` (user -> bcrypt hash)."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self.users = dict(users)
        cost = int(next(iter(self.users.values())).split(b"$")[2]) if self.users else 10
        self._dummy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(rounds=cost))
        self._verdicts: OrderedDict[bytes, bool] = OrderedDict()
        self._one_at_a_time = asyncio.Lock()

    async def check(self, header: str | None) -> bool:
        """Whether ``header`` carries a known user with the right password."""
        credentials = _decode(header)
        if credentials is None:
            return False
        user, password = credentials
        name = user.decode("utf-8", "surrogateescape")  # undecodable: no such user
        hashed = self.users.get(name, self._dummy)
        parts = (user, hashed, password)
        fingerprint = hashlib.sha256(b":".join(p.hex().encode() for p in parts)).digest()
        verdict = self._recall(fingerprint)
        if verdict is None:
            async with self._one_at_a_time:
                verdict = self._recall(fingerprint)  # decided while this one waited
                if verdict is None:
                    matched = await asyncio.to_thread(checkpw, password, hashed)
                    verdict = matched and name in self.users
                    self._remember(fingerprint, verdict)
        return verdict

    def _recall(self, fingerprint: bytes) -> bool | None:
        verdict = self._verdicts.get(fingerprint)
        if verdict is not None:
            self._verdicts.move_to_end(fingerprint)
        return verdict

    def _remember(self, fingerprint: bytes, verdict: bool) -> None:
        self._verdicts[fingerprint] = verdict
        while len(self._verdicts) > REMEMBERED_MAX:
            self._verdicts.popitem(last=False)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Answer 401 unless the request authenticates; then call ``handler``."""
        if not await self.check(request.headers.get("Authorization")):
            raise web.HTTPUnauthorized(text="Unauthorized\n", headers=CHALLENGE)
        return await handler(request)


def _decode(header: str | None) -> tuple[bytes, bytes] | None:
    if not header or not header.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True)
    except binascii.Error:
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None
