"""Which worker each address names, so that one worker counts once.

Two labels can name one worker: ``127.0.0.1:P`` and ``localhost:P``,
``unix:/run/w.sock`` and ``unix:/run/./w.sock``. Before each plan the planner
resolves every label to its endpoints:

- ``host:port``: the IP addresses the host resolves to (``getaddrinfo``, on
  threads of its own, at most ``timeout`` seconds for all labels together),
  each with the port; an IP address needs no lookup; an IPv6 zone counts, as
  its interface's index, on a link-local address only (``%lo`` and ``%1`` are
  one zone, two links two; ``[::1%lo]`` is ``[::1]``); ``127.0.0.1:P`` and
  ``[::1]:P`` also lead to ``loopback:P``, so they are one worker: a worker
  bound on ``localhost`` answers on both;
- ``unix:/path``: the real path (symbolic links and ``..`` followed) of a
  socket that exists (the autoscaler could not dial one it cannot see), and
  its inode (``unix-inode:DEV:INO``: one socket reached through a hard link or
  a bind mount has two real paths and one inode).

Labels whose endpoints overlap, directly or through other labels, name one
worker. A label that does not resolve (no such host, no answer in time, no
such socket, a relative unix path, which means another path in each process),
or that resolves to an unspecified address (``0.0.0.0``, ``::``, however
spelt: it reaches whichever local worker listens on the port, which another
label may name; and a worker bound there answers on every address of its host,
so no one spelling of it would count once) names an unknown worker: fail
closed, the planner never stops it and does not count it. A lookup still
running when the time is up is not abandoned: its answer is used on a later
cycle. Answers are kept ``ttl`` seconds, and only for the labels of the last
read.

What this cannot see: one worker reached through addresses that resolve apart
(a worker listening on every interface, named by ``127.0.0.1:P`` and by its
LAN address). Name each worker once in the targets.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from typing import Final

from wool_idle.worker.address import UNIX_PREFIX, split_host_port

RESOLVE_TIMEOUT: Final = 2.0
"""Seconds one plan waits, at most, for the lookups of its labels."""
RESOLVE_TTL: Final = 60.0
"""Seconds an answer (endpoints, or none) is kept."""
LOOKUP_THREADS: Final = 4
"""Threads that run name lookups (and real-path reads), apart from the loop's own."""
LOCALHOST: Final = frozenset({"127.0.0.1", "[::1]"})
"""The addresses, as endpoints spell them, a server bound on ``localhost`` listens on."""
_LOOKUPS: Final = ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="wool-idle-resolve")

Endpoints = frozenset[str]
"""Where a label leads: ``ip:port`` / ``[ipv6]:port`` strings, or a socket's
``unix:/real/path`` and ``unix-inode:DEV:INO``."""


class AddressResolver:
    """Resolves worker labels (valid addresses) to endpoints, with a short memory.

    Lookups run on threads of their own (``LOOKUP_THREADS``, shared by every
    resolver), so a slow DNS never delays the event loop's other threaded work (the
    source's own lookups, parsing).
    """

    def __init__(
        self,
        *,
        timeout: float = RESOLVE_TIMEOUT,
        ttl: float = RESOLVE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout, self.ttl, self.clock = timeout, ttl, clock
        self._answers: dict[str, tuple[Endpoints | None, float]] = {}
        """Each label's endpoints (None: it does not resolve) and when that expires."""
        self._lookups: dict[str, asyncio.Future[Endpoints | None]] = {}
        self._resolved: Mapping[str, Endpoints] = {}
        self._earliest = 0.0
        """When the first of ``_answers`` expires: until then, the same workers as last
        time have the same answer (``_resolved``)."""

    async def resolve(self, workers: Iterable[str]) -> Mapping[str, Endpoints]:
        """The endpoints of each of ``workers`` that resolves (in time); a worker left
        out does not (or not yet)."""
        now, known, lookups = self.clock(), self._answers, self._lookups
        wanted = dict.fromkeys(workers)
        if now < self._earliest and not lookups and wanted.keys() == known.keys():
            return self._resolved  # the steady state: nothing to look up
        answers, missing = {}, []
        for worker in wanted:
            answer = known.get(worker)
            if answer is not None and answer[1] > now:
                answers[worker] = answer
            else:
                missing.append(worker)
        # Many on a first read (and once per ttl): on a thread.
        literals = await asyncio.to_thread(_literals, missing) if missing else {}
        self._start(missing, literals, answers, now + self.ttl)
        if lookups:
            await asyncio.wait(lookups.values(), timeout=self.timeout)
        expires = self.clock() + self.ttl
        for worker, lookup in list(lookups.items()):
            if lookup.done():
                del lookups[worker]
                failed = lookup.cancelled() or lookup.exception() is not None
                answers[worker] = (None if failed else lookup.result(), expires)
        self._answers = answers
        self._earliest = min((expiry for _, expiry in answers.values()), default=0.0)
        self._resolved = {w: points for w, (points, _) in answers.items() if points is not None}
        return self._resolved

    def _start(
        self,
        missing: list[str],
        literals: Mapping[str, Endpoints | None],
        answers: dict[str, tuple[Endpoints | None, float]],
        expires: float,
    ) -> None:
        """Answer each of ``missing`` that needs no lookup (its ``literals``), start a
        lookup for the others (unless one runs), and give up the lookups of workers no
        longer read."""
        lookups = self._lookups
        for worker in missing:
            if worker in literals:
                answers[worker] = (literals[worker], expires)
            elif worker not in lookups:
                lookups[worker] = asyncio.get_running_loop().run_in_executor(
                    _LOOKUPS, _look_up, worker
                )
        for worker in lookups.keys() - answers.keys() - set(missing):
            lookups.pop(worker).cancel()


def identities(endpoints: Mapping[str, Endpoints]) -> dict[str, str]:
    """The identity of each label that shares a worker with another label: labels whose
    endpoints overlap, directly or through others, get one (their endpoints, sorted
    and comma-joined). A label that is the only one of its worker gets none."""
    counts = Counter(chain.from_iterable(endpoints.values()))
    shared = {point for point, n in counts.items() if n > 1}
    if not shared:
        return {}
    linked = {label: points for label, points in endpoints.items() if not points.isdisjoint(shared)}
    owner: dict[str, str] = {}
    parent: dict[str, str] = {}

    def root(label: str) -> str:
        while parent.get(label, label) != label:
            label = parent[label]
        return label

    for label, points in linked.items():
        for point in points:
            other = root(owner.setdefault(point, label))
            if other != root(label):
                parent[root(label)] = other
    members: dict[str, list[str]] = {}
    for label in linked:
        members.setdefault(root(label), []).append(label)
    identity_of = {}
    for labels in members.values():
        identity = ",".join(sorted(set().union(*(linked[label] for label in labels))))
        identity_of.update(dict.fromkeys(labels, identity))
    return identity_of


def _literals(workers: list[str]) -> dict[str, Endpoints | None]:
    """Where each of ``workers`` leads that needs no lookup (an IP address); None for
    an unspecified one (see ``_ip_endpoints``)."""
    found: dict[str, Endpoints | None] = {}
    for worker in workers:
        if not worker.startswith(UNIX_PREFIX):
            host, port = split_host_port(worker)
            with contextlib.suppress(ValueError):  # not an IP address: a name
                found[worker] = _ip_endpoints([ipaddress.ip_address(host)], port)
    return found


def _look_up(worker: str) -> Endpoints | None:
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
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError):
        return None
    addresses = [_address(str(sockaddr[0]), *sockaddr[3:]) for *_, sockaddr in found]
    return _ip_endpoints(addresses, port)


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
