"""The planner: the address check around the pure policy, and its memory."""

from __future__ import annotations

import pytest

from wool_idle.autoscaler.planner import PolicyPlanner
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.verdicts import StopResult, Verdict

RULE = PolicySettings(max_idle=60.0, min_workers=0)


class TestPolicyPlanner:
    @pytest.mark.parametrize(
        "worker", ["worker-name", "127.0.0.1:5 ", " 127.0.0.1:5", "127.0.0.1", "", "a:b:1", "h:0"]
    )
    def test_plan_label_not_an_address(self, worker: str) -> None:
        """Given an idle reading whose worker label is not an address (a name, a
        trailing or leading space, no port, port 0), when planned, then its verdict is
        invalid_address and it is never a stop."""
        # Act
        plan = PolicyPlanner(RULE).plan([Reading(worker, 500.0)], 0.0)
        # Assert
        assert [(d.worker, d.verdict) for d in plan.decisions] == [
            (worker, Verdict.INVALID_ADDRESS)
        ]
        assert plan.stops == ()

    @pytest.mark.parametrize("worker", ["127.0.0.1:5", "host.example:50051", "[::1]:5", "unix:/w"])
    def test_plan_addresses_are_planned(self, worker: str) -> None:
        """Given an idle reading whose worker label is an address, when planned, then it
        is a stop."""
        # Act
        plan = PolicyPlanner(RULE).plan([Reading(worker, 500.0)], 0.0)
        # Assert
        assert [d.worker for d in plan.stops] == [worker]

    def test_plan_unaddressable_worker_does_not_hold_the_floor(self) -> None:
        """Given a floor of 1, one idle worker and one up worker whose label is a name,
        when planned, then the idle worker is held by min_workers: a worker the
        autoscaler cannot address does not count towards the floor."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        readings = [Reading("a:1", 500.0), Reading("name", 0.0)]
        # Act
        plan = PolicyPlanner(rule).plan(readings, 0.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            "a:1": Verdict.MIN_WORKERS,
            "name": Verdict.INVALID_ADDRESS,
        }

    def test_record_stopped_then_failed(self) -> None:
        """Given a planned stop, when the planner records it stopped, then the worker is
        retiring next cycle; when a later stop of another worker fails, that one cools
        down."""
        # Arrange
        planner = PolicyPlanner(RULE)
        planner.plan([Reading("a:1", 500.0), Reading("b:1", 400.0)], 0.0)
        # Act
        planner.record("a:1", StopResult.STOPPED, 1.0)
        planner.record("b:1", StopResult.UNREACHABLE, 1.0)
        plan = planner.plan([Reading("a:1", 501.0), Reading("b:1", 401.0)], 2.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            "a:1": Verdict.RETIRING,
            "b:1": Verdict.COOLDOWN,
        }
