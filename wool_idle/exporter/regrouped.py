"""Targets whose pool changed lately: their pool is unknown for a while.

A discovery record can move its address to another pool (new tags, or another
namespace) at any time: a worker updated, a stopped worker's record dropped and
a new one of another pool published on its port, or a buggy or hostile publisher
flipping its tags every second. The autoscaler counts a worker for the floor of
the pool its labels name when it reads them; a worker counted in pool B that moves
to pool A right after lets B's last other worker be stopped, emptying B. So an
address whose labels (``wool_namespace``, ``wool_tags``) changed less than
``grace`` seconds ago (or that vanished and came back with others within it) is a
regrouped target (``Target.regrouped``): probed, its idle value withheld (reason
``pool_changed``: holding no floor, never a candidate) until its labels have held
still for ``grace``. A worker seen for the first time is not regrouped.

The same holds for the targets file (``TargetSet``): a file rewritten in place can be
read cut inside a label value (``wool_tags: gpu`` read as ``wool_tags: g``), a valid
file that moves the worker into another pool until the next read. A worker new to
the file (after its first load) is held the same way: its labels may be cut too.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from wool_idle.exporter.target import Labels, Target
from wool_idle.logs import field_value

log = logging.getLogger(__name__)

REGROUP_GRACE: Final = 10.0
"""Seconds a targets file's target whose labels changed has its idle value withheld
at least: as long as a discovered worker's (``discovered.DISCOVERY_DOWN_GRACE``)."""


@dataclass
class _Pool:
    labels: Labels
    changed_at: float
    """When the labels last changed (``-inf``: never, as first seen, unless held new)."""
    seen_at: float


class Regroupings:
    """The last labels of each address of one source, and since when."""

    def __init__(
        self,
        grace: float,
        *,
        wake: Callable[[float], None] | None = None,
        source: str = "wool discovery",
        hold_new: bool = False,
    ) -> None:
        """``wake(delay)`` asks for the targets to be set again after ``delay`` seconds,
        when a regrouped address's grace ends (None: the caller asks ``next_release``
        instead); ``source`` names them in the log. With
        ``hold_new``, an address first seen after the first ``mark`` is held as one
        that moved (a file read cut inside the labels of a worker just added to it)."""
        self.grace = grace
        self._wake = wake
        self._source = source
        self._hold_new = hold_new
        self._marked = False
        self._pools: dict[str, _Pool] = {}

    def mark(self, targets: Iterable[Target], now: float) -> list[Target]:
        """``targets`` (one per address), each whose pool changed within ``grace`` made
        ``regrouped``. Addresses gone for ``grace`` are forgotten."""
        marked = [self._mark(target, now) for target in targets]
        self._marked = True
        for address in [a for a, p in self._pools.items() if now - p.seen_at >= self.grace]:
            del self._pools[address]
        return marked

    def next_release(self, now: float) -> float:
        """When the first hold still on at ``now`` ends (``inf``: none is): at most one
        moment per address kept, however often its labels changed."""
        grace = self.grace
        return min(
            (end for p in self._pools.values() if (end := p.changed_at + grace) > now),
            default=math.inf,
        )

    def _mark(self, target: Target, now: float) -> Target:
        pool = self._pools.get(target.address)
        if pool is None:
            held = self._hold_new and self._marked
            self._pools[target.address] = pool = _Pool(
                target.labels, now if held else float("-inf"), now
            )
            if held and self._wake is not None:
                self._wake(self.grace)
        elif pool.labels != target.labels:
            if now - pool.changed_at >= self.grace:
                log.warning(
                    "%s: worker %s moved from %s to %s; its idle value is "
                    "withheld (pool_changed) until its pool holds still for %gs",
                    self._source,
                    field_value(target.address),
                    _shown(pool.labels),
                    _shown(target.labels),
                    self.grace,
                )
            pool.labels, pool.changed_at = target.labels, now
            if self._wake is not None:
                self._wake(self.grace)
        pool.seen_at = now
        if now - pool.changed_at < self.grace:
            return replace(target, regrouped=True)
        return target


class FileRegroupings:
    """The targets of a source read now and then (the targets file), each whose labels
    changed against the last read held (``Regroupings``); a held one is released by the
    first ``release`` after its grace ends (the caller's next check of the source),
    whether or not the source changed. Only the first hold's end is kept (``_due``), not
    one moment per change: a file that changes at every check (so ``release`` never
    runs) costs no memory per change."""

    def __init__(self, grace: float, *, source: str) -> None:
        self._regroupings = Regroupings(grace, source=source, hold_new=True)
        self.read: tuple[Target, ...] = ()
        """The targets as last read."""
        self.targets: tuple[Target, ...] = ()
        """``read``, each changed within the grace ``regrouped``."""
        self._due = math.inf
        """When the first hold ends (``inf``: none is on); ``release`` marks again then."""

    def set(self, targets: Sequence[Target], now: float) -> bool:
        """Make ``targets`` (as read at ``now``) the current ones; whether ``targets``
        (as marked) changed."""
        self.read = tuple(targets)
        marked = tuple(self._regroupings.mark(self.read, now))
        self._due = self._regroupings.next_release(now)
        changed, self.targets = marked != self.targets, marked
        return changed

    def release(self, now: float) -> bool:
        """Mark the targets again when a grace has ended by ``now``; whether they
        changed."""
        if now < self._due:
            return False
        return self.set(self.read, now)


def _shown(labels: Labels) -> str:
    """``labels`` for a log message, each value quoted as a field is (``field_value``):
    a discovery record's tags may hold blanks and the text of another decision."""
    return "{" + ", ".join(f"{name}={field_value(value)}" for name, value in labels) + "}"
