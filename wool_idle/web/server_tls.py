"""``tls_server_config`` of a web configuration file, as exporter-toolkit reads it.

Keys: ``cert_file``, ``key_file``, ``client_auth_type``, ``client_ca_file``,
``cipher_suites``, ``curve_preferences``, ``min_version`` (default TLS12),
``max_version`` (default TLS13), ``prefer_server_cipher_suites`` (default
true). A section without a certificate, key, client auth type or client CA
means plain HTTP, as in exporter-toolkit.

Where Python's ``ssl`` differs from Go's ``crypto/tls``:

- a client certificate that is asked for is always verified (against
  ``client_ca_file``, else the system's CAs): ``RequestClientCert`` and
  ``RequireAnyClientCert`` cannot accept an unverified one;
- ``curve_preferences`` restricts key exchange to its first curve only;
- ``cipher_suites`` applies to TLS 1.2 and older (TLS 1.3's suites are not
  configurable, as in Go); a list of TLS 1.3 suites only allows TLS 1.3;
- ``max_version`` below ``min_version`` is an error (every handshake would fail).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from wool_idle.web.tls_context import Opened, ReloadingContext, load_failure, tls_version
from wool_idle.web.yaml_fields import (
    ConfigFileError,
    Node,
    boolean,
    error_at,
    fields,
    file_path,
    join,
    text,
    texts,
)
from wool_idle.worker.tls import load_key_pair

SECTION: Final = "tls_server_config"
KEYS: Final = frozenset(
    {
        "cert_file",
        "key_file",
        "client_auth_type",
        "client_ca_file",
        "cipher_suites",
        "curve_preferences",
        "min_version",
        "max_version",
        "prefer_server_cipher_suites",
    }
)
CLIENT_AUTH_TYPES: Final = {
    "": ssl.CERT_NONE,
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "RequireClientCert": ssl.CERT_REQUIRED,  # exporter-toolkit's older name
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
CIPHER_SUITES: Final = {
    # Go's names (tls.CipherSuites()) -> OpenSSL's; None: a TLS 1.3 suite.
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
}
CURVES: Final = {
    "CurveP256": "prime256v1",
    "CurveP384": "secp384r1",
    "CurveP521": "secp521r1",
    "X25519": "X25519",
}


@dataclass(frozen=True, kw_only=True)
class ServerTlsSettings:
    """What ``tls_server_config`` asks for, paths resolved."""

    cert_file: str
    key_file: str
    client_ca_file: str | None
    verify_mode: ssl.VerifyMode
    min_version: ssl.TLSVersion
    max_version: ssl.TLSVersion
    ciphers: tuple[str, ...]
    """OpenSSL names of the TLS 1.2 suites allowed (empty: OpenSSL's defaults)."""
    tls13_only: bool
    curve: str | None
    prefer_server_ciphers: bool

    @property
    def least_version(self) -> ssl.TLSVersion:
        """The lowest TLS version served (TLS 1.3 when only its suites are listed)."""
        return ssl.TLSVersion.TLSv1_3 if self.tls13_only else self.min_version

    def configure(self, context: ssl.SSLContext, opened: Opened) -> None:
        """Load the files (each through ``opened``) into ``context`` and set it up;
        ``ConfigFileError`` names the key whose file is wrong."""
        try:
            load_key_pair(context, opened(self.cert_file), opened(self.key_file))
        except (OSError, ssl.SSLError) as error:
            raise load_failure(
                f"{SECTION}.cert_file/key_file", f"{self.cert_file}, {self.key_file}", error
            ) from None
        context.verify_mode = self.verify_mode
        if self.client_ca_file:
            try:
                context.load_verify_locations(cafile=opened(self.client_ca_file))
            except (OSError, ssl.SSLError) as error:
                key = f"{SECTION}.client_ca_file"
                raise load_failure(key, self.client_ca_file, error) from None
        elif self.verify_mode != ssl.CERT_NONE:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = self.least_version
        context.maximum_version = self.max_version
        if self.ciphers:
            context.set_ciphers(":".join(self.ciphers))
        if self.curve:
            context.set_ecdh_curve(self.curve)
        if self.prefer_server_ciphers:
            context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        else:
            context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE


def server_tls_context(settings: ServerTlsSettings) -> ReloadingContext:
    """The context ``settings`` ask for, following its files; ``ConfigFileError``
    says which file is wrong."""
    files = [f for f in (settings.cert_file, settings.key_file, settings.client_ca_file) if f]
    return ReloadingContext(ssl.PROTOCOL_TLS_SERVER, configure=settings.configure, files=files)


def server_tls_settings(node: Node | None, base: Path) -> ServerTlsSettings | None:
    """What ``tls_server_config`` asks for (None: plain HTTP); relative paths are
    relative to ``base``. ``ConfigFileError`` says what is wrong."""
    found = fields(node, KEYS, SECTION)

    cert, key, client_ca = (
        file_path(found.get(name), join(SECTION, name), base)
        for name in ("cert_file", "key_file", "client_ca_file")
    )
    auth = text(found.get("client_auth_type"), join(SECTION, "client_auth_type")) or ""
    ciphers = [_cipher(found, name) for name in _names(found, "cipher_suites")]
    curves = [_curve(found, name) for name in _names(found, "curve_preferences")]
    low = tls_version(found.get("min_version"), join(SECTION, "min_version"))
    high = tls_version(found.get("max_version"), join(SECTION, "max_version"))
    prefer = boolean(
        found.get("prefer_server_cipher_suites"), join(SECTION, "prefer_server_cipher_suites")
    )
    if not (cert or key or auth or client_ca):
        return None
    if not cert or not key:
        raise ConfigFileError(f"{SECTION}: missing {'cert_file' if not cert else 'key_file'}")
    if auth not in CLIENT_AUTH_TYPES:
        known = ", ".join(name for name in CLIENT_AUTH_TYPES if name)
        raise ConfigFileError(f"{SECTION}.client_auth_type: {auth!r} is not one of {known}")
    if client_ca and CLIENT_AUTH_TYPES[auth] == ssl.CERT_NONE:
        raise ConfigFileError(
            f"{SECTION}.client_ca_file is given but client_auth_type asks for no client certificate"
        )
    low, high = low or ssl.TLSVersion.TLSv1_2, high or ssl.TLSVersion.TLSv1_3
    if high < low:
        raise ConfigFileError(f"{SECTION}: max_version is below min_version")
    return ServerTlsSettings(
        cert_file=cert,
        key_file=key,
        client_ca_file=client_ca,
        verify_mode=CLIENT_AUTH_TYPES[auth],
        min_version=low,
        max_version=high,
        ciphers=tuple(name for name in ciphers if name),
        tls13_only=bool(ciphers) and not any(ciphers),
        curve=curves[0] if curves else None,
        prefer_server_ciphers=True if prefer is None else prefer,
    )


def _names(found: dict[str, Node], key: str) -> list[str]:
    return texts(found.get(key), join(SECTION, key))


def _cipher(found: dict[str, Node], name: str) -> str | None:
    if name not in CIPHER_SUITES:
        raise error_at(found["cipher_suites"], f"{SECTION}.cipher_suites: unknown cipher {name!r}")
    return CIPHER_SUITES[name]


def _curve(found: dict[str, Node], name: str) -> str:
    if name not in CURVES:
        raise error_at(
            found["curve_preferences"],
            f"{SECTION}.curve_preferences: unknown curve {name!r} (use {', '.join(CURVES)})",
        )
    return CURVES[name]
