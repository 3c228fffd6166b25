"""The autoscaler daemon: read, plan, act. Never overlapping, never dying of its input.

A cycle reads the source (a ``SourceError`` stops no one), asks the planner
for every worker's decision, has a group that would lose a worker confirm its
floor with its workers (``floor_check``), counts and logs them, then hands the planned
stops to the actuator, up to ``RETIRING_AT_ONCE`` at a time (a worker that
does not answer costs its own timeouts, not those of every stop after it),
and keeps the books of each as it comes (``bookkeeping``: a failure to record
or publish one is logged and touches no other). Once shutdown is asked for, what
is not a stop already sent is cut short (``leaving``), and the daemon leaves once
the stops still going on (workers draining) ended, or after ``exit_wait``; a
stop that ended after the cycle gave up waiting is learnt then.
While a stop goes on, its worker is retiring afresh each cycle, however long it
drains (an unbounded grace outlasts the planner's retiring time).
Given a ``state_file``, the planner's marks and the retired ones outlive the
process (``memory``); without one, a restart forgets them.
The daemon only orchestrates: the policy selects, the actuator confirms and
stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Final

from wool_idle.autoscaler import decision_log
from wool_idle.autoscaler.actuator import (
    ActionSettings,
    Actuator,
    BeforeStop,
    WorkerActuator,
)
from wool_idle.autoscaler.bookkeeping import StopBookkeeping
from wool_idle.autoscaler.decision_log import DECISION_LOG_SIZE, Record
from wool_idle.autoscaler.floor_check import answers, confirm_floors
from wool_idle.autoscaler.leaving import cut_short, unless_leaving
from wool_idle.autoscaler.memory import StopMemory
from wool_idle.autoscaler.metrics import AutoscalerMetrics
from wool_idle.autoscaler.planner import Planner, PolicyPlanner
from wool_idle.autoscaler.policy import Decision, PolicySettings, retiring_time
from wool_idle.autoscaler.sources import Source, SourceError
from wool_idle.autoscaler.state_file import StateFile
from wool_idle.autoscaler.stop_outcome import StopAttempt
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.contract import stop_deadline
from wool_idle.discovery.drop import Dropper
from wool_idle.logs import field_value

__all__ = ["ActionSettings", "Autoscaler"]

log = logging.getLogger("wool_idle.autoscaler")

RETIRING_AT_ONCE: Final = 16
"""Planned stops confirmed and sent at the same time, at most."""
EXIT_WAIT: Final = 20.0
"""Seconds the daemon, leaving, waits at least for stops still going on (workers
draining); see ``exit_wait``."""


def exit_wait(grace: float) -> float:
    """How long the daemon, leaving, waits for stops still going on: ``EXIT_WAIT``, or a
    stop's whole deadline (its drain and the margin) when that is longer, so a stop
    sent with ``grace`` is never cut short by the daemon (a wool worker whose stop call
    is cut never exits). With an unbounded grace (< 0) it is ``EXIT_WAIT``: such a
    drain may be cut."""
    deadline = stop_deadline(grace)
    return EXIT_WAIT if deadline is None else max(EXIT_WAIT, deadline)


@dataclass
class Autoscaler:
    """Runs cycles over ``source``: plans with ``policy`` (a stopped worker retiring for
    as long as ``action``'s grace may drain it and a reading of it from before it left
    may be fresh: ``retiring_time``), stops per ``action``."""

    source: Source
    policy: PolicySettings
    action: ActionSettings
    metrics: AutoscalerMetrics
    before_stop: BeforeStop | None = None
    dropper: Dropper | None = None
    state_file: StateFile | None = None
    records: deque[Record] = field(default_factory=lambda: deque(maxlen=DECISION_LOG_SIZE))
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    planner: Planner = field(init=False)
    actuator: Actuator = field(init=False)
    memory: StopMemory | None = field(init=False)
    bookkeeping: StopBookkeeping = field(init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _listed: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        retiring_for = retiring_time(self.action.grace, max_staleness=self.policy.max_staleness)
        rule = replace(self.policy, retiring_for=retiring_for)
        self.planner = planner = PolicyPlanner(rule)
        self.memory = None
        if self.state_file is not None:
            self.memory = StopMemory(
                self.state_file, planner, self.metrics.state_write_errors, self.metrics.retired
            )
        books = (planner, self.metrics, self.records, self.policy.group_by, self._lock)
        self.bookkeeping = StopBookkeeping(*books, self.memory, self.dropper)
        self.actuator = WorkerActuator(
            self.action,
            max_idle=self.policy.max_idle,
            dry_run=self.policy.dry_run,
            before_stop=self._before_stop,
            stop_ended=self.bookkeeping.stop_ended,
            leaving=self.stopping,
        )

    async def _before_stop(self, worker: str) -> None:
        """Right before a stop is sent: the bookkeeping's (the stop is not sent if it
        fails), then the ``before_stop`` given."""
        await self.bookkeeping.before_stop(worker)
        if self.before_stop is not None:
            await self.before_stop(worker)

    async def cycle(self) -> bool:
        """Run one cycle (waiting for any running one first); False if the source failed.
        Leaving cuts its read and plan short (``leaving``): no stop follows."""
        async with self._lock:
            started = time.monotonic()
            try:
                ok = await self._cycle()
            finally:
                self.metrics.cycle_duration.set(time.monotonic() - started)
                self.metrics.last_cycle.set(time.time())
            return ok

    async def _cycle(self) -> bool:
        # A sample's age counts from when the source answered, during the read: set
        # against when the read began, a sample taken just before a stop found its
        # worker unreachable reads as older than that finding (planner).
        read_at = time.monotonic()
        try:
            readings = await unless_leaving(self.stopping, self.source.read())
        except SourceError as error:
            self.metrics.source_up.set(0)
            log.warning("source %s unusable, stopping no one: %s", self.source.description, error)
            return False
        if readings is None:
            return cut_short("the read of the source")
        self.metrics.source_up.set(1)
        self._warn_of_no_worker(bool(readings))
        now = time.monotonic()
        for worker in self.actuator.going_on():  # retiring while it drains, however long
            self.planner.record(worker, StopResult.UNANSWERED, now)
        planning = self.planner.plan(readings, now, read_at=read_at)  # name lookups: seconds
        if (plan := await unless_leaving(self.stopping, planning)) is None:
            return cut_short("the plan")
        ask = functools.partial(answers, settings=self.action)
        plan = await confirm_floors(plan, self.policy.min_workers, ask, self.stopping)
        self.metrics.retired.forget_replaced(readings, plan.state.retiring)
        self.metrics.candidates.set(plan.candidates)
        for decision in plan.decisions:
            self._note_unacted(decision)
        at_once = asyncio.Semaphore(RETIRING_AT_ONCE)
        await asyncio.gather(*(self._retire(decision, at_once) for decision in plan.stops))
        if self.memory is not None:  # marks that ran out (leaving: not waited for, a hung mount)
            await unless_leaving(self.stopping, self.memory.save())
        return True

    async def _retire(self, decision: Decision, at_once: asyncio.Semaphore) -> None:
        """Confirm and stop ``decision``'s worker (unless shutting down: ``leaving``) when
        ``at_once`` lets it, then settle what came of it. Raises nothing but cancellation: an
        actuator that fails counts as a stop whose outcome is unknown (retiring)."""
        async with at_once:
            try:
                attempt = None if self.stopping.is_set() else await self.actuator.retire(decision)
            except Exception:
                log.exception(
                    "worker %s: retiring it failed; it counts as retiring",
                    field_value(decision.worker),
                )
                attempt = StopAttempt(StopResult.UNANSWERED)
        if attempt is None:  # shutting down before its stop was sent: nothing came of it
            log.info("shutting down: %s not stopped", field_value(decision.worker))
            return
        try:
            await self.bookkeeping.settle(decision, attempt)
        except Exception:  # a fault of ours: the other stops of the cycle settle as usual
            log.exception("worker %s: settling its stop failed", field_value(decision.worker))

    def _warn_of_no_worker(self, listed: bool) -> None:
        """Warn, once until workers are listed again, of a read that lists no worker: a
        source URL that answers other metrics (the exporter's /metrics/exporter, a
        Prometheus server's own /metrics), a Prometheus server that does not scrape the
        exporter, or a ``--selector`` that matches no series, reads as a fleet of none:
        the source's ``empty_hint`` asks which."""
        if not listed and self._listed:
            log.warning(
                "source %s lists no worker, so there is nothing to retire (%s)",
                self.source.description,
                self.source.empty_hint,
            )
        self._listed = listed

    def _note_unacted(self, decision: Decision) -> None:
        """Count and log a decision that is not acted on."""
        if decision.verdict.blocks:
            self.metrics.blocked.labels(decision.verdict.value).inc()
            decision_log.append(self.records, Record.of(decision, self.policy.group_by))
        elif decision.verdict is not Verdict.STOP and log.isEnabledFor(logging.DEBUG):
            decision_log.write(Record.of(decision, self.policy.group_by), logging.DEBUG)

    def _recall(self) -> None:
        """Take up the marks of the ``state_file`` (given one), before the first cycle."""
        if self.memory is not None:
            self.memory.recall()

    async def run(self, interval: float) -> None:
        """Run cycles every ``interval`` seconds until ``stopping`` is set.

        A cycle that fails unexpectedly is logged and counted (``cycle_errors``) and
        stops no one more; the next cycle runs as usual. What start-up made is
        frozen first (``gc.freeze``), so the full collections the cycles trigger do
        not scan it again each time.
        Once stopping, it waits (``exit_wait`` at most) for the stops going on.
        """
        self._recall()
        gc.collect()
        gc.freeze()
        while not self.stopping.is_set():
            try:
                await self.cycle()
            except Exception:
                self.metrics.cycle_errors.inc()
                log.exception("cycle failed, stopping no one more this cycle")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), interval)
        await self.actuator.finish_stops(exit_wait(self.action.grace))

    async def once(self) -> bool:
        """Run one cycle, then wait (``exit_wait`` at most) for its stops still going
        on; False if the source failed."""
        self._recall()
        try:
            return await self.cycle()
        finally:
            await self.actuator.finish_stops(exit_wait(self.action.grace))
