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
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from typing import Final

from wool_idle.autoscaler.endpoints import Endpoints, literal_endpoints, look_up
from wool_idle.daemon_thread import DaemonThreads

__all__ = [
    "LOOKUP_THREADS",
    "RESOLVE_TIMEOUT",
    "RESOLVE_TTL",
    "AddressResolver",
    "identities",
]

RESOLVE_TIMEOUT: Final = 2.0
"""Seconds one plan waits, at most, for the lookups of its labels."""
RESOLVE_TTL: Final = 60.0
"""Seconds an answer (endpoints, or none) is kept."""
LOOKUP_THREADS: Final = 4
"""Threads that run name lookups (and real-path reads), apart from the loop's own:
daemon threads, so lookups that hang (a DNS server that does not answer, a hung
mount) never hold up the process's exit."""
_LOOKUPS: Final = DaemonThreads(LOOKUP_THREADS, "wool-idle-resolve")


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
        literals = await asyncio.to_thread(literal_endpoints, missing) if missing else {}
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
                    _LOOKUPS, look_up, worker
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
