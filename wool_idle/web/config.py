"""``--web.config.file``: TLS, basic auth and response headers for the HTTP endpoints.

The format is Prometheus exporter-toolkit's web configuration file, so
operators reuse the files their Go exporters already read::

    tls_server_config:                 # see server_tls for every key
      cert_file: server.crt            # paths relative to this file
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert
      client_ca_file: ca.crt
    http_server_config:
      http2: false                     # accepted; aiohttp serves HTTP/1.1 only
      headers:
        Strict-Transport-Security: max-age=31536000
    basic_auth_users:
      prometheus: $2y$10$...           # bcrypt hash

The file is read as exporter-toolkit reads it, strictly (see
``yaml_fields``): an unknown key, a key given twice, a header exporter-toolkit
does not allow, a missing file or a value out of range is a
``WebConfigError`` at start, never a silent default. A bcrypt hash must be one
bcrypt can check: a cost of 4..31 (as promtool says) and a salt bcrypt reads.
Cost 31 is legal and absurd: the daemon starts, and each new login takes what
bcrypt takes at that cost (days). The daemons follow the file as it changes
(``live_config``), and the certificate files it names as they rotate
(``tls_context``).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import bcrypt

from wool_idle.contract import encodes_as_utf8
from wool_idle.web.server_tls import ServerTlsSettings, server_tls_context, server_tls_settings
from wool_idle.web.yaml_fields import (
    ConfigFileError,
    Node,
    boolean,
    entries,
    error_at,
    fields,
    parse_config_content,
    parse_document,
    text,
    text_map,
)
from wool_idle.worker.address import CONTROL_CHARACTER

TOP_KEYS: Final = frozenset({"tls_server_config", "http_server_config", "basic_auth_users"})
HTTP_KEYS: Final = frozenset({"http2", "headers"})
HEADERS: Final[Mapping[str, tuple[str, ...] | None]] = {
    # exporter-toolkit's headers (names as written) and their allowed values (None: any).
    "Strict-Transport-Security": None,
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}
BCRYPT_HASH: Final = re.compile(r"\$2[abxy]\$(\d\d)\$[./A-Za-z0-9]{53}\Z")
BCRYPT_COSTS: Final = range(4, 32)


class WebConfigError(ValueError):
    """The web configuration file is unreadable or invalid."""


@dataclass(frozen=True)
class WebConfig:
    """What the file asks for: TLS (or None) and the context serving it, bcrypt
    hashes by user, and headers for every response. (``http2`` is checked, and
    changes nothing: see ``site``.)"""

    tls: ServerTlsSettings | None = None
    ssl_context: ssl.SSLContext | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)


def web_config_of(content: bytes, path: str) -> WebConfig:
    """Validate ``content``, the bytes read from the file at ``path``;
    ``WebConfigError`` names what is wrong."""
    return parse_config_content(content, path, parse_web_config, WebConfigError)


def parse_web_config(content: str, base: Path) -> WebConfig:
    """Parse the file's ``content``; relative paths are relative to ``base``."""
    try:
        top = fields(parse_document(content), TOP_KEYS, "")
        http = fields(top.get("http_server_config"), HTTP_KEYS, "http_server_config")
        boolean(http.get("http2"), "http_server_config.http2")  # checked; HTTP/1.1 either way
        tls = server_tls_settings(top.get("tls_server_config"), base)
        return WebConfig(
            users=_users(top.get("basic_auth_users")),
            headers=_headers(http.get("headers")),
            tls=tls,
            ssl_context=None if tls is None else server_tls_context(tls),
        )
    except ConfigFileError as error:
        raise WebConfigError(str(error)) from None


def _users(node: Node | None) -> dict[str, bytes]:
    hashes = {}
    for user, value in entries(node, "basic_auth_users").items():
        hashed = text(value, f"basic_auth_users.{user}") or ""
        match = BCRYPT_HASH.match(hashed)
        if match is None:
            raise error_at(value, f"basic_auth_users.{user}: not a bcrypt hash")
        if int(match.group(1)) not in BCRYPT_COSTS:
            raise error_at(value, f"basic_auth_users.{user}: bcrypt cost outside 4..31")
        if not _bcrypt_reads(hashed):
            raise error_at(value, f"basic_auth_users.{user}: bcrypt cannot read this hash")
        hashes[user] = hashed.encode()
    return hashes


def _bcrypt_reads(hashed: str) -> bool:
    """Whether bcrypt can check a password against ``hashed`` (a well-formed hash).

    Its salt's last character carries 2 bits of 6: bcrypt refuses one whose unused
    bits are set, while Go's bcrypt (promtool) ignores them, so such a hash would
    fail every login. Asked of bcrypt itself, on the same hash at the least cost
    (the cost changes nothing of this, and the least takes a millisecond).
    """
    try:
        bcrypt.checkpw(b"", f"{hashed[:4]}04{hashed[6:]}".encode())
    except ValueError:
        return False
    return True


def _headers(node: Node | None) -> dict[str, str]:
    headers = text_map(node, "http_server_config.headers")
    for name, value in headers.items():
        where = f"http_server_config.headers.{name}"
        if name not in HEADERS:
            raise ConfigFileError(f"{where}: header {name!r} can not be configured")
        allowed = HEADERS[name]
        if allowed is not None and value not in allowed:
            raise ConfigFileError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
        if CONTROL_CHARACTER.search(value):
            raise ConfigFileError(f"{where}: control character in the value")
        if not value.isascii() and not encodes_as_utf8(value):
            raise ConfigFileError(f"{where}: the value is not valid Unicode")
    return headers
