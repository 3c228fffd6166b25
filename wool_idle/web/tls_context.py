"""SSL contexts that follow their certificate files (cert-manager rotates them).

A ``ReloadingContext`` is the context handed to aiohttp (a server site or a
client connector). Each new connection asks it for an ``SSLObject``
(``wrap_bio``); it answers with a context built from the files as they are
now. The files are looked at again at most once per ``RECHECK_INTERVAL``,
and a new context is built only when their bytes changed. Files that cannot
be loaded (missing, unparsable, a key that does not fit its certificate half
way through a rotation) are logged once and the last good context is kept;
only the first build, at start, fails.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Final

from wool_idle.files import CONFIG_FILE_LIMIT, FileRefused, read_regular_file
from wool_idle.web.yaml_fields import ConfigFileError, Node, error_at, text
from wool_idle.worker.tls import RECHECK_INTERVAL

log = logging.getLogger(__name__)

TLS_VERSIONS: Final = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
"""The version names of Prometheus's configuration files."""

Configure = Callable[[ssl.SSLContext], None]
"""Loads the files into a fresh context and sets it up; raises ``OSError``,
``ssl.SSLError`` or ``ConfigFileError`` naming the file that is wrong."""


def tls_version(node: Node | None, where: str) -> ssl.TLSVersion | None:
    """The TLS version ``node`` names (``TLS12``), or None when null."""
    name = text(node, where)
    if name is None:
        return None
    if name not in TLS_VERSIONS:
        assert node is not None
        known = ", ".join(TLS_VERSIONS)
        raise error_at(node, f"{where}: unknown TLS version {name!r} (use {known})")
    return TLS_VERSIONS[name]


def load_failure(key: str, path: str, error: OSError | ssl.SSLError) -> ConfigFileError:
    """The error for file ``path`` of ``key`` that could not be loaded."""
    if isinstance(error, ssl.SSLError) and error.reason == "KEY_VALUES_MISMATCH":
        why = "the key does not fit the certificate"
    elif isinstance(error, ssl.SSLError):
        why = "not valid PEM" + (f" ({error.reason})" if error.reason else "")
    else:
        why = error.strerror or str(error)
    return ConfigFileError(f"{key} {path!r}: {why}")


class ReloadingContext(ssl.SSLContext):
    """An ``ssl.SSLContext`` whose connections use ``files`` as they are now.

    ``configure`` sets up this context at construction (its failure propagates)
    and every context built later. A client's ``server_name``, when given,
    replaces the host name of every connection (SNI and verification).
    """

    def __new__(cls, protocol: int, **kwargs: object) -> ReloadingContext:
        return super().__new__(cls, protocol)

    def __init__(
        self,
        protocol: int,
        *,
        configure: Configure,
        files: Sequence[str],
        server_name: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._method = protocol
        self._configure = configure
        self._files = tuple(files)
        self._server_name = server_name
        self._clock = clock
        try:  # a file refused (a FIFO) is a ConfigFileError before OpenSSL opens it
            fingerprint = self._fingerprint()
        except OSError:
            fingerprint = b""  # configure names the file that cannot be read
        configure(self)
        self._built_from = fingerprint
        self._current: ssl.SSLContext = self
        self._checked = clock()
        self._failure = ""

    def current(self) -> ssl.SSLContext:
        """The context of the files as of at most ``RECHECK_INTERVAL`` ago, or the last good one."""
        now = self._clock()
        if now - self._checked < RECHECK_INTERVAL:
            return self._current
        self._checked = now
        try:
            fingerprint = self._fingerprint()
            if fingerprint != self._built_from:
                fresh = ssl.SSLContext(self._method)
                self._configure(fresh)
                self._current, self._built_from = fresh, fingerprint
                log.info("TLS files reloaded: %s", ", ".join(self._files))
            self._failure = ""
        except (OSError, ssl.SSLError, ValueError) as error:
            if str(error) != self._failure:
                self._failure = str(error)
                log.warning("keeping the TLS files loaded before: %s", error)
        return self._current

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        """A TLS connection (asyncio asks for one per connection) over the current context."""
        context = self.current()
        hostname = self._server_name or server_hostname
        if context is self:
            return super().wrap_bio(incoming, outgoing, server_side, hostname, session)
        return context.wrap_bio(incoming, outgoing, server_side, hostname, session)

    def _fingerprint(self) -> bytes:
        """A digest of the files' bytes. ``OSError`` names a file that cannot be
        read; ``ConfigFileError`` one that is refused (a FIFO or a device would
        block or exhaust OpenSSL, which opens the files itself)."""
        digest = hashlib.blake2b(digest_size=16)
        for path in self._files:
            try:
                digest.update(read_regular_file(path, limit=CONFIG_FILE_LIMIT))
            except FileRefused as error:
                raise ConfigFileError(f"cannot read {path!r}: {error.strerror}") from None
            except OSError as error:
                raise OSError(f"cannot read {path!r}: {error.strerror}") from None
            digest.update(b"\0")
        return digest.digest()
