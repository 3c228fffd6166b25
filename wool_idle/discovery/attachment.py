"""How one kind of wool discovery is attached, and what can go wrong with it.

An ``Attachment`` makes one subscription at a time; the ``Follower`` runs it,
keeps the records and retries. The problems are the ``reason`` of the
exporter's ``wool_exporter_discovery_errors_total``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Any, Final, Protocol

MAX_WORKERS_FOLLOWED: Final = 4096
"""Workers one discovery may list (a ``local`` namespace: the capacity its owner
stamped) for it to be followed. Every poll reads every record (off the event loop, but
a read of 20,000 took some 2.5 s of CPU a poll), and every record is a target probed
on every scrape; a namespace listing more is a fault or an attack, and is not followed
(``too_many_workers``)."""


class FollowProblem(StrEnum):
    """Why a discovery gave no (or not every) worker."""

    NAMESPACE_MISSING = "namespace_missing"
    """The namespace does not exist (yet): nobody holds it. Its workers are forgotten
    (nothing is published), and the attachment is retried."""
    STALE_RECORD = "stale_record"
    """The namespace lists a worker whose record is gone (its publisher was killed):
    wool cannot read the namespace until someone drops that worker. The last known
    workers are kept; the attachment is retried."""
    FAILED = "failed"
    """The subscription raised anything else, or ended (logged). The last known
    workers are kept; the attachment is retried."""
    INVALID_ADDRESS = "invalid_address"
    """A record's address is not a worker address: that worker is skipped (logged
    once per record), never dialled."""
    INVALID_RECORD = "invalid_record"
    """A record's tags or version are not valid UTF-8 (a LAN record's JSON can escape a
    lone surrogate): no label can carry them, and one such label would fail every
    scrape. That worker is skipped (logged once per record), never dialled."""
    TOO_MANY_WORKERS = "too_many_workers"
    """The discovery lists (or, ``local``, has room for) more than ``MAX_WORKERS_FOLLOWED``
    workers: it is not read (logged and counted once each time it goes over); which
    pools are complete is unknown, so it counts as down (the last known workers are
    kept, and their idle values withheld past the grace) until it is back under the
    limit for a whole settle time."""
    DUPLICATE_ADDRESS = "duplicate_address"
    """Records of different pools (tags, or namespaces across discoveries) share an
    address (a stopped worker's record left beside a new worker on its port): which
    pool the worker there is in is unknown, so the address is no target (logged and
    counted once) until its records agree."""


class NamespaceMissing(LookupError):
    """The namespace to attach to does not exist."""


class TooManyWorkers(Exception):
    """The discovery lists more workers than may be followed."""

    def __init__(self, listed: int, limit: int) -> None:
        super().__init__(f"it lists {listed} workers, more than the {limit} followed at most")


class Attachment(Protocol):
    """One kind of discovery, attached read-only."""

    @property
    def settle(self) -> float:
        """Seconds after subscribing by which every live worker has been announced."""
        ...

    def attach(self) -> bool:
        """Check that a subscription can start now; raise (``NamespaceMissing``, ...) if not.
        True when what it reads is another source than the one last attached (a
        ``local`` namespace created again by a new owner): never at the first attach."""
        ...

    def subscribe(self) -> AsyncIterator[Any]:
        """A new iteration of wool's discovery events (``.type``, ``.metadata``)."""
        ...

    def announced(self) -> bool:
        """Whether the subscription made since ``attach`` has announced every worker its
        source listed when it began (it is settled only then, and past ``settle``)."""
        ...

    def detached(self) -> bool:
        """Whether what the running subscription reads was replaced since ``attach``."""
        ...

    def problem(self, error: BaseException) -> FollowProblem:
        """What ``error``, raised by ``attach`` or the subscription, means."""
        ...


REPLACED: Final = (
    "its namespace was created again by a new owner (its holder restarted, or exited "
    "and a process entered it anew); following the new one. Pools still attached to "
    "the old namespace keep serving the clients they had, but are listed no more: "
    "their workers are not probed nor retired, and new clients do not find them. "
    "Check that every pool of the namespace restarted after its holder, restart those "
    "that did not, and keep the holder up longer than every pool (runbook: "
    "WoolExporterDiscoveryReplaced)"
)
"""The warning a ``Follower`` logs for a namespace created again (``Attachment.attach``)."""


def explain(problem: FollowProblem, error: BaseException) -> str:
    """What ``problem`` (raised as ``error``) means, for the warning a ``Follower`` logs."""
    if problem is FollowProblem.NAMESPACE_MISSING:
        return "the namespace does not exist (nobody holds it)"
    if problem is FollowProblem.STALE_RECORD:
        return (
            f"a worker's record is gone ({error}): its publisher was killed; wool cannot "
            "read the namespace until that worker is dropped; keeping the last known workers"
        )
    if problem is FollowProblem.TOO_MANY_WORKERS:
        return f"not followed: {error} (MAX_WORKERS_FOLLOWED); keeping the last known workers"
    return f"the subscription failed ({error!r}); keeping the last known workers"
