"""Where one worker label leads, found without a cache: its endpoints.

``literal_endpoints`` answers the labels that need no lookup (an IP address);
``look_up`` answers any label, blocking (a name lookup, a socket's real path).
Both spell each endpoint one way, so that two labels of one worker share one:

- an IP address with its port, an IPv4-mapped address as IPv4, an IPv6 zone only
  on a link-local address and as its interface's index (``[fe80::1%1]:P``);
  ``127.0.0.1`` and ``::1`` also lead to ``loopback:P`` (a worker bound on
  ``localhost`` answers on both);
- a unix socket as its real path and its inode (``unix:/real/path``,
  ``unix-inode:DEV:INO``), only if it is an absolute path to a socket that exists.

None means the label names no one worker: it does not resolve, it resolves to
an unspecified address (``0.0.0.0``, ``::``, however spelt), or its host ends in a
number without being an IP address as ``ipaddress`` reads one (``127.1``,
``2130706433``, ``0x7f.0.0.1``, leading zeros: ``127.0.0.010``). No DNS name ends
so (no top-level domain is numeric); such a host is an IPv4 address in a form the
system's resolver and gRPC's read apart: ``127.0.0.010`` is ``127.0.0.8`` (octal)
to ``getaddrinfo`` and ``127.0.0.10`` to gRPC, which dials the worker there, so
its endpoints would be another worker's, and the one dialled counted twice.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import stat
import string
from collections.abc import Iterable
from typing import Final

from wool_idle.worker.address import UNIX_PREFIX, split_host_port

LOCALHOST: Final = frozenset({"127.0.0.1", "[::1]"})
"""The addresses, as endpoints spell them, a server bound on ``localhost`` listens on."""

Endpoints = frozenset[str]
"""Where a label leads: ``ip:port`` / ``[ipv6]:port`` strings, or a socket's
``unix:/real/path`` and ``unix-inode:DEV:INO``."""


def literal_endpoints(workers: list[str]) -> dict[str, Endpoints | None]:
    """Where each of ``workers`` leads that needs no lookup (an IP address); None for
    an unspecified one (see ``_ip_endpoints``), and for a name that ends in a number
    (see the module)."""
    found: dict[str, Endpoints | None] = {}
    for worker in workers:
        if not worker.startswith(UNIX_PREFIX):
            host, port = split_host_port(worker)
            with contextlib.suppress(ValueError):  # not an IP address: a name
                found[worker] = _ip_endpoints([ipaddress.ip_address(host)], port)
            if worker not in found and _ends_in_a_number(host):
                found[worker] = None
    return found


def look_up(worker: str) -> Endpoints | None:
    """Where ``worker`` (a valid address) leads; None if it does not resolve. Blocks."""
    if worker.startswith(UNIX_PREFIX):
        path = worker[len(UNIX_PREFIX) :]
        if not os.path.isabs(path):
            return None
        real = os.path.realpath(path)
        try:
            status = os.stat(real)
        except (OSError, ValueError):
            return None
        if not stat.S_ISSOCK(status.st_mode):
            return None
        return frozenset({UNIX_PREFIX + real, f"unix-inode:{status.st_dev}:{status.st_ino}"})
    host, port = split_host_port(worker)
    if worker in (literal := literal_endpoints([worker])) and literal[worker] is None:
        return None  # unspecified, or a name that ends in a number
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError):
        return None
    addresses = [_address(str(sockaddr[0]), *sockaddr[3:]) for *_, sockaddr in found]
    return _ip_endpoints(addresses, port)


def _ends_in_a_number(host: str) -> bool:
    """Whether the last label of ``host`` (a name: no IP address) is a number, decimal
    or ``0x`` hexadecimal: an IPv4 address in a form resolvers read apart."""
    last = host.removesuffix(".").rpartition(".")[2]
    if last[:2].lower() == "0x":
        return all(c in string.hexdigits for c in last[2:])
    return last.isdigit()


def _address(host: str, scope_id: int = 0) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """IP address ``host`` as a lookup found it, with its zone (``scope_id``, which a
    lookup gives apart from the address) put back."""
    if scope_id and "%" not in host:
        host = f"{host}%{scope_id}"
    return ipaddress.ip_address(host)


def _ip_endpoints(
    addresses: Iterable[ipaddress.IPv4Address | ipaddress.IPv6Address], port: int
) -> Endpoints | None:
    """Where ``addresses`` at ``port`` lead, or None if any is unspecified (any local
    interface: no one worker). ``127.0.0.1`` and ``::1``, however spelt, also lead to
    ``loopback:PORT``: the pair a worker bound on ``localhost`` answers on, one
    worker (two workers on exactly those two addresses at one port would count as
    one; other loopback addresses stay apart). Found on the lookup threads, never on
    the loop."""
    points = set()
    for address in addresses:
        plain = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        if (plain or address).is_unspecified:
            return None
        point = _endpoint(address, port)
        if point.rpartition(":")[0] in LOCALHOST:
            points.add(f"loopback:{port}")
        points.add(point)
    return frozenset(points) or None


def _endpoint(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    """``address`` and ``port`` in one spelling (an IPv4-mapped address as IPv4).

    An IPv6 zone counts only on a link-local address (the kernel ignores it on any
    other), spelt as its interface's index, so ``%lo`` and ``%1`` are one zone (a
    name no interface here has stays as written) and ``%0`` is none."""
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is None:
            plain = address.compressed.partition("%")[0]
            zone = address.scope_id or "0"
            index = _zone_index(zone) if address.is_link_local else "0"
            return f"[{plain}]:{port}" if index == "0" else f"[{plain}%{index}]:{port}"
        address = mapped
    return f"{address}:{port}"


def _zone_index(zone: str) -> str:
    """IPv6 zone ``zone`` as its interface's index: a number as it is (without
    leading zeros), a name as its interface's index, or as written if no interface
    here has that name."""
    if zone.isdecimal() and zone.isascii():
        return str(int(zone))
    try:
        return str(socket.if_nametoindex(zone))
    except (OSError, ValueError):
        return zone
