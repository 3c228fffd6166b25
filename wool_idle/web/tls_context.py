"""SSL contexts that follow their certificate files (cert-manager rotates them).

A ``ReloadingContext`` is the context handed to aiohttp (a server site or a
client connector). Each new connection asks it for an ``SSLObject``
(``wrap_bio``); it answers at once with the context built from the files as
they were last read. At most once per ``RECHECK_INTERVAL`` the files are read
again on a thread of their own (``followed``: the event loop never waits for a
file), and a new context is built only when their bytes changed. Files that
cannot be loaded (missing, unparsable, a key that does not fit its certificate
half way through a rotation) are logged once and the last good context is
kept; only the first build, at start, fails. ``force`` reads them at once
(SIGHUP, ``POST /-/reload``).

A ``ContextInForce`` is the server context of a web config that may change: each
connection uses the context of the config in force when it arrives.

OpenSSL is never handed the operator's paths: each file is read once, checked
to be a regular file, and OpenSSL loads an in-memory copy of those bytes
(``files.in_memory_file``), so a path swapped for a FIFO after the check
cannot hang the daemon, and the context is built from the bytes fingerprinted.
"""

from __future__ import annotations

import contextlib
import hashlib
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final, NamedTuple

from wool_idle.files import CONFIG_FILE_LIMIT, in_memory_file, read_regular_file
from wool_idle.followed import Followed
from wool_idle.web.handshake_garbage import HandshakeGarbage
from wool_idle.web.yaml_fields import ConfigFileError, Node, error_at, text
from wool_idle.worker.tls import RECHECK_INTERVAL

TLS_VERSIONS: Final = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
"""The version names of Prometheus's configuration files."""

Opened = Callable[[str], str]
"""The path OpenSSL is to load for one of the files: an in-memory copy of the bytes
read. Raises the ``OSError`` the file gave when it was read (missing, or refused:
not a regular file, too large), or why no copy could be made."""
Configure = Callable[[ssl.SSLContext, Opened], None]
"""Loads the files (each through ``Opened``) into a fresh context and sets it up;
raises ``OSError``, ``ssl.SSLError`` or ``ConfigFileError`` naming the file that is
wrong."""


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
    """The error for file ``path`` of ``key`` that could not be loaded (the one file
    the error names, when ``path`` lists two)."""
    if error.filename:
        path = str(error.filename)
    if isinstance(error, ssl.SSLError) and error.reason == "KEY_VALUES_MISMATCH":
        why = "the key does not fit the certificate"
    elif isinstance(error, ssl.SSLError):
        why = f"not valid PEM ({error.reason})" if error.reason else "not valid PEM, or encrypted"
    else:
        why = error.strerror or str(error)
    return ConfigFileError(f"{key} {path!r}: {why}")


class _Built(NamedTuple):
    """A context and the digest of the files it was built from."""

    fingerprint: bytes
    context: ssl.SSLContext


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
        self._built = Followed(
            self._build,
            what="TLS files",
            names=", ".join(repr(path) for path in dict.fromkeys(self._files)),
            interval=RECHECK_INTERVAL,
            clock=clock,
        )

    def current(self) -> ssl.SSLContext:
        """The context of the files as last read (a read starts on a thread of its
        own when the last one is ``RECHECK_INTERVAL`` old), or the last good one."""
        return self._built.current().context

    def force(self) -> str:
        """Read the files now, on this thread (``Followed.force``); why they did not
        load (the last good context kept), or ``""`` when they did."""
        return self._built.force()

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

    def _build(self, previous: _Built | None) -> _Built:
        """The context of the files as they are now (this one on the first build);
        ``previous`` itself when their bytes did not change."""
        contents = _read(self._files)
        digest = hashlib.blake2b(digest_size=16)
        for content in contents.values():
            digest.update(content if isinstance(content, bytes) else str(content).encode())
            digest.update(b"\0")
        fingerprint = digest.digest()
        if previous is not None and fingerprint == previous.fingerprint:
            return previous
        context = self if previous is None else ssl.SSLContext(self._method)
        with contextlib.ExitStack() as copies:

            def opened(path: str) -> str:
                content = contents[path]
                if isinstance(content, OSError):
                    raise content
                return copies.enter_context(in_memory_file(content))

            self._configure(context, opened)
        return _Built(fingerprint, context)


class ContextInForce(ssl.SSLContext):
    """A server ``ssl.SSLContext`` whose connections (asyncio asks ``wrap_bio`` for
    one per connection) use the context ``in_force`` names when they arrive."""

    def __new__(cls, in_force: Callable[[], ssl.SSLContext]) -> ContextInForce:
        return super().__new__(cls, ssl.PROTOCOL_TLS_SERVER)

    def __init__(self, in_force: Callable[[], ssl.SSLContext]) -> None:
        self._in_force = in_force
        self._garbage = HandshakeGarbage()

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        """A TLS connection over the context in force (``HandshakeGarbage`` counts it)."""
        self._garbage.new_connection()
        return self._in_force().wrap_bio(incoming, outgoing, server_side, server_hostname, session)


def _read(paths: Sequence[str]) -> Mapping[str, bytes | OSError]:
    """Each file's bytes (a regular file of at most ``CONFIG_FILE_LIMIT`` bytes), or
    why it cannot be read."""
    contents: dict[str, bytes | OSError] = {}
    for path in paths:
        try:
            contents[path] = read_regular_file(path, limit=CONFIG_FILE_LIMIT)
        except OSError as error:
            contents[path] = error
    return contents
