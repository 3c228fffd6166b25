"""HTTP basic auth against bcrypt hashes, as aiohttp middleware.

As exporter-toolkit does it:

- every request must authenticate before any handler runs, so an
  unauthenticated scrape triggers no fan-out;
- one bcrypt check runs at a time (a burst of wrong passwords queues instead
  of taking every core), and each peer (an IP address; an IPv6 address's /64)
  has at most one check waiting for it: the others of that peer wait behind
  it, so a flood from one peer delays another peer's check by one check, not
  by the whole flood;
- a check whose client has gone by its turn does not run (nobody would read
  its verdict): a client that sends a request and hangs up at once costs no
  bcrypt, however many times it does so;
- each verdict, success or failure, is remembered (``REMEMBERED_MAX`` of
  them, least recently used first out), keyed by a SHA-256 of the user, the
  hash, the password and whether the user is in force, so a scraper pays
  bcrypt's cost once, a client repeating a wrong password pays nothing, and
  a remembered verdict stays right when the users change (``live_config``); a
  check that could not run (no thread to be had) refuses that request only;
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
import contextlib
import functools
import hashlib
import ipaddress
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

import bcrypt
from aiohttp import web

from wool_idle.daemon_thread import on_daemon_thread

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REMEMBERED_MAX: Final = 1024
CHALLENGE: Final = {"WWW-Authenticate": 'Basic realm="wool-idle"'}


def checkpw(password: bytes, hashed: bytes) -> bool:
    """bcrypt's verdict on ``password`` against ``hashed`` (False for a malformed hash)."""
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:
        return False


@dataclass
class _Turn:
    """One peer's checks: the one waiting for bcrypt holds ``lock``; ``users`` counts
    all of them (the entry goes when none is left)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def _never() -> bool:
    return False


Users = Callable[[], Mapping[str, bytes]]
"""The users in force (user -> bcrypt hash), asked again for each request."""


class BasicAuth:
    """Checks ``Authorization: Basic`` against the users in force; none in force
    lets every request through (auth is off, as in exporter-toolkit)."""

    def __init__(self, users: Users) -> None:
        self.users_in_force = users
        self._verdicts: OrderedDict[bytes, bool] = OrderedDict()
        self._one_at_a_time = asyncio.Lock()
        self._turns: dict[str, _Turn] = {}

    async def check(
        self, header: str | None, *, peer: str = "", gone: Callable[[], bool] = _never
    ) -> bool:
        """Whether ``header`` carries a user in force with the right password (False
        when none is in force). ``peer`` names who asks (see ``peer_of``); ``gone``
        says whether the asker has left (its check is then not run: False).

        The users in force may change while a check waits or runs: a user whose
        hash is no longer in force by then is refused (fail closed), so a removed
        user or an old password never gets in after the change, and a queued check
        of a replaced hash does not run."""
        users = self.users_in_force()
        credentials = _decode(header)
        if credentials is None or not users:
            return False
        user, password = credentials
        name = user.decode("utf-8", "surrogateescape")  # undecodable: no such user
        known = name in users
        # An unknown user is checked against a user's hash: bcrypt's cost, no match.
        hashed = users[name] if known else next(iter(users.values()))
        parts = (user, hashed, password, b"known" if known else b"unknown")
        fingerprint = hashlib.sha256(b":".join(p.hex().encode() for p in parts)).digest()
        verdict = self._recall(fingerprint)
        if verdict is None:
            async with self._turn_of(peer), self._one_at_a_time:
                verdict = self._recall(fingerprint)  # decided while this one waited
                if verdict is None:
                    if gone() or not self._in_force(name, hashed, known):
                        return False
                    try:
                        matched = await on_daemon_thread(
                            "bcrypt", functools.partial(checkpw, password, hashed)
                        )
                    except Exception:  # fail closed: no verdict is a refusal, this once
                        return False  # (no thread to be had: the next request checks)
                    verdict = matched and known
                    self._remember(fingerprint, verdict)
        return verdict and self._in_force(name, hashed, known)

    def _in_force(self, name: str, hashed: bytes, known: bool) -> bool:
        """Whether ``name`` still has ``hashed`` in force (an unknown user: True)."""
        return not known or self.users_in_force().get(name) == hashed

    @contextlib.asynccontextmanager
    async def _turn_of(self, peer: str) -> AsyncIterator[None]:
        """Wait until ``peer``'s earlier checks are done."""
        turn = self._turns.setdefault(peer, _Turn())
        turn.users += 1
        try:
            async with turn.lock:
                yield
        finally:
            turn.users -= 1
            if not turn.users:
                del self._turns[peer]

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
        """Answer 401 unless the request authenticates (or no user is in force);
        then call ``handler``."""
        if not self.users_in_force():
            return await handler(request)

        def gone() -> bool:
            transport = request.transport
            return transport is None or transport.is_closing()

        header = request.headers.get("Authorization")
        if not await self.check(header, peer=peer_of(request.remote), gone=gone):
            raise web.HTTPUnauthorized(text="Unauthorized\n", headers=CHALLENGE)
        return await handler(request)


def peer_of(remote: str | None) -> str:
    """Whose checks a request's is queued with: its IP address (an IPv4-mapped one
    as IPv4), the /64 of an IPv6 address (one host's share), else ``remote`` as is
    (empty on a Unix socket)."""
    try:
        address = ipaddress.ip_address(remote or "")
    except ValueError:
        return remote or ""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))
    return str(address)


def _decode(header: str | None) -> tuple[bytes, bytes] | None:
    """The user and password of a ``Basic`` header (its scheme in any case, as
    RFC 9110 and Go's net/http read it), or None."""
    if not header or header[:6].lower() != "basic ":
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True)
    except ValueError:  # binascii.Error, or a character outside ASCII (a 500 otherwise)
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None
