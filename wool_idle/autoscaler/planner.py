"""The planner: selects the workers to retire, and remembers between cycles.

It wraps the pure policy with the checks the policy cannot make without I/O
or the worker package. The ``worker`` label must be an address the actuator
could dial: a reading whose label is not one gets ``invalid_address``. Then
each label is resolved (``identity``): one that does not resolve gets
``unresolved``. Either takes no part in the plan (it neither holds up the
floor nor uses a stop). Labels that resolve to one worker are given one
``identity``, so the policy counts that worker once. A reading of a worker
whose own idle RPC found it unreachable after the reading's sample was taken
says nothing of now: it reads as down (``superseded``). The labels a stop was sent
under are resolved too, as long as they are marked (retiring, cooling down, found
unreachable), read or not: a worker stopped, cooling down or found unreachable
under one label is so under every label of it read later.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import chain
from typing import Protocol

from wool_idle.autoscaler.endpoints import Endpoints
from wool_idle.autoscaler.identity import AddressResolver, identities
from wool_idle.autoscaler.policy import (
    Decision,
    Plan,
    PolicySettings,
    PolicyState,
    Reading,
    after_stop,
    plan,
)
from wool_idle.autoscaler.state_file import Marks
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.worker.address import parse_address

log = logging.getLogger("wool_idle.autoscaler")


class Planner(Protocol):
    """Decides each cycle, and learns what came of the stops it asked for."""

    async def plan(
        self, readings: Sequence[Reading], now: float, *, read_at: float | None = None
    ) -> Plan:
        """Every worker's decision for this cycle, ``now`` on a monotonic clock;
        ``read_at`` is when the read of ``readings`` began (``now`` if None), no later
        than the moment their ages count from."""
        ...

    def record(self, worker: str, result: StopResult, now: float) -> list[str]:
        """Take in a planned stop's result; the labels it holds for, ``worker`` first."""
        ...


class PolicyPlanner:
    """The ``Planner`` of the daemon: address check, resolution, then the pure policy."""

    def __init__(self, settings: PolicySettings, resolver: AddressResolver | None = None) -> None:
        self.settings = settings
        self.state = PolicyState()
        self.resolver = resolver or AddressResolver()
        self._addressable: dict[str, bool] = {}
        self._resolved: Mapping[str, Endpoints] = {}
        self._shared: dict[str, str] = {}
        self._empty_group_labels: frozenset[str] = frozenset()
        self._unreachable: dict[str, float] = {}
        """When a planned stop last found each worker unreachable (its idle RPC)."""
        self._held_until = -math.inf
        """No stop before this moment (``hold``)."""

    async def plan(
        self, readings: Sequence[Reading], now: float, *, read_at: float | None = None
    ) -> Plan:
        """Every worker's decision; the address checks and the policy run on a thread,
        so a large fleet never holds up the event loop."""
        addressable = await asyncio.to_thread(self._check_addresses, readings)
        self._warn_of_empty_group_labels(readings)
        state = self.state
        marked = chain(state.retiring, state.cooldown_until, self._unreachable)
        unread = [w for w in dict.fromkeys(marked) if w not in addressable and _is_address(w)]
        wanted = chain((w for w, ok in addressable.items() if ok), unread)
        found = await self.resolver.resolve(wanted)
        if found is not self._resolved:  # the same answers as last cycle: the same identities
            self._resolved, self._shared = found, identities(found)
        shared = self._shared
        resolved = {w: e for w, e in found.items() if w in addressable} if unread else found
        self.state = replace(
            state,
            retiring=_under_every_label(state.retiring, shared),
            cooldown_until=_under_every_label(state.cooldown_until, shared),
        )
        self._unreachable = dict(_under_every_label(self._unreachable, shared))
        readings = self._superseded(readings, now if read_at is None else read_at)
        planned: Sequence[Reading] = readings
        if shared or len(resolved) < len(addressable):
            planned = [
                replace(r, identity=shared[r.worker]) if r.worker in shared else r
                for r in readings
                if r.worker in resolved
            ]
        settings = self.settings
        if now < self._held_until:  # every worker is first seen after the hold began
            settings = replace(settings, min_age=max(settings.min_age, settings.retiring_for))
        else:  # over (or none): no longer written down
            self._held_until = -math.inf
        result = await asyncio.to_thread(plan, planned, self.state, settings, now)
        self.state = result.state
        if len(resolved) == len(addressable):
            return result
        left_out = {r.worker: r for r in readings if r.worker not in resolved}
        rejected = (
            Decision(
                w,
                r.idle,
                Verdict.UNRESOLVED if addressable[w] else Verdict.INVALID_ADDRESS,
                r.group,
            )
            for w, r in left_out.items()
        )
        return Plan((*result.decisions, *rejected), result.state, result.candidates)

    def record(self, worker: str, result: StopResult, now: float) -> list[str]:
        """What came of a stop of ``worker`` holds for every label of its worker (its
        ``identity`` in the last plan): a worker stopped under one label counts as gone
        under the others too, even on a cycle that reads or resolves it only under them.
        Returns those labels (``worker`` first)."""
        identity = self._shared.get(worker)  # None: no other label names its worker
        labels = [worker, *(w for w, i in self._shared.items() if i == identity and w != worker)]
        for label in labels:
            self.state = after_stop(
                self.state, label, result=result, now=now, settings=self.settings
            )
            if result is StopResult.UNREACHABLE:
                self._unreachable[label] = now
            else:  # it answered, or is retiring
                self._unreachable.pop(label, None)
        return labels

    def marks(self, shift: float) -> Marks:
        """The marks a restart must not lose, in Unix time: each monotonic moment plus
        ``shift`` (Unix time minus monotonic time)."""
        state = self.state
        return Marks(
            retiring={w: t + shift for w, t in state.retiring.items()},
            unreachable={w: t + shift for w, t in self._unreachable.items()},
            cooldown_until={w: t + shift for w, t in state.cooldown_until.items()},
            held_until=self._held_until + shift if math.isfinite(self._held_until) else None,
        )

    def restore(self, marks: Marks, shift: float, *, clock: float) -> None:
        """Take up the ``marks`` of an earlier process (``shift`` as for ``marks``,
        ``clock`` the Unix time now). A mark from after ``clock`` (this host's clock was
        set back) counts from now, a cooldown ends within ``cooldown`` from now, and a
        hold within ``retiring_for`` from now."""
        cooldown_end = clock + self.settings.cooldown
        if marks.held_until is not None:
            self._held_until = min(marks.held_until, clock + self.settings.retiring_for) - shift
        self.state = replace(
            self.state,
            retiring={w: min(t, clock) - shift for w, t in marks.retiring.items()},
            cooldown_until={
                w: min(t, cooldown_end) - shift for w, t in marks.cooldown_until.items()
            },
        )
        self._unreachable = {w: min(t, clock) - shift for w, t in marks.unreachable.items()}

    def hold(self, now: float) -> None:
        """Stop no one for ``retiring_for`` from ``now``, before the first plan (the
        marks of an earlier process are unknown: any stop it sent is over by then).
        A worker that would be stopped meanwhile is held back as ``min_age``. The hold
        is one of the ``marks``: a restart before it ends holds on."""
        self._held_until = now + self.settings.retiring_for

    def _superseded(self, readings: Sequence[Reading], read_at: float) -> Sequence[Reading]:
        """``readings``, each one whose sample is older than the last time its worker
        was found unreachable read as down: a source that goes on serving a crashed
        worker's last sample (a scrape interval longer than a cycle, a caching proxy)
        must not make it hold the floor, nor a worker the floor needs be stopped for
        it. Ages are set against ``read_at`` (the read's start, before the source
        answered), so a sample taken near the finding reads as older, never newer.
        A newer sample counts as read; once ``max_staleness`` has passed since, every
        fresh sample is newer, and the mark goes."""
        marks = self._unreachable
        if not marks:
            return readings
        self._unreachable = {
            w: t for w, t in marks.items() if read_at - t <= self.settings.max_staleness
        }
        return [
            replace(r, up=False) if r.worker in marks and r.age >= read_at - marks[r.worker] else r
            for r in readings
        ]

    def _check_addresses(self, readings: Sequence[Reading]) -> dict[str, bool]:
        """Whether each worker is an address; remembered for the workers seen last cycle."""
        known = self._addressable
        self._addressable = {
            r.worker: known[r.worker] if r.worker in known else _is_address(r.worker)
            for r in readings
        }
        return self._addressable

    def _warn_of_empty_group_labels(self, readings: Sequence[Reading]) -> None:
        """Warn, once until it changes, of each ``--group-by`` label no reading has a
        value for (a misspelt label puts every worker in one group: the floor is then
        fleet-wide)."""
        group_by = self.settings.group_by
        empty = frozenset(
            label
            for i, label in enumerate(group_by)
            if readings and not any(r.group[i] for r in readings if len(r.group) > i)
        )
        for label in sorted(empty - self._empty_group_labels):
            log.warning(
                "--group-by %s: no worker has a value for this label, so every worker is "
                "in one group for it (is it spelt as in the series?)",
                label,
            )
        self._empty_group_labels = empty


def _under_every_label(
    marks: Mapping[str, float], shared: Mapping[str, str]
) -> Mapping[str, float]:
    """``marks`` (moments by label: retiring since, cooling down until, found
    unreachable at) with every label of a worker (``shared``: one identity) marked at
    the latest of them, read this cycle or not: a worker stopped, cooling down or
    found unreachable under one spelling and read later under another is so under
    that one too."""
    latest: dict[str, float] = {}
    for worker, at in marks.items():
        if (identity := shared.get(worker)) is not None:
            latest[identity] = max(at, latest.get(identity, at))
    if not latest:
        return marks
    return {**marks, **{w: latest[i] for w, i in shared.items() if i in latest}}


def _is_address(worker: str) -> bool:
    try:
        parse_address(worker)
    except ValueError:
        return False
    return True
