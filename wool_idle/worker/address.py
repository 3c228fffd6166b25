"""Worker addresses: ``host:port``, ``[v6-host]:port`` or ``unix:/path``."""

from __future__ import annotations

import ipaddress
import re
from typing import Final

UNIX_PREFIX: Final = "unix:"
_HOSTNAME: Final = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_-]{1,63})*\.?$"
)


def parse_address(text: str, *, listen: bool = False) -> str:
    """Return ``text`` if it is a valid worker address, else raise ``ValueError``.

    TCP addresses need a port in 1..65535 (``listen=True`` also allows 0, an
    ephemeral port). Unix socket addresses need a non-empty path.
    """
    if text.startswith(UNIX_PREFIX):
        if not text[len(UNIX_PREFIX) :].strip("/"):
            raise ValueError(f"invalid address {text!r}: unix socket path is empty")
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"invalid address {text!r}: expected host:port or unix:/path")
    _check_host(text, host)
    if not port.isdigit() or not (0 if listen else 1) <= int(port) <= 65535:
        raise ValueError(f"invalid address {text!r}: port must be a number in 1..65535")
    return text


def _check_host(text: str, host: str) -> None:
    """Raise ``ValueError`` unless ``host`` is a bracketed IPv6, an IPv4 or a hostname."""
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"invalid address {text!r}: bad IPv6 host") from None
        return
    if ":" in host or not _HOSTNAME.match(host):
        raise ValueError(f"invalid address {text!r}: bad host {host!r}")
