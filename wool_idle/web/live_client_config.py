"""The HTTP client config in force, following ``--http.config.file`` as it changes.

Prometheus reads its scrape configs' ``http_config`` again on reload; the
autoscaler follows its ``--http.config.file`` the way ``live_config`` follows
``--web.config.file``:

- the file is looked at again every ``RECHECK_INTERVAL``, read and parsed on a
  daemon thread; a new version is loaded once two looks in a row found the
  same bytes, so a file caught while it is written is not loaded;
- ``reload`` (SIGHUP, ``POST /-/reload``) reads it at once (its writer says it
  is whole), then the TLS files and the secret file of the config in force;
- a version that does not load (not YAML, a bad key, a file it names missing,
  credentials in both the source URL and the file) is logged once, naming the
  file and the line or key, and the last good config stays in force; the same
  bytes are tried again every ``FAILED_RETRY`` (a file it names may come later);
- the log line saying that it was reloaded is written before the new config is
  put in force (``followed``'s convention).

Unlike the web config, no version is refused as weaker: the client config
decides what the autoscaler sends to its source, and a version cut short at
worst sends wrong credentials (a refused read: nobody is stopped).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import time
from collections.abc import Callable
from typing import Final

from wool_idle.daemon_thread import on_daemon_thread
from wool_idle.files import CONFIG_FILE_LIMIT, read_regular_file
from wool_idle.web.client_config import ClientConfigError, HttpClientConfig, parse_client_config
from wool_idle.web.live_config import FAILED_RETRY
from wool_idle.web.tls_context import ReloadingContext
from wool_idle.web.yaml_fields import parse_config_content
from wool_idle.worker.tls import RECHECK_INTERVAL

log = logging.getLogger(__name__)

Adapt = Callable[[HttpClientConfig], HttpClientConfig]
"""What the daemon adds to each version of the file (the source URL's userinfo);
raises ``ClientConfigError`` when the version cannot take it."""
THREAD: Final = "http config"


class LiveClientConfig:
    """``current`` is the config in force: ``first`` for good, or (``load``) the
    file's, then each good new version of it while ``follow`` runs."""

    def __init__(self, first: HttpClientConfig) -> None:
        self.current = first
        self.path: str | None = None
        self._adapt: Adapt = _unchanged
        self._interval, self._retry = RECHECK_INTERVAL, FAILED_RETRY
        self._clock: Callable[[], float] = time.monotonic
        self._loaded = b""
        """The fingerprint of the version in force."""
        self._last_seen: bytes | None = None
        """The fingerprint the previous look found (None: it found none)."""
        self._failure = ""
        """Why the config in force stays though the file changed (empty: it does not)."""
        self._failed_version = b""
        self._retry_at = 0.0
        self._lock = asyncio.Lock()
        """Held by a look or a reload: an older version never follows a newer one."""

    @classmethod
    def load(
        cls,
        path: str,
        adapt: Adapt | None = None,
        *,
        interval: float = RECHECK_INTERVAL,
        retry: float = FAILED_RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> LiveClientConfig:
        """The file's config (through ``adapt``), followed from now on (looked at every
        ``interval``, a refused version tried again after ``retry``, as ``clock``
        counts); ``ClientConfigError`` if it does not load."""
        try:
            content = read_regular_file(path, limit=CONFIG_FILE_LIMIT)
        except OSError as error:
            raise ClientConfigError(f"cannot read {path!r}: {error}") from None
        adapt = adapt or _unchanged
        live = cls(adapt(_parse(content, path)))
        live.path, live._adapt, live._clock = path, adapt, clock
        live._interval, live._retry = interval, retry
        live._loaded = live._last_seen = _fingerprint(content)
        return live

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
        """Look at the file once: a version this look and the previous one both found
        is put in force if good and not in force already (a refused one only once its
        retry is due)."""
        async with self._lock:
            content = await self._look()
            if content is None:
                return
            fingerprint = _fingerprint(content)
            settled, self._last_seen = fingerprint == self._last_seen, fingerprint
            refused = fingerprint == self._failed_version and self._clock() < self._retry_at
            if settled and not refused:
                await self._take(content, fingerprint)

    async def reload(self) -> str:
        """Read the file now and put its version in force if good, then the TLS files
        and the secret file of the config in force, whether or not the file loaded.
        Why one did not load (naming its file; what was in force stays), or ``""``."""
        if self.path is not None:
            async with self._lock:
                content = await self._look()
                if content is not None:
                    self._last_seen = _fingerprint(content)
                    await self._take(content, self._last_seen)
        failures = [f"{self.path}: {self._failure}" if self._failure else ""]
        config = self.current
        if isinstance(config.ssl_context, ReloadingContext):
            failures.append(await on_daemon_thread(THREAD, config.ssl_context.force))
        if config.credentials is not None and config.credentials.secret.path is not None:
            try:
                await on_daemon_thread(THREAD, config.credentials.header)
            except OSError as error:
                failures.append(str(error))
        return "; ".join(failure for failure in failures if failure)

    async def _look(self) -> bytes | None:
        """The file's bytes, read on a daemon thread; None (noted) if unreadable."""
        path = self.path
        assert path is not None
        try:
            return await on_daemon_thread(
                THREAD, functools.partial(read_regular_file, path, limit=CONFIG_FILE_LIMIT)
            )
        except OSError as error:
            self._last_seen = None
            self._refused(f"cannot read it: {error.strerror or error}")
            return None

    async def _take(self, content: bytes, fingerprint: bytes) -> None:
        """Put the version read (``content``) in force unless it is already or does not
        load (noted)."""
        if fingerprint == self._loaded:
            self._settle()
            return
        try:
            parsed = await on_daemon_thread(THREAD, functools.partial(_parse, content, self.path))
            config = self._adapt(parsed)
        except ClientConfigError as error:
            self._refused(str(error), fingerprint)
            return
        except Exception as error:  # a failure not foreseen: refused all the same
            self._refused(f"unforeseen: {error!r}", fingerprint, traceback=True)
            return
        log.info("--http.config.file reloaded: %s", self.path)  # said before it is used
        self.current, self._loaded = config, fingerprint
        self._settle()

    def _settle(self) -> None:
        """Forget the failure: the file holds the version in force."""
        if self._failure:
            log.info("--http.config.file back to the version in force: %s", self.path)
        self._failure, self._failed_version = "", b""

    def _refused(self, reason: str, fingerprint: bytes = b"", *, traceback: bool = False) -> None:
        """Note that the config in force stays, for ``reason`` (logged once until it
        changes); a version read and refused (its ``fingerprint``) is tried again after
        the retry time."""
        if reason != self._failure:
            log.warning(
                "keeping the --http.config.file loaded before: %s: %s",
                self.path,
                reason,
                exc_info=traceback,
            )
        self._failure = reason
        if fingerprint:
            self._failed_version, self._retry_at = fingerprint, self._clock() + self._retry


def _parse(content: bytes, path: str | None) -> HttpClientConfig:
    """The config of the file's ``content``; ``ClientConfigError`` naming the key."""
    return parse_config_content(content, path or "", parse_client_config, ClientConfigError)


def _fingerprint(content: bytes) -> bytes:
    return hashlib.blake2b(content, digest_size=16).digest()


def _unchanged(config: HttpClientConfig) -> HttpClientConfig:
    return config
