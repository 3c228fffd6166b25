"""The web config in force, following ``--web.config.file`` as it changes.

As exporter-toolkit does, the daemons follow their web config file without a
restart: a user added, removed or given a new hash, new response headers, new
TLS settings. Unlike exporter-toolkit, which answers 500 while its file is
invalid, a file that does not load keeps the last good config in force:

- the file is looked at again every ``RECHECK_INTERVAL``, read and parsed on a
  daemon thread (a request never waits for it, and SIGTERM never waits for a
  big file);
- a new version is loaded once two looks in a row found the same bytes, so a
  file caught while it is written is not loaded;
- a version that does not load (not YAML, a bad key or hash, a certificate
  that does not fit its key, the file gone) is logged once, with its reason,
  and the last good config stays in force; the same bytes are tried again
  every ``FAILED_RETRY`` (a certificate it names may not be there yet);
- a version that would let in what the config in force keeps out is refused
  the same way and takes a restart (see ``weakening``): turning TLS on or off
  (the listener was opened with or without it), turning basic auth off,
  asking less of client certificates, trusting the system's CAs instead of
  ``client_ca_file``, a lower least TLS version, cipher suites or key
  exchanges that were not allowed, a response header removed or emptied (and
  it is not tried again until the file changes). A writer that
  stops half way (a full disk, a killed ``cat >``) leaves a file that can
  only close the endpoints further (a header value cut short is the one thing
  taken as written);
- at start the file is read once, as any daemon reads its configuration;
- ``reload`` (SIGHUP, ``POST /-/reload``) reads it and its TLS files at once;
- new TLS settings apply to new connections; open connections keep theirs;
- the garbage of TLS handshakes that failed is collected as ``handshake_garbage``
  says.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import ssl
import time
from collections.abc import Callable
from typing import Final

from wool_idle.daemon_thread import on_daemon_thread
from wool_idle.files import CONFIG_FILE_LIMIT, read_regular_file
from wool_idle.web.config import WebConfig, WebConfigError, web_config_of
from wool_idle.web.tls_context import ContextInForce, ReloadingContext
from wool_idle.web.weakening import weakening
from wool_idle.worker.tls import RECHECK_INTERVAL

log = logging.getLogger(__name__)

FAILED_RETRY: Final = 10.0
"""Seconds before a version that did not load is tried again, its bytes unchanged."""
LOGGED_MAX: Final = 100
"""Reasons logged between two versions put in force; beyond them nothing is logged."""


class LiveWebConfig:
    """``current`` is the config in force: ``first`` for good, or (``load``) the
    file's, then each good new version of it while ``follow`` runs."""

    def __init__(self, first: WebConfig) -> None:
        self.current = first
        self.path: str | None = None
        self._interval = RECHECK_INTERVAL
        self._retry = FAILED_RETRY
        self._clock: Callable[[], float] = time.monotonic
        self._loaded = b""
        """The fingerprint of the version in force."""
        self._last_seen = b""
        """The fingerprint the previous look found (empty: it found none)."""
        self._failure = ""
        """Why the config in force stays though the file changed (empty: it does not)."""
        self._failed_version = b""
        """The fingerprint of the version last read and refused (empty: none)."""
        self._retry_at: float | None = None
        """When that version may be tried again (None: never, it is weaker)."""
        self._logged: set[str] = set()
        """The reasons logged since the last version put in force."""
        self._lock = asyncio.Lock()
        """Held by a look or a reload: an older version never follows a newer one."""

    @classmethod
    def load(
        cls,
        path: str,
        *,
        interval: float = RECHECK_INTERVAL,
        retry: float = FAILED_RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> LiveWebConfig:
        """The file's config, followed from now on (looked at every ``interval``, a
        refused version tried again after ``retry``, as ``clock`` counts);
        ``WebConfigError`` if it does not load."""
        try:
            content = _read(path)
        except OSError as error:
            raise WebConfigError(str(error)) from None
        live = cls(web_config_of(content, path))
        live.path, live._interval, live._retry, live._clock = path, interval, retry, clock
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
        return ContextInForce(self._tls_in_force)

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
            except Exception as error:  # fail safe: the last good config stays
                self._refused(f"unforeseen: {error!r}", traceback=True)

    async def recheck(self) -> None:
        """Look at the file once. A version this look and the previous one both found
        is loaded if it is not the one in force (or its retry is due): put in force
        if good and no weaker, else logged."""
        async with self._lock:
            content = await self._look()
            if content is None:
                return
            fingerprint = _fingerprint(content)
            settled, self._last_seen = fingerprint == self._last_seen, fingerprint
            if not settled:
                return
            if fingerprint == self._failed_version and not self._retry_due():
                return
            await self._take(content, fingerprint)

    async def reload(self) -> str:
        """Read the file now and put its version in force if good and no weaker,
        without a second look (SIGHUP, ``POST /-/reload``: its writer says it is
        whole), then the TLS files of the config in force (``ReloadingContext.force``),
        whether or not the file loaded. Why the file or its TLS files did not load
        (each naming its file; what was in force stays), or ``""`` when they did."""
        async with self._lock:
            content = await self._look()
            if content is not None:
                self._last_seen = _fingerprint(content)
                await self._take(content, self._last_seen)
        failures = [f"web config {self.path}: {self._failure}" if self._failure else ""]
        context = self.current.ssl_context
        if isinstance(context, ReloadingContext):  # read even when the file was refused
            failures.append(await on_daemon_thread("web config", context.force))
        return "; ".join(failure for failure in failures if failure)

    async def _look(self) -> bytes | None:
        """The file's bytes, read on a daemon thread; None (noted) if unreadable."""
        path = self.path
        assert path is not None
        try:
            return await on_daemon_thread("web config", functools.partial(_read, path))
        except OSError as error:
            self._last_seen = b""
            self._refused(str(error))
            return None

    async def _take(self, content: bytes, fingerprint: bytes) -> None:
        """Put the version read (``content``) in force unless it is already, does not
        load or is weaker (noted)."""
        if fingerprint == self._loaded:  # the version in force (again, after a failure)
            self._settle_failure()
            return
        try:
            config = await on_daemon_thread(
                "web config", functools.partial(web_config_of, content, self.path or "")
            )
        except WebConfigError as error:
            self._refused(str(error), fingerprint)
            return
        except Exception as error:  # a failure not foreseen: refused all the same
            self._refused(f"unforeseen: {error!r}", fingerprint, traceback=True)
            return
        weaker = weakening(self.current, config)
        if weaker is not None:  # the same bytes stay weaker: never tried again
            self._refused(f"{weaker} takes a restart", fingerprint, retry=False)
            return
        self.current, self._loaded = config, fingerprint
        self._settle_failure()
        log.info("web config reloaded: %s", self.path)

    def _retry_due(self) -> bool:
        """Whether the version refused last may be tried again."""
        return self._retry_at is not None and self._clock() >= self._retry_at

    def _settle_failure(self) -> None:
        """Forget the failures: the file holds the version in force."""
        if self._failure:
            log.info("web config file back to the version in force: %s", self.path)
        self._failure, self._failed_version = "", b""
        self._logged.clear()

    def _refused(
        self, reason: str, fingerprint: bytes = b"", *, retry: bool = True, traceback: bool = False
    ) -> None:
        """Note that the config in force stays, for ``reason``: logged (with the
        traceback being handled if ``traceback``) once until a version is put in
        force. A version read and refused (its ``fingerprint``) is tried again after
        the retry time if ``retry``; a look that read nothing leaves that as it was."""
        if reason not in self._logged and len(self._logged) < LOGGED_MAX:
            self._logged.add(reason)
            log.warning(
                "keeping the web config loaded before: %s: %s",
                self.path,
                reason,
                exc_info=traceback,
            )
        self._failure = reason
        if fingerprint:
            self._failed_version = fingerprint
            self._retry_at = self._clock() + self._retry if retry else None


def _read(path: str) -> bytes:
    """The file's bytes; ``OSError`` naming the file if it cannot be read."""
    try:
        return read_regular_file(path, limit=CONFIG_FILE_LIMIT)
    except OSError as error:
        raise OSError(f"cannot read {path!r}: {error.strerror or error}") from None


def _fingerprint(content: bytes) -> bytes:
    return hashlib.blake2b(content, digest_size=16).digest()
