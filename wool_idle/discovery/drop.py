"""Publishing ``worker-dropped`` for a worker stopped by someone else (wool's
``LocalDiscovery`` only).

A wool pool does not unpublish a worker that another process stopped, so wool
clients keep it as a candidate. ``LocalDiscovery`` lets any process publish a
drop; ``LanDiscovery`` does not (a drop from another process is a silent no-op
there), so a LAN namespace gets none.

Which namespaces a stopped worker is dropped from: those its series name
(``wool_namespace``, as the exporter labels a discovered worker) that a ``local:``
discovery of the ``Dropper`` follows. A worker whose series name none (a worker of
a targets file or ``--target``) is dropped from every followed ``local:`` namespace
only if one of them listed it right before its stop (a wool worker also listed in a
targets file, whose labels win); one that none listed has no drop to make, and none
is tried (no ``not_found``: a worker of no namespace is no misconfiguration). Only
followed ``lan:`` ones: no drop either. A namespace no discovery follows is not
touched (``not_followed``): whether it is local or LAN is unknown, and the operator
named it nowhere. Where records at its address were listed in several of the
namespaces it would be dropped from, none is dropped (``ambiguous``), as for several
records in one namespace.

How a drop is made, attach-only (this process never creates or owns a
namespace): right before the stop is sent, ``Dropper.note`` reads which records
list the worker's address; after the stop, the namespace's records are read
again from its shared memory (``published``) and the worker whose address is the stopped
worker's is found by uid (when several records share the address, which was
stopped is unknown: none is dropped; a record not noted before the stop is a
new worker on the address, and stays); then
``LocalDiscovery.Publisher`` publishes ``worker-dropped`` for it (under the
namespace's file lock, waited for at most ``lock_timeout``, once the lock file
is known to be a regular file of this process's user, which nobody else can
swap for a link or a FIFO before wool opens it: ``check_lock``); then the
namespace's notify file is truncated (never through a link), which wakes wool's notification-only
subscribers (wool's own default clients: the touch wool makes arrives as an
event they ignore). ``Dropper.drop`` raises nothing but cancellation: every
failure is a ``DropResult``, logged once (the functions it calls raise).
The ``wool`` extra pins wool below 0.16; ``wool`` is imported only when a drop is made.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Sequence
from enum import StrEnum
from typing import Any, Final

from wool_idle.discovery.namespace_files import (
    check_lock,
    lock_path,
    notify_path,
    wake_subscribers,
)
from wool_idle.discovery.published import listed_at
from wool_idle.logs import field_value

log = logging.getLogger("wool_idle.discovery")

DROP_LOCK_TIMEOUT: Final = 5.0
"""Seconds a drop waits for the namespace's file lock (wool's own default is 30)."""
NOTES_KEPT: Final = 1024
"""Addresses whose noted records are kept at most (the oldest go first): far more
than stops go on at once (a note goes with its drop, or ``forget``); a stop whose
note went has no drop."""


class DropResult(StrEnum):
    """What came of publishing the drop of one stopped worker."""

    PUBLISHED = "published"
    """``worker-dropped`` was published for the one record with the worker's address,
    and the notification-only subscribers were woken."""
    NOT_FOUND = "not_found"
    """No namespace holds a record with the worker's address."""
    REPLACED = "replaced"
    """The one record at the worker's address was not listed when its stop was sent:
    another worker was published there since (its pool restarted on the same port),
    and stays listed."""
    AMBIGUOUS = "ambiguous"
    """Several records share the worker's address, in one namespace or in several of
    those it is dropped from (workers sharing a port, as gRPC's ``SO_REUSEPORT`` lets
    them, or a stale record beside a live one): which of them was stopped is unknown,
    so none is dropped."""
    NAMESPACE_MISSING = "namespace_missing"
    """A namespace does not exist (its owner exited), and no other holds the worker."""
    LOCK_TIMEOUT = "lock_timeout"
    """The namespace's file lock was not acquired within ``DROP_LOCK_TIMEOUT``."""
    FAILED = "failed"
    """Any other error."""
    NOT_FOLLOWED = "not_followed"
    """The worker's series name a namespace no discovery of the autoscaler follows:
    nothing is dropped from it (its local or LAN kind is unknown)."""


async def drop_in(
    namespace: str, address: str, noted: Collection[uuid.UUID], *, lock_timeout: float
) -> DropResult:
    """Publish ``worker-dropped`` in ``namespace`` for the record at ``address``, if
    it is one of ``noted`` (the records there before the stop); none when several
    share it (``ambiguous``)."""
    try:
        uids = list(listed_at(namespace, address))
    except FileNotFoundError:
        return DropResult.NAMESPACE_MISSING
    if not uids:
        return DropResult.NOT_FOUND
    if len(uids) > 1:
        return DropResult.AMBIGUOUS
    if uids[0] not in noted:
        return DropResult.REPLACED
    check_lock(lock_path(namespace))
    import wool

    publisher: Any = wool.LocalDiscovery.Publisher(namespace, lock_timeout=lock_timeout)
    async with publisher:
        dropped = wool.WorkerMetadata(uid=uids[0], address="", pid=0, version="")
        await publisher.publish("worker-dropped", dropped)
    try:
        wake_subscribers(notify_path(namespace))
    except OSError as error:  # the drop stands; default wool clients notice it later
        log.warning("namespace %s: cannot wake its subscribers: %s", namespace, error)
    return DropResult.PUBLISHED


class Dropper:
    """Publishes the drop of stopped workers in the ``local`` namespaces; ``lan`` ones
    are followed too, with no drop from another process."""

    def __init__(
        self,
        local: Sequence[str],
        *,
        lan: Collection[str] = (),
        lock_timeout: float = DROP_LOCK_TIMEOUT,
    ) -> None:
        self.namespaces, self.lan = tuple(local), frozenset(lan)
        self.lock_timeout = lock_timeout
        self._notes: dict[str, dict[str, set[uuid.UUID]]] = {}
        """By address, the records each namespace listed there right before the stop."""

    def note(self, address: str) -> None:
        """Note which records list ``address`` now, right before its worker's stop is
        sent: its drop drops only one of them. Never raises: a namespace that cannot be
        read notes none."""
        noted: dict[str, set[uuid.UUID]] = {}
        for namespace in self.namespaces:
            try:
                noted[namespace] = listed_at(namespace, address)
            except Exception as error:  # missing, unreadable: its drop is not_found or fails
                log.debug("worker %s: noting local:%s: %s", field_value(address), namespace, error)
        self._notes.pop(address, None)
        self._notes[address] = noted
        if len(self._notes) > NOTES_KEPT:
            del self._notes[next(iter(self._notes))]

    def forget(self, address: str) -> None:
        """Forget the note of ``address``: its stop ended with no drop to make (refused,
        or cut off), and the note would only crowd out those of stops going on."""
        self._notes.pop(address, None)

    async def drop(self, address: str, namespaces: Collection[str]) -> DropResult | None:
        """Drop the worker at ``address`` from each of ``namespaces`` (those its series
        name) that a ``local`` discovery follows, where a record noted before its stop
        (``note``) lists it, and log the outcome in one line (and each failed
        namespace's error in one more); never raises but for cancellation.
        ``published`` if any namespace took the drop; ``not_followed`` if all it names
        are followed by no discovery. Naming none, it is dropped from every ``local``
        namespace followed if its note found it listed. Where the note found it listed in
        several of the namespaces to drop it from, it is dropped from none (``ambiguous``:
        which of those records was its worker's is unknown). None, and a debug line, when
        there is no drop to make: it names no namespace and none listed it, or it names
        only ``lan`` ones."""
        noted = self._notes.pop(address, {})
        named = sorted(namespaces) or (sorted(self.namespaces) if any(noted.values()) else [])
        listing = [ns for ns in named if noted.get(ns)]
        results = {
            f"local:{ns}": DropResult.AMBIGUOUS
            if len(listing) > 1 and ns in listing
            else await self._drop_in(ns, address, noted.get(ns, set()))
            for ns in named
            if ns in self.namespaces
        }
        outside = [ns for ns in named if ns not in self.namespaces and ns not in self.lan]
        results |= {ns: DropResult.NOT_FOLLOWED for ns in outside}
        if not results:
            why = "LAN has no drop" if namespaces else "in no namespace and named in none"
            log.debug("worker %s: no drop (%s)", field_value(address), why)
            return None
        result = min(results.values(), key=_RANK.index)
        where = ", ".join(f"{ns} {outcome.value}" for ns, outcome in results.items())
        level = logging.INFO if result is DropResult.PUBLISHED else logging.WARNING
        log.log(level, "worker %s: drop %s (%s)", field_value(address), result.value, where)
        return result

    async def _drop_in(
        self, namespace: str, address: str, noted: Collection[uuid.UUID]
    ) -> DropResult:
        try:
            return await drop_in(namespace, address, noted, lock_timeout=self.lock_timeout)
        except FileNotFoundError:  # the namespace went away between the read and the drop
            return DropResult.NAMESPACE_MISSING
        except TimeoutError:
            return DropResult.LOCK_TIMEOUT
        except Exception as error:
            log.warning(
                "worker %s: drop in local:%s failed: %s: %s",
                field_value(address),
                namespace,
                type(error).__name__,
                error,
            )
            return DropResult.FAILED


_RANK: Final = (
    DropResult.PUBLISHED,
    DropResult.AMBIGUOUS,
    DropResult.FAILED,
    DropResult.LOCK_TIMEOUT,
    DropResult.NAMESPACE_MISSING,
    DropResult.REPLACED,
    DropResult.NOT_FOUND,
    DropResult.NOT_FOLLOWED,
)
"""Which namespace's result a drop reports: a publication, else the failure
that most likely left the worker listed."""
