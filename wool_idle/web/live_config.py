"""The web config in force, following ``--web.config.file`` as it changes.

As exporter-toolkit does, the daemons follow their web config file without a
restart: a user added, removed or given a new hash, new response headers, new
TLS settings. Unlike exporter-toolkit, which answers 500 while its file is
invalid, a file that does not load keeps the last good config in force:

- the file is looked at again every ``RECHECK_INTERVAL`` (read and parsed on a
  thread, so a request never waits for it);
- a new version is loaded once two looks in a row found the same bytes, so a
  file caught half-written (truncated by ``>``, an editor saving in place)
  never serves, not even for a second: a version without its users or its
  ``client_auth_type`` line would open the endpoints. While the last attempt
  failed, each look tries again (it may name a certificate not there yet);
- a version that does not load (not YAML, a bad key or hash, a certificate
  that does not fit its key, the file gone) is logged once, with its reason,
  and the last good config stays in force;
- TLS cannot be turned on or off without a restart (the listener was opened
  with or without it): such a version is refused like an invalid one;
- new TLS settings apply to new connections; open connections keep theirs.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from collections.abc import Callable

from wool_idle.files import CONFIG_FILE_LIMIT, read_regular_file
from wool_idle.web.config import WebConfig, WebConfigError, web_config_of
from wool_idle.worker.tls import RECHECK_INTERVAL

log = logging.getLogger(__name__)


class LiveWebConfig:
    """``current`` is the config in force: ``first`` for good, or (``load``) the
    file's, then each good new version of it while ``follow`` runs."""

    def __init__(self, first: WebConfig, *, interval: float = RECHECK_INTERVAL) -> None:
        self.current = first
        self.path: str | None = None
        self._interval = interval
        self._loaded = b""
        """The fingerprint of the version in force."""
        self._last_seen = b""
        """The fingerprint the previous look found."""
        self._failure = ""

    @classmethod
    def load(cls, path: str, *, interval: float = RECHECK_INTERVAL) -> LiveWebConfig:
        """The file's config, followed from now on; ``WebConfigError`` if it does not load."""
        try:
            content = _read(path)
        except OSError as error:
            raise WebConfigError(str(error)) from None
        live = cls(web_config_of(content, path), interval=interval)
        live.path = path
        live._loaded = live._last_seen = _fingerprint(content)
        return live

    @property
    def followed(self) -> bool:
        """Whether the config can change (users and headers may come later)."""
        return self.path is not None

    def server_context(self) -> ssl.SSLContext | None:
        """The TLS context to serve with: each new connection gets the TLS context
        in force when it arrives. None when the config serves plain HTTP."""
        if self.current.ssl_context is None:
            return None
        return _ContextInForce(self._tls_in_force)

    def _tls_in_force(self) -> ssl.SSLContext:
        context = self.current.ssl_context
        assert context is not None  # a version that turns TLS off is refused
        return context

    async def follow(self) -> None:
        """Look at the file every interval and put each good new version in force,
        until cancelled (nothing else ends it)."""
        if self.path is None:
            return
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.recheck()
            except Exception:  # fail safe: the last good config stays, following goes on
                log.exception("keeping the web config loaded before: %s", self.path)

    async def recheck(self) -> None:
        """Look at the file once. A version this look and the previous one both found
        (not one being written) is loaded if it is not the one in force (or the last
        attempt failed): put in force if good, else logged."""
        path = self.path
        assert path is not None
        try:
            content = await asyncio.to_thread(_read, path)
        except OSError as error:
            self._refused(str(error))
            return
        fingerprint = _fingerprint(content)
        settled, self._last_seen = fingerprint == self._last_seen, fingerprint
        if not settled or (fingerprint == self._loaded and not self._failure):
            return
        try:
            config = await asyncio.to_thread(web_config_of, content, path)
        except WebConfigError as error:
            self._refused(str(error))
            return
        if (config.ssl_context is None) != (self.current.ssl_context is None):
            self._refused("TLS can only be turned on or off by a restart")
            return
        self.current, self._loaded, self._failure = config, fingerprint, ""
        log.info("web config reloaded: %s", path)

    def _refused(self, reason: str) -> None:
        if reason != self._failure:
            log.warning("keeping the web config loaded before: %s: %s", self.path, reason)
        self._failure = reason


def _read(path: str) -> bytes:
    """The file's bytes; ``OSError`` naming the file if it cannot be read."""
    try:
        return read_regular_file(path, limit=CONFIG_FILE_LIMIT)
    except OSError as error:
        raise OSError(f"cannot read {path!r}: {error.strerror or error}") from None


def _fingerprint(content: bytes) -> bytes:
    return hashlib.blake2b(content, digest_size=16).digest()


class _ContextInForce(ssl.SSLContext):
    """A server ``ssl.SSLContext`` whose connections (asyncio asks ``wrap_bio`` for
    one per connection) use the context ``in_force`` names when they arrive."""

    def __new__(cls, in_force: Callable[[], ssl.SSLContext]) -> _ContextInForce:
        return super().__new__(cls, ssl.PROTOCOL_TLS_SERVER)

    def __init__(self, in_force: Callable[[], ssl.SSLContext]) -> None:
        self._in_force = in_force

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        """A TLS connection over the context in force."""
        return self._in_force().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
