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
- an unknown user is checked against a configured user's hash (and never
  accepted, whatever the password), so it takes as long as a wrong password;
  no hash is computed at start (a cost-31 hash would take days: bcrypt's cost
  is what the operator asked for, paid on the first login, one at a time);
- a check runs on a daemon thread of its own, so a days-long one never holds
  up the process's exit (SIGTERM ends it as usual).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import threading
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
    """Checks ``Authorization: Basic`` against ``users`` (user -> bcrypt hash; at
    least one)."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self.users = dict(users)
        self._stand_in = next(iter(self.users.values()))
        """The hash an unknown user is checked against: bcrypt's cost without a match."""
        self._verdicts: OrderedDict[bytes, bool] = OrderedDict()
        self._one_at_a_time = asyncio.Lock()

    async def check(self, header: str | None) -> bool:
        """Whether ``header`` carries a known user with the right password."""
        credentials = _decode(header)
        if credentials is None:
            return False
        user, password = credentials
        name = user.decode("utf-8", "surrogateescape")  # undecodable: no such user
        hashed = self.users.get(name, self._stand_in)
        parts = (user, hashed, password)
        fingerprint = hashlib.sha256(b":".join(p.hex().encode() for p in parts)).digest()
        verdict = self._recall(fingerprint)
        if verdict is None:
            async with self._one_at_a_time:
                verdict = self._recall(fingerprint)  # decided while this one waited
                if verdict is None:
                    matched = await _on_daemon_thread(checkpw, password, hashed)
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


async def _on_daemon_thread(check: Callable[[bytes, bytes], bool], *args: bytes) -> bool:
    """``check(*args)`` on a daemon thread: the interpreter's exit does not wait for it."""
    loop = asyncio.get_running_loop()
    verdict: asyncio.Future[bool] = loop.create_future()

    def settle(matched: bool) -> None:
        if not verdict.done():  # the request may be gone
            verdict.set_result(matched)

    def run() -> None:
        try:
            matched = check(*args)
        except Exception:  # fail closed: no verdict is a refusal
            matched = False
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, matched)

    threading.Thread(target=run, name="bcrypt", daemon=True).start()
    return await verdict


def _decode(header: str | None) -> tuple[bytes, bytes] | None:
    if not header or not header.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True)
    except binascii.Error:
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None
