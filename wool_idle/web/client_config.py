"""``--http.config.file``: how the autoscaler's HTTP client authenticates.

The format is Prometheus's HTTP client configuration (the ``http_config`` of
a scrape config, as Prometheus 2.42 reads it), so the file that lets
Prometheus scrape a protected exporter lets the autoscaler read it::

    basic_auth:                      # or authorization, or bearer_token(_file)
      username: autoscaler
      password_file: autoscaler.pw   # read again for every request
    authorization:
      type: Bearer                   # the default
      credentials_file: token        # or credentials
    tls_config:                      # see client_tls for every key
      ca_file: ca.crt                # paths relative to this file
      cert_file: client.crt
      key_file: client.key
    follow_redirects: true           # the default
    enable_http2: true               # accepted; aiohttp speaks HTTP/1.1 only

Read strictly (see ``yaml_fields``): an unknown key, a key given twice, two
keys that exclude each other, or a file that cannot be read is a
``ClientConfigError`` naming the key (at start; the file is followed, see
``live_client_config``). ``oauth2``, ``proxy_url`` and
``proxy_connect_header`` are Prometheus keys wool-idle does not implement:
they are refused, never ignored. A ``*_file`` secret is read again for every
request (surrounding blanks dropped), as Prometheus does; the TLS files are
followed as they rotate (``tls_context``).
"""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from wool_idle.files import CONFIG_FILE_LIMIT, read_regular_file
from wool_idle.web.client_tls import client_tls_context
from wool_idle.web.yaml_fields import (
    ConfigFileError,
    Node,
    boolean,
    fields,
    is_null,
    join,
    parse_document,
    text,
)

TOP_KEYS: Final = frozenset(
    {
        "basic_auth",
        "authorization",
        "bearer_token",
        "bearer_token_file",
        "tls_config",
        "follow_redirects",
        "enable_http2",
        "oauth2",
        "proxy_url",
        "proxy_connect_header",
    }
)
NOT_IMPLEMENTED: Final = ("oauth2", "proxy_url", "proxy_connect_header")
AUTH_KEYS: Final = ("basic_auth", "authorization", "bearer_token", "bearer_token_file")
"""The ways to authenticate; at most one may be given (bearer_token* are the legacy
spelling of ``authorization``)."""
BASIC_KEYS: Final = frozenset({"username", "password", "password_file"})
AUTHORIZATION_KEYS: Final = frozenset({"type", "credentials", "credentials_file"})


class ClientConfigError(ValueError):
    """The HTTP client configuration file is unreadable or invalid."""


@dataclass(frozen=True)
class Secret:
    """A secret given inline (``value``) or in a file (``path``) read on every use;
    ``key`` names it in errors, never its content."""

    key: str
    value: str = field(default="", repr=False)
    path: str | None = None

    def read(self) -> str:
        """The secret now; ``OSError`` naming the key and the file if unreadable."""
        if self.path is None:
            return self.value
        try:
            return read_regular_file(self.path, limit=CONFIG_FILE_LIMIT).decode("utf-8").strip()
        except UnicodeDecodeError:  # its text would show a byte of the secret, and where
            raise OSError(f"cannot read {self.key} {self.path!r}: not UTF-8 text") from None
        except OSError as error:
            why = error.strerror or str(error)
            raise OSError(f"cannot read {self.key} {self.path!r}: {why}") from None


@dataclass(frozen=True)
class Credentials:
    """The ``Authorization`` header: ``Basic`` with ``username`` and ``secret`` as
    the password, or ``scheme`` followed by ``secret``."""

    scheme: str
    secret: Secret
    username: str = ""

    def header(self) -> str:
        """The header's value now (files read again); ``OSError`` if unreadable."""
        if self.scheme == "Basic":
            pair = f"{self.username}:{self.secret.read()}".encode()
            return "Basic " + base64.b64encode(pair).decode("ascii")
        return f"{self.scheme} {self.secret.read()}"


@dataclass(frozen=True, kw_only=True)
class HttpClientConfig:
    """What the file asks for. ``ssl_context`` is None without ``tls_config``
    (the system's CAs verify servers). (``enable_http2`` is checked, and changes
    nothing: aiohttp speaks HTTP/1.1 only.)"""

    credentials: Credentials | None = None
    ssl_context: ssl.SSLContext | None = None
    follow_redirects: bool = True


def parse_client_config(content: str, base: Path) -> HttpClientConfig:
    """Parse the file's ``content``; relative paths are relative to ``base``."""
    try:
        top = fields(parse_document(content), TOP_KEYS, "")
        for key in NOT_IMPLEMENTED:
            if key in top:
                raise ConfigFileError(f"{key} is not supported by wool-idle")
        follow = boolean(top.get("follow_redirects"), "follow_redirects")
        boolean(top.get("enable_http2"), "enable_http2")  # checked; HTTP/1.1 either way
        return HttpClientConfig(
            credentials=_credentials(top, base),
            ssl_context=client_tls_context(top.get("tls_config"), base),
            follow_redirects=True if follow is None else follow,
        )
    except ConfigFileError as error:
        raise ClientConfigError(str(error)) from None


def _credentials(top: dict[str, Node], base: Path) -> Credentials | None:
    given = [key for key in AUTH_KEYS if not is_null(top.get(key))]
    if len({key.removesuffix("_file") for key in given}) > 1:
        raise ConfigFileError(f"{' and '.join(given)}: give at most one way to authenticate")
    if "basic_auth" in given:
        found = fields(top["basic_auth"], BASIC_KEYS, "basic_auth")
        username = text(found.get("username"), "basic_auth.username") or ""
        return Credentials("Basic", _secret(found, "basic_auth", "password", base), username)
    if "authorization" in given:
        found = fields(top["authorization"], AUTHORIZATION_KEYS, "authorization")
        scheme = text(found.get("type"), "authorization.type") or "Bearer"
        if scheme.lower() == "basic":
            raise ConfigFileError("authorization.type cannot be Basic: use basic_auth")
        return Credentials(scheme, _secret(found, "authorization", "credentials", base))
    if given:
        return Credentials("Bearer", _secret(top, "", "bearer_token", base))
    return None


def _secret(found: dict[str, Node], where: str, key: str, base: Path) -> Secret:
    """The secret of ``key`` or ``key_file`` in ``found`` (not both); a file must
    be readable now."""
    inline = text(found.get(key), join(where, key))
    relative = text(found.get(f"{key}_file"), join(where, f"{key}_file"))
    if inline is not None and relative is not None:
        raise ConfigFileError(f"{join(where, key)} and {join(where, key + '_file')}: give one")
    if relative is None:
        return Secret(join(where, key), value=inline or "")
    secret = Secret(join(where, f"{key}_file"), path=str(base / relative))
    try:
        secret.read()
    except OSError as error:
        raise ConfigFileError(str(error)) from None
    return secret
