"""Targets from wool's own discovery (``--wool-discovery``).

Each discovered worker is a ``Target`` at its record's address, labelled
``wool_namespace`` and ``wool_tags`` (stable: on every series of the worker);
its uid, pid, version and secure flag are the labels of its one info series
``wool_worker_info``, so a restart changes that series only. An address
listed by several records, in one discovery or in several, is one target when
the records agree on its labels (namespace and tags; the first record of a discovery
read gives the info series), and none when they disagree (``apply``). A worker kept
only by discoveries down for more than ``DISCOVERY_DOWN_GRACE`` is still probed, but
its pool is unknown: its idle value is withheld (``Target.pool_unknown``, reason
``discovery_down``) until one of them reads again; so is a worker whose pool changed
within that grace (``Target.regrouped``, reason ``pool_changed``; see ``regrouped``).
The exporter's own series about each discovery are in ``discovery_metrics``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Final

from wool_idle.contract import (
    NAMESPACE_LABEL,
    PID_LABEL,
    SECURE_LABEL,
    TAGS_LABEL,
    UID_LABEL,
    VERSION_LABEL,
)
from wool_idle.discovery.attachment import FollowProblem
from wool_idle.discovery.follow import Follower, follower
from wool_idle.discovery.records import WorkerRecord
from wool_idle.discovery.spec import DiscoverySpec
from wool_idle.exporter.regrouped import Regroupings
from wool_idle.exporter.target import Target
from wool_idle.exporter.targets import TargetSet
from wool_idle.logs import field_value

log = logging.getLogger("wool_idle.discovery")

DISCOVERY_DOWN_GRACE: Final = 10.0
"""Seconds a discovery may be down (its ``Follower`` not ``up``) before the idle values
of the workers kept from it are withheld. Long enough for a transient failed read to
pass unseen: at the default poll interval (0.5 s) that is some twenty retries, and a
new subscription is up within its settle time (two polls), so series do not flicker.
Short enough to be safe: a worker of another pool started on a dead worker's port
after the discovery went down has been idle at most as long as the discovery has
been down, so within the grace it cannot pass a ``--max-idle`` longer than it; past
it, no idle value of the discovery's workers is served."""


def record_target(namespace: str, record: WorkerRecord, *, pool_unknown: bool = False) -> Target:
    """The target of ``record``, found in ``namespace``; ``pool_unknown`` when only
    discoveries down past their grace list it."""
    labels = ((NAMESPACE_LABEL, namespace), (TAGS_LABEL, record.tags_label))
    info = (
        (PID_LABEL, str(record.pid)),
        (SECURE_LABEL, "true" if record.secure else "false"),
        (UID_LABEL, record.uid),
        (VERSION_LABEL, record.version),
    )
    return Target(
        record.address,
        tuple(sorted((name, value) for name, value in labels if value)),
        info=tuple((name, value) for name, value in info if value),
        secure=record.secure,
        pool_unknown=pool_unknown,
    )


class DiscoveredTargets:
    """Follows ``specs`` and keeps ``targets``' discovered part equal to their workers.

    Until every discovery has been read once (``Follower.read_once``), for ``grace`` at
    most, the target set is not loaded (``TargetSet.unloaded``): a restarted exporter
    knows none of their workers yet, and an empty ``/sd`` would have Prometheus drop
    them all (one namespace unreadable, or whose subscriptions die before they settle,
    does not hold the others for ever).
    Changes are applied once per event-loop turn, however many records changed in it;
    a discovery's passing ``grace`` down, or reading again after it, within a
    ``poll_interval``.
    """

    def __init__(
        self,
        specs: Sequence[DiscoverySpec],
        targets: TargetSet,
        *,
        poll_interval: float,
        grace: float = DISCOVERY_DOWN_GRACE,
    ) -> None:
        self.targets = targets
        self.followers = [
            follower(spec, poll_interval=poll_interval, on_change=self._schedule)
            for spec in dict.fromkeys(specs)
        ]
        targets.discovery_read = not self.followers
        self._started = time.monotonic()
        self._poll_interval = poll_interval
        self._grace = grace
        self._scheduled = False
        self._contested: set[str] = set()
        self._lapsed: frozenset[Follower] = frozenset()
        self._regroupings = Regroupings(grace, wake=self._schedule_in)

    async def run(self) -> None:
        """Follow every discovery until cancelled."""
        await asyncio.gather(*(f.run() for f in self.followers), self._watch_health())

    async def _watch_health(self) -> None:
        """Apply again whenever the set of discoveries down past the grace changes, and
        at each poll while the targets are not known yet (see the class)."""
        while True:
            await asyncio.sleep(self._poll_interval)
            if self._down_past_grace() != self._lapsed or not self.targets.discovery_read:
                self._schedule()

    def _down_past_grace(self) -> frozenset[Follower]:
        now = time.monotonic()
        return frozenset(
            each
            for each in self.followers
            if each.down_since is not None and now - each.down_since >= self._grace
        )

    def _schedule_in(self, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self._schedule)

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.apply)

    def apply(self) -> None:
        """Set the target set's discovered part from the followers' records now: one
        target per address. An address whose records disagree on its labels (a stopped
        worker's record left beside a new worker of another pool on its port, in one
        discovery or across two) is none: which pool answers there is unknown, and
        with the wrong pool's labels the autoscaler could empty the right one. Each
        such address is logged once, and counted once (``duplicate_address``) by each
        discovery listing it, until its records agree. An address listed only by
        discoveries down past the grace is a target whose pool is unknown; one that a
        discovery still read lists keeps that discovery's record."""
        self._scheduled = False
        lapsed = self._down_past_grace()
        self._log_lapses(lapsed)
        claims: dict[str, list[tuple[Follower, WorkerRecord]]] = {}
        for each in self.followers:
            for record in each.records.values():
                claims.setdefault(record.address, []).append((each, record))
        contested = {
            address
            for address, found in claims.items()
            if len(found) > 1 and len({(f.spec.namespace, r.tags) for f, r in found}) > 1
        }
        for address in contested - self._contested:
            listing = dict.fromkeys(each for each, _ in claims[address])
            for each in listing:
                each.errors[FollowProblem.DUPLICATE_ADDRESS] += 1
            log.warning(
                "wool discovery %s: records of different pools share %s; not a target "
                "until they agree",
                ", ".join(str(each) for each in listing),
                field_value(address),
            )
        self._contested = contested
        self._lapsed = lapsed
        kept = [_target(found, lapsed) for a, found in claims.items() if a not in contested]
        self.targets.set_discovered(self._regroupings.mark(kept, time.monotonic()))
        waited = time.monotonic() - self._started >= self._grace
        if waited or all(each.read_once for each in self.followers):
            self.targets.discovery_read = True

    def _log_lapses(self, lapsed: frozenset[Follower]) -> None:
        """Log each discovery with kept workers that just passed the grace down (its
        ``Follower`` logs when it reads again)."""
        for each in lapsed - self._lapsed:
            if each.records:
                log.warning(
                    "wool discovery %s: down for over %gs; the idle values of its %d kept "
                    "workers are withheld (discovery_down) until it reads again",
                    each,
                    self._grace,
                    len(each.records),
                )


def _target(found: list[tuple[Follower, WorkerRecord]], lapsed: frozenset[Follower]) -> Target:
    """The target of an address's agreeing records: the first one of a discovery not
    down past the grace, else the first one, its pool unknown."""
    for each, record in found:
        if each not in lapsed:
            return record_target(each.spec.namespace, record)
    each, record = found[0]
    return record_target(each.spec.namespace, record, pool_unknown=True)
