"""TLS settings for worker servers and worker clients, loaded from PEM files.

Certificates rotate: the files are read again so that new handshakes use them
as they are now (``followed``). A server reads its files again before every
handshake (gRPC's dynamic server credentials ask from gRPC's own threads); a
client's channel pool has them read again on a thread of their own at most
once per ``RECHECK_INTERVAL``, and opens a new channel once they changed.
Files that are missing, unparsable or mismatched (a key that does not fit its
certificate, say half-way through a rotation) are logged and the last good
ones kept; only the first load fails.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import grpc

from wool_idle.files import CONFIG_FILE_LIMIT, in_memory_file, read_regular_file
from wool_idle.followed import Followed

UTF8_BOM: Final = b"\xef\xbb\xbf"
RECHECK_INTERVAL: Final = 1.0
"""Seconds a client waits before it looks at the same TLS files again."""


def load_key_pair(context: ssl.SSLContext, cert: str, key: str) -> None:
    """Load the certificate chain in file ``cert`` and its key in file ``key`` into
    ``context``. An encrypted key is an ``ssl.SSLError``: asked for no password,
    OpenSSL would prompt for one on the terminal and wait there."""
    context.load_cert_chain(cert, key, password=b"")


def read_pem(path: str | Path, what: str) -> bytes:
    """Return the PEM text of ``path`` (a regular file of at most ``CONFIG_FILE_LIMIT``
    bytes) as gRPC takes it: a leading UTF-8 byte order mark (an editor's) removed,
    which OpenSSL would skip but gRPC refuses. ``OSError`` names ``what`` and the
    path, for a file that cannot be read or holds a NUL byte (not PEM text: gRPC
    would refuse it at the handshake, after every check had passed)."""
    try:
        content = read_regular_file(path, limit=CONFIG_FILE_LIMIT)
    except OSError as error:
        raise OSError(f"cannot read {what} {str(path)!r}: {error.strerror}") from None
    if b"\0" in content:
        raise OSError(f"invalid {what} {str(path)!r}: a NUL byte, so not PEM text")
    return content.removeprefix(UTF8_BOM)


@dataclass(frozen=True)
class PemSet:
    """The contents of one TLS setting's files, read together: a CA bundle and
    a certificate chain with its key, each absent when not configured."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None


@dataclass(frozen=True)
class PemPaths:
    """Where a ``PemSet`` comes from; ``ca_role`` names the CA file in errors."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    ca_role: str = "CA"

    def load(self, previous: PemSet | None = None) -> PemSet:
        """Read the files and check that they parse and that the key fits the
        certificate; ``OSError`` names the file otherwise. ``previous`` itself when
        they hold the same bytes (a ``followed`` load)."""
        first = self._read()
        if first == previous:
            return previous
        self._check(first)
        if self._read() != first:
            raise OSError(f"TLS files changed while being read: {self.describe()}")
        return first

    def followed(
        self, interval: float, clock: Callable[[], float] = time.monotonic
    ) -> Followed[PemSet]:
        """The files, loaded now (``OSError`` if they do not load) and followed."""
        names = self.describe()
        return Followed(self.load, what="TLS files", names=names, interval=interval, clock=clock)

    def _read(self) -> PemSet:
        return PemSet(
            ca=read_pem(self.ca_file, self.ca_role) if self.ca_file else None,
            cert=read_pem(self.cert_file, "TLS certificate") if self.cert_file else None,
            key=read_pem(self.key_file, "TLS key") if self.key_file else None,
        )

    def _check(self, pems: PemSet) -> None:
        """``OSError`` naming the file unless each parses and the key fits the
        certificate. OpenSSL loads in-memory copies of the bytes read (``files``)."""
        if pems.cert is not None and pems.key is not None:
            pair = f"TLS certificate {self.cert_file!r} or key {self.key_file!r}"
            try:
                with in_memory_file(pems.cert) as cert, in_memory_file(pems.key) as key:
                    load_key_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), cert, key)
            except ssl.SSLError as error:
                why = (
                    "the key does not fit the certificate"
                    if error.reason == "KEY_VALUES_MISMATCH"
                    else "not a PEM certificate chain and its unencrypted key"
                )
                raise OSError(f"invalid {pair}: {why}") from None
            except OSError as error:
                raise OSError(f"cannot check {pair}: {error}") from None
        if pems.ca is not None:
            try:
                with in_memory_file(pems.ca) as ca:
                    ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=ca)
            except OSError as error:  # ssl.SSLError too
                raise OSError(f"invalid {self.ca_role} {self.ca_file!r}: {error}") from None

    def describe(self) -> str:
        """The configured file names, for logs."""
        return ", ".join(repr(p) for p in (self.ca_file, self.cert_file, self.key_file) if p)


@dataclass(frozen=True, kw_only=True)
class ServerTls:
    """A worker's certificate and key; with ``client_ca``, clients must present
    a certificate signed by it (mutual TLS)."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """Load the files and build gRPC server credentials that read them again
        before every handshake. ``OSError`` names a bad file."""
        paths = PemPaths(self.client_ca_file, self.cert_file, self.key_file, ca_role="client CA")
        files = paths.followed(interval=0.0)
        served = files.value

        def fetch() -> grpc.ServerCertificateConfiguration | None:
            nonlocal served
            pems = files.reload()
            if pems is served:
                return None
            served = pems
            return _server_configuration(pems)

        return grpc.dynamic_ssl_server_credentials(
            _server_configuration(served),
            fetch,
            require_client_authentication=self.client_ca_file is not None,
        )


def _server_configuration(pems: PemSet) -> grpc.ServerCertificateConfiguration:
    assert pems.key is not None and pems.cert is not None
    return grpc.ssl_server_certificate_configuration([(pems.key, pems.cert)], pems.ca)


@dataclass(frozen=True, kw_only=True)
class ClientTls:
    """How a client verifies workers (``ca_file``, else the system roots) and,
    for mutual TLS, the certificate it presents. Hashable, so it keys the
    channel pool."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("a client certificate needs both cert_file and key_file")

    def paths(self) -> PemPaths:
        """The files this setting reads."""
        return PemPaths(self.ca_file, self.cert_file, self.key_file)

    def credentials(self, pems: PemSet | None = None) -> grpc.ChannelCredentials:
        """gRPC channel credentials from ``pems`` (by default, the files loaded now)."""
        if pems is None:
            pems = self.paths().load()
        return grpc.ssl_channel_credentials(
            root_certificates=pems.ca, private_key=pems.key, certificate_chain=pems.cert
        )

    def channel_options(self) -> list[tuple[str, str]]:
        """The channel options this setting needs (the server-name override)."""
        if self.server_name is None:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]
