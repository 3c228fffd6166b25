"""Worker addresses: ``host:port``, ``[v6-host]:port`` or ``unix:/path``."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from typing import Final

UNIX_PREFIX: Final = "unix:"
MAX_UNIX_PATH_BYTES: Final = 107
"""The longest Unix socket path: ``sun_path`` holds 108 bytes with the final NUL.
A longer one can be neither bound nor connected to."""
_HOSTNAME: Final = re.compile(
    r"(?=.{1,253}\Z)[A-Za-z0-9_][A-Za-z0-9_-]{0,62}(\.[A-Za-z0-9_-]{1,63})*\.?", re.ASCII
)
_PORT: Final = re.compile(r"[0-9]{1,5}", re.ASCII)
URI_DELIMITERS: Final = re.compile(r"[%?#]")
"""What gRPC reads in a ``unix:`` path as URI syntax: ``%`` escapes (decoded), and
``?`` or ``#`` ending the path (a query, a fragment) when it dials."""
LISTEN_SCHEMES: Final = frozenset({"unix-abstract", "vsock"})
"""Hosts a gRPC server reads as a scheme when it listens on ``host:port``: it would
bind the abstract Unix socket ``port`` (which any local user may bind first) or a
vsock, where no client dials (see ``dial_target``)."""
CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x1f\x7f]")
"""An ASCII control character (a newline, a NUL): in no address, flag text or header."""


def parse_address(text: str, *, listen: bool = False, grpc_server: bool = True) -> str:
    """Return ``text`` if it is a valid worker address, else raise ``ValueError``.

    TCP addresses need a port of ASCII digits in 1..65535 (``listen=True`` also
    allows 0, an ephemeral port) and an ASCII host (for a gRPC server to listen on,
    none of ``LISTEN_SCHEMES``; ``grpc_server=False``, an HTTP listener, reads no
    scheme). Unix socket addresses need a
    non-empty path of at most ``MAX_UNIX_PATH_BYTES`` bytes, valid UTF-8 (a lone
    surrogate, from undecodable bytes, can be neither dialled nor rendered as a
    label) and without ``%``, ``?`` or ``#`` (``URI_DELIMITERS``): gRPC
    percent-decodes a ``unix:`` path, so ``unix:/run/w%41.sock`` would bind and
    dial ``/run/wA.sock``, and it dials ``unix:/run/w?a.sock`` (bound as named) at
    ``/run/w``: another socket than the one named. Nor does a path start with
    exactly two slashes: gRPC binds ``unix://run/w.sock`` at ``/run/w.sock`` but
    reads ``run`` as a URI authority when it dials, and dials nothing (three or
    more slashes, ``unix:///run/w.sock``, are a plain absolute path). No address
    holds a control character (a newline, a NUL). An address to listen on with no
    host (``:9478``, Go's way of saying every interface) is refused naming the two
    that mean it.
    """
    if CONTROL_CHARACTER.search(text):
        raise ValueError(f"invalid address {text!r}: control character")
    if text.startswith(UNIX_PREFIX):
        path = text[len(UNIX_PREFIX) :]
        if not path.strip("/"):
            raise ValueError(f"invalid address {text!r}: unix socket path is empty")
        if found := URI_DELIMITERS.search(path):
            raise ValueError(f"invalid address {text!r}: {found[0]!r} in a unix socket path")
        if path.startswith("//") and not path.startswith("///"):
            raise ValueError(f"invalid address {text!r}: '//' starts a URI authority")
        try:
            size = len(path.encode("utf-8"))
        except UnicodeEncodeError:  # undecodable bytes of argv or the environment
            raise ValueError(f"invalid address {text!r}: path is not valid UTF-8") from None
        if size > MAX_UNIX_PATH_BYTES:
            raise ValueError(
                f"invalid address {text!r}: unix socket path longer than "
                f"{MAX_UNIX_PATH_BYTES} bytes"
            )
        return text
    if not text.isascii():
        raise ValueError(f"invalid address {text!r}: host and port must be ASCII")
    if text.startswith("[") and text.endswith("]"):
        raise ValueError(f"invalid address {text!r}: no port: {text}:PORT")
    host, sep, port = text.rpartition(":")
    if ":" in host and not host.startswith("["):  # never valid: perhaps IPv6 unbracketed
        _refuse_unbracketed(text, host, port)
    if listen and sep and not host:  # Go's ":9100", which means every interface there
        raise ValueError(
            f"invalid address {text!r}: no host (every interface: 0.0.0.0{text} or [::]{text})"
        )
    if not sep or not host:
        raise ValueError(f"invalid address {text!r}: expected host:port or unix:/path")
    _check_host(text, host)
    if listen and grpc_server and host in LISTEN_SCHEMES:
        raise ValueError(f"invalid address {text!r}: gRPC would listen on {host!r} as a scheme")
    if not _PORT.fullmatch(port) or not (0 if listen else 1) <= int(port) <= 65535:
        raise ValueError(f"invalid address {text!r}: port must be a number in 1..65535")
    return text


def dial_target(address: str) -> str:
    """The gRPC target that dials ``address`` (valid, see ``parse_address``) and no other:
    a ``host:port`` one under ``dns:///``. Bare, gRPC reads a host that names one of its
    URI schemes as that scheme: ``unix-abstract:50051`` would dial the abstract socket
    ``50051`` (which any local user may bind), not port 50051 of host ``unix-abstract``.
    The address is percent-encoded, as gRPC percent-decodes the target: an IPv6 zone
    ``[fe80::1%12]`` would dial the zone named by byte 0x12 (nothing), and
    ``[fe80::1%25lo]`` (zone ``25lo``) the zone ``lo``.
    """
    if address.startswith(UNIX_PREFIX):
        return address
    return f"dns:///{urllib.parse.quote(address, safe='[]:')}"


def split_host_port(address: str) -> tuple[str, int]:
    """The host (an IPv6 one without its brackets) and port of ``address``, a valid
    ``host:port`` (see ``parse_address``)."""
    host, _, port = address.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def same_endpoint(address: str, other: str) -> bool:
    """Whether ``address`` and ``other`` (valid, see ``parse_address``) are one socket
    address, as spelt or as IP addresses: ``[::1]:P`` is ``[0:0:0:0:0:0:0:1]:P`` and
    ``[::1]:P``'s uppercase twin, ``[::ffff:127.0.0.1]:P`` is ``127.0.0.1:P``. A zone
    counts as written; host names are never looked up (``localhost:P`` is itself)."""
    return address == other or _spelt_once(address) == _spelt_once(other)


def _spelt_once(address: str) -> str:
    """``address`` with an IP host in one spelling (IPv4-mapped as IPv4), else as is."""
    if address.startswith(UNIX_PREFIX):
        return address
    host, port = split_host_port(address)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:  # a host name
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return f"[{ip.compressed}]:{port}"
    return f"{ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else ip}:{port}"


def _check_host(text: str, host: str) -> None:
    """Raise ``ValueError`` unless ``host`` is a bracketed IPv6, an IPv4 or a hostname."""
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"invalid address {text!r}: bad IPv6 host") from None
        return
    if not _HOSTNAME.fullmatch(host):
        raise ValueError(f"invalid address {text!r}: bad host {host!r}")


def _refuse_unbracketed(text: str, host: str, port: str) -> None:
    """Raise ``ValueError`` saying where the brackets go if ``host`` (of ``text``, split
    at its last ``:``) or ``text`` is an unbracketed IPv6 address (``::1:8080`` is
    either); return otherwise."""
    meant = [f"[{host}]:{port if _PORT.fullmatch(port) else 'PORT'}"] if _is_ipv6(host) else []
    meant += [f"[{text}]:PORT"] if _is_ipv6(text) else []
    if meant:
        raise ValueError(
            f"invalid address {text!r}: an IPv6 host goes in brackets: {' or '.join(meant)}"
        )


def _is_ipv6(text: str) -> bool:
    """Whether ``text`` is an IPv6 address, unbracketed."""
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True
