"""``--web.config.file``: TLS and basic auth for the HTTP endpoints.

The format is Prometheus exporter-toolkit's web configuration file, so
operators reuse the files their Go exporters already read::

    tls_server_config:
      cert_file: server.crt            # paths relative to this file
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert
      client_ca_file: ca.crt
      min_version: TLS12
    basic_auth_users:
      prometheus: $2y$10$...           # bcrypt hash

The subset read here is strict: an unknown key, a missing file or a value
out of range is a ``WebConfigError`` at start, never a silent default.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

CLIENT_AUTH_TYPES: Final = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_VERSIONS: Final = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
TOP_KEYS: Final = frozenset({"tls_server_config", "basic_auth_users"})
TLS_KEYS: Final = frozenset(
    {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"}
)
BCRYPT_HASH: Final = re.compile(r"^\$2[abxy]\$(\d{2})\$[./A-Za-z0-9]{53}$")


class WebConfigError(ValueError):
    """The web configuration file is unreadable or invalid."""


@dataclass(frozen=True)
class WebConfig:
    """What the file asks for: a TLS context (or None) and bcrypt hashes by user."""

    ssl_context: ssl.SSLContext | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)


def load_web_config(path: str) -> WebConfig:
    """Read and validate ``path``; ``WebConfigError`` names what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise WebConfigError(f"cannot read {path!r}: {error}") from None
    return parse_web_config(text, Path(path).resolve().parent)


def parse_web_config(text: str, base: Path) -> WebConfig:
    """Parse the file's ``text``; relative paths are relative to ``base``."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise WebConfigError(f"not valid YAML: {str(error).splitlines()[0]}") from None
    if document is None:
        return WebConfig()
    if not isinstance(document, Mapping):
        raise WebConfigError("expected a mapping at the top level")
    _only(document, TOP_KEYS, "top level")
    tls = document.get("tls_server_config")
    return WebConfig(
        ssl_context=None if tls is None else _ssl_context(tls, base),
        users=_users(document.get("basic_auth_users") or {}),
    )


def _only(mapping: Mapping[Any, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(str(key) for key in mapping if key not in allowed)
    if unknown:
        raise WebConfigError(
            f"unsupported key(s) {', '.join(unknown)} in {where} "
            f"(supported: {', '.join(sorted(allowed))})"
        )


def _string(mapping: Mapping[str, Any], key: str, where: str) -> str | None:
    value = mapping.get(key)
    if value is not None and not isinstance(value, str):
        raise WebConfigError(f"{where}.{key} must be a string")
    return value


def _ssl_context(tls: Any, base: Path) -> ssl.SSLContext:
    where = "tls_server_config"
    if not isinstance(tls, Mapping):
        raise WebConfigError(f"{where} must be a mapping")
    _only(tls, TLS_KEYS, where)
    cert, key = _string(tls, "cert_file", where), _string(tls, "key_file", where)
    if not cert or not key:
        raise WebConfigError(f"{where} needs cert_file and key_file")
    auth_type = _string(tls, "client_auth_type", where) or "NoClientCert"
    if auth_type not in CLIENT_AUTH_TYPES:
        raise WebConfigError(
            f"{where}.client_auth_type {auth_type!r} is not one of {', '.join(CLIENT_AUTH_TYPES)}"
        )
    client_ca = _string(tls, "client_ca_file", where)
    if "Verify" in auth_type and not client_ca:
        raise WebConfigError(f"{where}.client_auth_type {auth_type} needs client_ca_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(base / cert, base / key)
        if client_ca:
            context.load_verify_locations(cafile=str(base / client_ca))
    except (OSError, ssl.SSLError) as error:
        raise WebConfigError(f"{where}: cannot load certificates: {error}") from None
    context.verify_mode = CLIENT_AUTH_TYPES[auth_type]
    for bound in ("min_version", "max_version"):
        version = _string(tls, bound, where)
        if version is None:
            continue
        if version not in TLS_VERSIONS:
            raise WebConfigError(
                f"{where}.{bound} {version!r} is not one of {', '.join(TLS_VERSIONS)}"
            )
        setattr(context, bound, TLS_VERSIONS[version])
    return context


def _users(users: Any) -> dict[str, bytes]:
    if not isinstance(users, Mapping):
        raise WebConfigError("basic_auth_users must be a mapping of user: bcrypt hash")
    hashes = {}
    for user, hashed in users.items():
        if not isinstance(user, str) or not user or ":" in user:
            raise WebConfigError(f"basic_auth_users: invalid user name {user!r}")
        if not isinstance(hashed, str) or not BCRYPT_HASH.match(hashed):
            raise WebConfigError(f"basic_auth_users.{user}: not a bcrypt hash")
        hashes[user] = hashed.encode()
    return hashes
