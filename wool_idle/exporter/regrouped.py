"""Discovered workers whose pool changed lately: their pool is unknown for a while.

A discovery record can move its address to another pool (new tags, or another
namespace) at any time: a worker updated, a stopped worker's record dropped and
a new one of another pool published on its port, or a buggy or hostile publisher
flipping its tags every second. The autoscaler counts a worker for the floor of
the pool its labels name when it reads them; a worker counted in pool B that moves
to pool A right after lets B's last other worker be stopped, emptying B. So an
address whose labels (``wool_namespace``, ``wool_tags``) changed less than
``grace`` seconds ago (or that vanished and came back with others within it) is a
target whose pool is unknown (``Target.pool_unknown``): probed, its idle value
withheld (holding no floor, never a candidate) until its labels have held still
for ``grace``. A worker seen for the first time is not regrouped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from wool_idle.exporter.targets import Labels, Target

log = logging.getLogger("wool_idle.discovery")


@dataclass
class _Pool:
    labels: Labels
    changed_at: float
    """When the labels last changed (``-inf``: never, as first seen)."""
    seen_at: float


class Regroupings:
    """The last labels of each discovered address, and since when."""

    def __init__(self, grace: float, *, wake: Callable[[float], None]) -> None:
        """``wake(delay)`` asks for the targets to be set again after ``delay`` seconds,
        when a regrouped address's grace ends."""
        self.grace = grace
        self._wake = wake
        self._pools: dict[str, _Pool] = {}

    def mark(self, targets: Iterable[Target], now: float) -> list[Target]:
        """``targets`` (one per address), each whose pool changed within ``grace`` made
        ``pool_unknown``. Addresses gone for ``grace`` are forgotten."""
        marked = [self._mark(target, now) for target in targets]
        for address in [a for a, p in self._pools.items() if now - p.seen_at >= self.grace]:
            del self._pools[address]
        return marked

    def _mark(self, target: Target, now: float) -> Target:
        pool = self._pools.get(target.address)
        if pool is None:
            self._pools[target.address] = pool = _Pool(target.labels, float("-inf"), now)
        elif pool.labels != target.labels:
            if now - pool.changed_at >= self.grace:
                log.warning(
                    "wool discovery: worker %s moved from %s to %s; its idle value is "
                    "withheld (discovery_down) until its pool holds still for %gs",
                    target.address,
                    dict(pool.labels),
                    dict(target.labels),
                    self.grace,
                )
            pool.labels, pool.changed_at = target.labels, now
            self._wake(self.grace)
        pool.seen_at = now
        if now - pool.changed_at < self.grace:
            return replace(target, pool_unknown=True)
        return target
