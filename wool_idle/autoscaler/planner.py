"""The planner: selects the workers to retire, and remembers between cycles.

It wraps the pure policy with the one check the policy cannot make without
the worker package: that the ``worker`` label is an address the actuator
could dial. A reading whose label is not one gets ``invalid_address`` and
takes no part in the plan (it neither holds up the floor nor uses a stop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from wool_idle.autoscaler.policy import (
    Decision,
    Plan,
    PolicySettings,
    PolicyState,
    Reading,
    after_stop,
    plan,
)
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.worker.address import parse_address


class Planner(Protocol):
    """Decides each cycle, and learns what came of the stops it asked for."""

    def plan(self, readings: Sequence[Reading], now: float) -> Plan:
        """Every worker's decision for this cycle (``now`` on a monotonic clock)."""
        ...

    def record(self, worker: str, result: StopResult, now: float) -> None:
        """Take into account what came of a planned stop of ``worker``."""
        ...


class PolicyPlanner:
    """The ``Planner`` of the daemon: address check, then the pure policy."""

    def __init__(self, settings: PolicySettings) -> None:
        self.settings = settings
        self.state = PolicyState()
        self._addressable: dict[str, bool] = {}

    def plan(self, readings: Sequence[Reading], now: float) -> Plan:
        addressable = self._check_addresses(readings)
        result = plan(
            [r for r in readings if addressable[r.worker]], self.state, self.settings, now
        )
        self.state = result.state
        unaddressable = {r.worker: r.idle for r in readings if not addressable[r.worker]}
        rejected = (Decision(w, idle, Verdict.INVALID_ADDRESS) for w, idle in unaddressable.items())
        return Plan((*result.decisions, *rejected), result.state, result.candidates)

    def record(self, worker: str, result: StopResult, now: float) -> None:
        self.state = after_stop(self.state, worker, result=result, now=now, settings=self.settings)

    def _check_addresses(self, readings: Sequence[Reading]) -> dict[str, bool]:
        """Whether each worker is an address; remembered for the workers seen last cycle."""
        known = self._addressable
        self._addressable = {
            r.worker: known[r.worker] if r.worker in known else _is_address(r.worker)
            for r in readings
        }
        return self._addressable


def _is_address(worker: str) -> bool:
    try:
        parse_address(worker)
    except ValueError:
        return False
    return True
