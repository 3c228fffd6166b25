"""``tls_config`` of an HTTP client configuration, as Prometheus reads it.

Keys: ``ca_file`` (else the system's CAs), ``cert_file`` and ``key_file``
(together: a client certificate), ``server_name`` (sent as SNI and verified
instead of the URL's host), ``insecure_skip_verify``, ``min_version``,
``max_version``. The files are followed as they rotate (``tls_context``).
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
    fields,
    file_path,
    is_null,
    text,
)
from wool_idle.worker.tls import load_key_pair

SECTION: Final = "tls_config"
KEYS: Final = frozenset(
    {
        "ca_file",
        "cert_file",
        "key_file",
        "server_name",
        "insecure_skip_verify",
        "min_version",
        "max_version",
    }
)


@dataclass(frozen=True, kw_only=True)
class ClientTlsSettings:
    """What ``tls_config`` asks for, paths resolved."""

    ca_file: str | None
    cert_file: str | None
    key_file: str | None
    insecure_skip_verify: bool
    min_version: ssl.TLSVersion | None
    max_version: ssl.TLSVersion | None

    def configure(self, context: ssl.SSLContext, opened: Opened) -> None:
        """Load the files (each through ``opened``) into ``context`` and set it up;
        ``ConfigFileError`` names the key whose file is wrong."""
        if self.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        try:
            if self.ca_file:
                context.load_verify_locations(cafile=opened(self.ca_file))
            else:
                context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        except (OSError, ssl.SSLError) as error:
            raise load_failure(f"{SECTION}.ca_file", self.ca_file or "", error) from None
        if self.cert_file and self.key_file:
            try:
                load_key_pair(context, opened(self.cert_file), opened(self.key_file))
            except (OSError, ssl.SSLError) as error:
                pair = f"{self.cert_file}, {self.key_file}"
                raise load_failure(f"{SECTION}.cert_file/key_file", pair, error) from None
        if self.min_version:
            context.minimum_version = self.min_version
        if self.max_version:
            context.maximum_version = self.max_version


def client_tls_context(node: Node | None, base: Path) -> ReloadingContext | None:
    """The context ``tls_config`` asks for (None when absent); relative paths are
    relative to ``base``. ``ConfigFileError`` says what is wrong."""
    if is_null(node):
        return None
    found = fields(node, KEYS, SECTION)

    def path(key: str) -> str | None:
        return file_path(found.get(key), f"{SECTION}.{key}", base)

    settings = ClientTlsSettings(
        ca_file=path("ca_file"),
        cert_file=path("cert_file"),
        key_file=path("key_file"),
        insecure_skip_verify=bool(
            boolean(found.get("insecure_skip_verify"), f"{SECTION}.insecure_skip_verify")
        ),
        min_version=tls_version(found.get("min_version"), f"{SECTION}.min_version"),
        max_version=tls_version(found.get("max_version"), f"{SECTION}.max_version"),
    )
    if bool(settings.cert_file) != bool(settings.key_file):
        raise ConfigFileError(f"{SECTION}: cert_file and key_file go together")
    low, high = settings.min_version, settings.max_version
    if low and high and high < low:
        raise ConfigFileError(f"{SECTION}: max_version is below min_version")
    files = [f for f in (settings.ca_file, settings.cert_file, settings.key_file) if f]
    return ReloadingContext(
        ssl.PROTOCOL_TLS_CLIENT,
        configure=settings.configure,
        files=files,
        server_name=text(found.get("server_name"), f"{SECTION}.server_name") or None,
    )
