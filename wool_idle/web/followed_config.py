"""A daemon's config file followed as it changes: what ``live_config`` (the web
config) and ``live_client_config`` (the HTTP client config) share.

- at start the file is read once, as any daemon reads its configuration, and
  ``current`` is what it gives;
- the file is looked at again every ``RECHECK_INTERVAL``, read and parsed on a
  daemon thread (a request never waits for it, and SIGTERM never waits for a big
  file); a new version is loaded once two looks in a row found the same bytes, so
  a file caught while it is written is not loaded;
- ``reload_file`` (SIGHUP, ``POST /-/reload``) reads it at once, without a second
  look: its writer says it is whole;
- a version that does not load, or that the follower refuses (``_refusal``), is
  logged with its reason, each reason once until a version is put in force, and
  the last good config stays in force; the same bytes are tried again every
  ``FAILED_RETRY`` (a file it names may not be there yet), unless the refusal is
  for good;
- the line saying a version was reloaded is written before the version is put in
  force, so nothing uses it before the line naming it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import time
from collections.abc import Callable
from typing import ClassVar, Final, Generic, TypeVar

from wool_idle.daemon_thread import on_daemon_thread
from wool_idle.files import CONFIG_FILE_LIMIT, read_regular_file
from wool_idle.worker.tls import RECHECK_INTERVAL

FAILED_RETRY: Final = 10.0
"""Seconds before a version that did not load is tried again, its bytes unchanged."""
LOGGED_MAX: Final = 100
"""Reasons logged between two versions put in force; beyond them nothing is logged."""

Config = TypeVar("Config")


class FollowedConfig(Generic[Config]):
    """``current`` is the config in force: ``first`` for good, or (``_follow_file``)
    the file's, then each good new version of it while ``follow`` runs.

    A follower gives ``NAME`` (how the log names the file), ``log``, ``_parse`` (a
    version's config, raising ``ERROR`` if it does not load) and, for versions that
    load but must not be put in force, ``_refusal``.
    """

    NAME: ClassVar[str]
    ERROR: ClassVar[type[Exception]]
    log: ClassVar[logging.Logger]

    def __init__(self, first: Config) -> None:
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
        """When that version may be tried again (None: never)."""
        self._logged: set[str] = set()
        """The reasons logged since the last version put in force."""
        self._lock = asyncio.Lock()
        """Held by a look or a reload: an older version never follows a newer one."""

    def _follow_file(
        self,
        path: str,
        content: bytes,
        *,
        interval: float,
        retry: float,
        clock: Callable[[], float],
    ) -> None:
        """Follow ``path`` from now on (looked at every ``interval``, a refused version
        tried again after ``retry``, as ``clock`` counts); ``content`` is the version
        in force."""
        self.path, self._interval, self._retry, self._clock = path, interval, retry, clock
        self._loaded = self._last_seen = _fingerprint(content)

    @property
    def followed(self) -> bool:
        """Whether the config can change: it comes from a file."""
        return self.path is not None

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
        if good, else noted."""
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

    async def reload_file(self) -> str:
        """Read the file now and put its version in force if good, without a second
        look. Why the config in force stays (``PATH: reason``), or ``""``."""
        if self.path is None:
            return ""
        async with self._lock:
            content = await self._look()
            if content is not None:
                self._last_seen = _fingerprint(content)
                await self._take(content, self._last_seen)
        return f"{self.path}: {self._failure}" if self._failure else ""

    def _parse(self, content: bytes) -> Config:
        """The config of a version of the file (on a daemon thread); ``ERROR`` if it
        does not load."""
        raise NotImplementedError

    def _refusal(self, config: Config) -> str | None:
        """Why ``config``, which loaded, must not be put in force (for good: it is not
        tried again until the file changes); None when it may."""
        return None

    async def _look(self) -> bytes | None:
        """The file's bytes, read on a daemon thread; None (noted) if unreadable."""
        path = self.path
        assert path is not None
        try:
            return await on_daemon_thread(self.NAME, functools.partial(read_config_file, path))
        except OSError as error:
            self._last_seen = b""
            self._refused(str(error))
            return None

    async def _take(self, content: bytes, fingerprint: bytes) -> None:
        """Put the version read (``content``) in force unless it is already, does not
        load or is refused (noted)."""
        if fingerprint == self._loaded:  # the version in force (again, after a failure)
            self._settle_failure()
            return
        try:
            config = await on_daemon_thread(self.NAME, functools.partial(self._parse, content))
        except self.ERROR as error:
            self._refused(str(error), fingerprint)
            return
        except Exception as error:  # a failure not foreseen: refused all the same
            self._refused(f"unforeseen: {error!r}", fingerprint, traceback=True)
            return
        refusal = self._refusal(config)
        if refusal is not None:  # the same bytes are refused again: never tried again
            self._refused(refusal, fingerprint, retry=False)
            return
        self.log.info("%s reloaded: %s", self.NAME, self.path)  # said before it is used
        self.current, self._loaded = config, fingerprint
        self._settle_failure()

    def _retry_due(self) -> bool:
        """Whether the version refused last may be tried again."""
        return self._retry_at is not None and self._clock() >= self._retry_at

    def _settle_failure(self) -> None:
        """Forget the failures: the file holds the version in force."""
        if self._failure:
            self.log.info("%s back to the version in force: %s", self.NAME, self.path)
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
            self.log.warning(
                "keeping the %s loaded before: %s: %s",
                self.NAME,
                self.path,
                reason,
                exc_info=traceback,
            )
        self._failure = reason
        if fingerprint:
            self._failed_version = fingerprint
            self._retry_at = self._clock() + self._retry if retry else None


def read_config_file(path: str) -> bytes:
    """The file's bytes; ``OSError`` naming the file if it cannot be read."""
    try:
        return read_regular_file(path, limit=CONFIG_FILE_LIMIT)
    except OSError as error:
        raise OSError(f"cannot read {path!r}: {error.strerror or error}") from None


def _fingerprint(content: bytes) -> bytes:
    return hashlib.blake2b(content, digest_size=16).digest()
