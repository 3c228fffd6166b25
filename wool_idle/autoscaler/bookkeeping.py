"""What the daemon keeps around each stop: before it is sent, and once it ended.

Before a stop is sent it is written down (given a ``StopMemory``: the stop is
not sent if that fails) and the discovery records at the worker's address are
noted (given a ``dropper``: its drop drops only one of them). Once it ended the
planner learns what came of it first; then a worker stopped, or whose stop got
no answer (it may be draining), is marked retired (``retired``) under every label
the last plan read it under (the source goes on reading each down); then it is
written down (the retired mark with it), counted and logged. A worker stopped
has its drop published in wool's discovery (of the record noted, never of a
worker published since), in the namespaces its series name (none for a worker
whose series name none: a worker of a targets file); a drop that fails is counted
and logged, never undoes the stop. A stop that ended otherwise, and goes on
nowhere, has its note forgotten.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from wool_idle.autoscaler import decision_log
from wool_idle.autoscaler.decision_log import Record
from wool_idle.autoscaler.memory import StopMemory
from wool_idle.autoscaler.metrics import AutoscalerMetrics
from wool_idle.autoscaler.planner import Planner
from wool_idle.autoscaler.policy import Decision
from wool_idle.autoscaler.stop_outcome import StopAttempt
from wool_idle.autoscaler.verdicts import StopResult
from wool_idle.discovery.drop import Dropper
from wool_idle.logs import field_value

log = logging.getLogger("wool_idle.autoscaler")


@dataclass
class StopBookkeeping:
    """Keeps ``planner``, ``memory``, ``metrics``, the decision log ``records`` and
    ``dropper`` up to date with each stop; ``lock`` is the daemon's cycle lock (a stop
    ending in the background is taken in between cycles)."""

    planner: Planner
    metrics: AutoscalerMetrics
    records: deque[Record]
    group_by: Sequence[str]
    lock: asyncio.Lock
    memory: StopMemory | None = None
    dropper: Dropper | None = None

    async def before_stop(self, worker: str) -> None:
        """Right before a stop of ``worker`` is sent: write it down, note its records."""
        if self.memory is not None:
            await self.memory.before_stop(worker)
        if self.dropper is not None:
            self.dropper.note(worker)

    async def settle(self, decision: Decision, attempt: StopAttempt) -> None:
        """Record, count and log what came of the planned stop of ``decision``."""
        labels = self.planner.record(decision.worker, attempt.result, time.monotonic())
        record = Record.of(decision, self.group_by, attempt.result, attempt.confirmed_idle)
        if attempt.result in (StopResult.STOPPED, StopResult.UNANSWERED):  # its whole group
            for label in labels:
                self.metrics.retired.mark(label, self._group(decision))
        if self.memory is not None:  # with the retired mark
            await self.memory.settled(decision.worker)
        self.metrics.stops.labels(attempt.result.value).inc()
        decision_log.append(self.records, record)
        if attempt.result is StopResult.STOPPED:
            await self._drop(decision)
        elif not attempt.going_on:  # an unanswered call ended at once has no stop_ended
            self._forget_note(decision.worker)

    async def stop_ended(self, decision: Decision, ended: StopResult) -> None:
        """A stop that went on in the background ended with ``ended``. Stopped, or cut off
        (``unanswered``: it may have exited), its worker is retiring and retired from now
        on (the marks of its first ``unanswered`` may have run out while it drained);
        stopped, its drop is published. Refused after all, it is neither, and cools
        down. Between cycles only: a plan under way would overwrite what the planner
        learnt meanwhile."""
        worker = decision.worker
        async with self.lock:
            gone = ended in (StopResult.STOPPED, StopResult.UNANSWERED)
            labels = self.planner.record(
                worker, StopResult.STOPPED if gone else ended, time.monotonic()
            )
            for label in labels:
                if gone:
                    self.metrics.retired.mark(label, self._group(decision))
                else:
                    self.metrics.retired.forget(label)
            if self.memory is not None:  # with the retired mark
                await self.memory.settled(worker)
            if ended is not StopResult.STOPPED:
                self._forget_note(worker)
            if ended is StopResult.STOPPED:
                await self._drop(decision)

    def _group(self, decision: Decision) -> dict[str, str]:
        """``decision``'s group labels as its worker's series carry them (whole: the
        decision log's record may cut a long one)."""
        return dict(zip(self.group_by, decision.group, strict=False))

    def _forget_note(self, worker: str) -> None:
        """The stop of ``worker`` ended with no drop to make: forget its note."""
        if self.dropper is not None:
            self.dropper.forget(worker)

    async def _drop(self, decision: Decision) -> None:
        """Publish the drop of ``decision``'s worker from the namespaces its series name
        (given a ``dropper``); a failure is logged, no drop to make is not counted."""
        if self.dropper is None:
            return
        try:
            dropped = await self.dropper.drop(decision.worker, decision.namespaces)
        except Exception:
            log.exception("worker %s: publishing its drop failed", field_value(decision.worker))
            return
        if dropped is not None:
            self.metrics.drops.labels(dropped.value).inc()
