"""The planner: the address check and the resolution around the pure policy, and its
memory."""

from __future__ import annotations

import random
import socket
from dataclasses import replace
from pathlib import Path

import pytest
from support import policy_model

from wool_idle.autoscaler.identity import AddressResolver
from wool_idle.autoscaler.planner import PolicyPlanner
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.state_file import Marks
from wool_idle.autoscaler.verdicts import StopResult, Verdict

RULE = PolicySettings(max_idle=60.0, min_workers=0)
A, B, C = "127.0.0.1:1", "127.0.0.2:1", "127.0.0.3:1"


class TestPolicyPlanner:
    @pytest.mark.parametrize(
        "worker",
        [
            "worker-name",
            "127.0.0.1:5 ",
            " 127.0.0.1:5",
            "127.0.0.1",
            "",
            "a:b:1",
            "h:0",
        ],
    )
    async def test_plan_label_not_an_address(self, worker: str) -> None:
        """Given an idle reading whose worker label is not an address (a name, a
        trailing or leading space, no port, port 0), when planned, then its verdict is
        invalid_address and it is never a stop."""
        # Act
        plan = await PolicyPlanner(RULE).plan([Reading(worker, 500.0)], 0.0)
        # Assert
        assert [(d.worker, d.verdict) for d in plan.decisions] == [
            (worker, Verdict.INVALID_ADDRESS)
        ]
        assert plan.stops == ()

    @pytest.mark.parametrize("worker", ["127.0.0.1:5", "localhost:50051", "[::1]:5", "unix:"])
    async def test_plan_addresses_are_planned(self, worker: str, tmp_path: Path) -> None:
        """Given an idle reading whose worker label is an address (a unix one where a
        socket is), when planned, then it is a stop."""
        # Arrange
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(str(tmp_path / "w.sock"))
        if worker == "unix:":
            worker += str(tmp_path / "w.sock")
        # Act
        plan = await PolicyPlanner(RULE).plan([Reading(worker, 500.0)], 0.0)
        listening.close()
        # Assert
        assert [d.worker for d in plan.stops] == [worker]

    async def test_plan_unaddressable_worker_does_not_hold_the_floor(self) -> None:
        """Given a floor of 1, one idle worker and one up worker whose label is a name,
        when planned, then the idle worker is held by min_workers: a worker the
        autoscaler cannot address does not count towards the floor."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        readings = [Reading("127.0.0.1:1", 500.0), Reading("name", 0.0)]
        # Act
        plan = await PolicyPlanner(rule).plan(readings, 0.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            "127.0.0.1:1": Verdict.MIN_WORKERS,
            "name": Verdict.INVALID_ADDRESS,
        }

    async def test_record_stopped_then_failed(self) -> None:
        """Given a planned stop, when the planner records it stopped, then the worker is
        retiring next cycle; when a later stop of another worker fails, that one cools
        down."""
        # Arrange
        planner = PolicyPlanner(RULE)
        await planner.plan([Reading(A, 500.0), Reading(B, 400.0)], 0.0)
        # Act
        planner.record(A, StopResult.STOPPED, 1.0)
        planner.record(B, StopResult.UNREACHABLE, 1.0)
        plan = await planner.plan([Reading(A, 501.0), Reading(B, 401.0)], 2.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            A: Verdict.RETIRING,
            B: Verdict.COOLDOWN,
        }

    async def test_plan_unresolved_worker_does_not_hold_the_floor(self) -> None:
        """Given a floor of 1, one idle worker, and up workers whose labels do not
        resolve (no such host, a relative unix path, no socket at the path), when
        planned, then those are unresolved (never stopped) and the idle worker is held
        by min_workers: a worker whose identity is unknown does not count toward the
        floor."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        unknown = ["no-such-host.invalid:1", "unix:relative.sock", "unix:/no/such/socket"]
        readings = [Reading(A, 500.0), *(Reading(w, 0.0) for w in unknown)]
        # Act
        plan = await PolicyPlanner(rule).plan(readings, 0.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            A: Verdict.MIN_WORKERS,
            **dict.fromkeys(unknown, Verdict.UNRESOLVED),
        }

    async def test_plan_worker_unresolved_for_a_cycle_stays_retiring(self, tmp_path: Path) -> None:
        """Given a floor of 1 and a worker on a unix socket that was just stopped, when
        its socket is gone for one cycle (unresolved) and back the next, reading busy
        (still draining) beside an idle worker, then it still counts as gone
        (retiring), not alive: the idle worker is held by the floor."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        path = tmp_path / "w.sock"
        draining = f"unix:{path}"
        planner = PolicyPlanner(rule, AddressResolver(ttl=0.0))
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(str(path))
        first = await planner.plan([Reading(draining, 500.0), Reading(A, 0.0)], 0.0)
        planner.record(draining, StopResult.STOPPED, 0.5)
        listening.close()
        path.unlink()
        # Act
        gone = await planner.plan([Reading(draining, 0.0), Reading(A, 0.0)], 1.0)
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(str(path))
        back = await planner.plan([Reading(draining, 0.0), Reading(A, 500.0)], 2.0)
        listening.close()
        # Assert
        assert [d.worker for d in first.stops] == [draining]
        assert {d.worker: d.verdict for d in gone.decisions}[draining] is Verdict.UNRESOLVED
        assert {d.worker: d.verdict for d in back.decisions} == {
            draining: Verdict.BUSY,
            A: Verdict.MIN_WORKERS,
        }

    async def test_record_stopped_retires_every_spelling(self, tmp_path: Path) -> None:
        """Given a floor of 1, a busy worker, and an idle one read under two spellings
        (through a symlinked directory and its real path) and stopped under the first,
        when the symlink is gone the next cycle (that spelling unresolved) and the
        other spelling reads busy (still draining) beside the first worker now idle,
        then the draining worker still counts as gone: the idle one is held by the
        floor, not stopped."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        (tmp_path / "real").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "real")
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(str(tmp_path / "real" / "w.sock"))
        linked, real = f"unix:{tmp_path}/link/w.sock", f"unix:{tmp_path}/real/w.sock"
        planner = PolicyPlanner(rule, AddressResolver(ttl=0.0))
        first = await planner.plan(
            [Reading(linked, 500.0), Reading(real, 500.0), Reading(A, 0.0)], 0.0
        )
        planner.record(linked, StopResult.STOPPED, 0.5)
        (tmp_path / "link").unlink()
        # Act
        second = await planner.plan(
            [Reading(linked, 0.0), Reading(real, 0.0), Reading(A, 500.0)], 1.0
        )
        listening.close()
        # Assert
        assert [d.worker for d in first.stops] == [linked]
        assert {d.worker: d.verdict for d in second.decisions} == {
            linked: Verdict.UNRESOLVED,
            real: Verdict.BUSY,
            A: Verdict.MIN_WORKERS,
        }

    @pytest.mark.parametrize("later", ["127.0.0.1:7", "[::1]:7"])
    async def test_plan_worker_stopped_under_one_spelling_is_retiring_under_another(
        self, later: str
    ) -> None:
        """Given a floor of 1 and a worker read only as localhost:P and stopped under it,
        when later cycles read it only under another spelling (an exporter's targets
        respelt, another shard of a federation), reading busy (still draining) beside
        another worker now idle, then it still counts as gone (retiring): the idle one
        is held by the floor, not stopped."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        planner = PolicyPlanner(rule)
        first = await planner.plan([Reading("localhost:7", 500.0), Reading(B, 0.0)], 0.0)
        planner.record("localhost:7", StopResult.STOPPED, 0.5)
        # Act
        second = await planner.plan([Reading(later, 0.0), Reading(B, 500.0)], 1.0)
        # Assert
        assert [d.worker for d in first.stops] == ["localhost:7"]
        assert {d.worker: d.verdict for d in second.decisions} == {
            later: Verdict.BUSY,
            B: Verdict.MIN_WORKERS,
        }
        assert later in planner.state.retiring

    async def test_plan_worker_unreachable_under_one_spelling_is_down_under_another(
        self,
    ) -> None:
        """Given a floor of 1 and a worker read as 127.0.0.1:P, stopped under it and
        found unreachable (it crashed), when the next cycle reads it only as [::1]:P (a
        target respelt, another shard) on the sample from before the finding, beside
        another worker idle longer, then that sample is down under this spelling too:
        it holds no floor, and the other worker is held by min_workers, not stopped."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        planner = PolicyPlanner(rule)
        first = await planner.plan([Reading(A, 500.0), Reading(B, 0.0)], 0.0)
        planner.record(A, StopResult.UNREACHABLE, 0.5)
        # Act
        second = await planner.plan([Reading("[::1]:1", 500.0, age=1.0), Reading(B, 600.0)], 1.0)
        # Assert
        assert [d.worker for d in first.stops] == [A]
        assert {d.worker: d.verdict for d in second.decisions} == {
            "[::1]:1": Verdict.DOWN,
            B: Verdict.MIN_WORKERS,
        }

    @pytest.mark.parametrize("result", [StopResult.REFUSED_BUSY, StopResult.FAILED])
    async def test_plan_worker_cooling_down_under_one_spelling_is_under_another(
        self, result: StopResult
    ) -> None:
        """Given a worker read as 127.0.0.1:P whose planned stop was refused or failed,
        when the next cycle reads it, idle, only as [::1]:P, then it cools down under
        that spelling too: not stopped again before the cooldown ends."""
        # Arrange
        planner = PolicyPlanner(RULE)
        await planner.plan([Reading(A, 500.0)], 0.0)
        planner.record(A, result, 0.5)
        # Act
        plan = await planner.plan([Reading("[::1]:1", 501.0)], 1.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {"[::1]:1": Verdict.COOLDOWN}

    async def test_restore_stop_under_another_spelling_is_retiring(self) -> None:
        """Given the marks of an earlier process that stopped localhost:P, when a new
        planner restores them and reads the worker only as 127.0.0.1:P (busy, still
        draining) beside an idle worker, with a floor of 1, then the draining worker is
        retiring (counts as gone) and the idle one is held by the floor."""
        # Arrange
        planner = PolicyPlanner(PolicySettings(max_idle=60.0, min_workers=1))
        planner.restore(Marks(retiring={"localhost:7": SHIFT}), SHIFT, clock=SHIFT + 1.0)
        # Act
        plan = await planner.plan([Reading("127.0.0.1:7", 0.0), Reading(B, 500.0)], 1.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            "127.0.0.1:7": Verdict.BUSY,
            B: Verdict.MIN_WORKERS,
        }
        assert "127.0.0.1:7" in planner.state.retiring

    @pytest.mark.parametrize("other", ["localhost:7", "[::1]:7"])
    async def test_plan_two_spellings_of_one_worker_count_once(self, other: str) -> None:
        """Given the only worker read as 127.0.0.1:P and as localhost:P, or as [::1]:P
        (a worker bound on localhost answers on both families), both idle, and a floor
        of 1, when planned, then it is not stopped (min_workers, and alias for the
        other spelling); with no floor it is stopped once, under 127.0.0.1:P."""
        # Arrange
        readings = [Reading(other, 500.0), Reading("127.0.0.1:7", 500.0)]
        floor = PolicySettings(max_idle=60.0, min_workers=1)
        # Act
        held = await PolicyPlanner(floor).plan(readings, 0.0)
        stopped = await PolicyPlanner(RULE).plan(readings, 0.0)
        # Assert
        assert {d.worker: d.verdict for d in held.decisions} == {
            "127.0.0.1:7": Verdict.MIN_WORKERS,
            other: Verdict.ALIAS,
        }
        assert [d.worker for d in stopped.stops] == ["127.0.0.1:7"]

    async def test_plan_worker_under_an_ipv4_spelling_read_apart_is_unresolved(self) -> None:
        """Given the only worker read as 127.0.0.10:P and as 127.0.0.010:P (gRPC dials
        127.0.0.10 for both; getaddrinfo reads 010 as octal, 127.0.0.8), both idle, and
        a floor of 1, when planned, then it is not stopped: the second label is
        unresolved, and holds no floor (it counted as a second worker, and one of the
        two labels was stopped)."""
        # Arrange
        readings = [Reading("127.0.0.10:7", 500.0), Reading("127.0.0.010:7", 500.0)]
        floor = PolicySettings(max_idle=60.0, min_workers=1)
        # Act
        plan = await PolicyPlanner(floor).plan(readings, 0.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            "127.0.0.10:7": Verdict.MIN_WORKERS,
            "127.0.0.010:7": Verdict.UNRESOLVED,
        }

    async def test_plan_one_socket_under_two_real_paths_counts_once(self, tmp_path: Path) -> None:
        """Given the only worker's socket read under two paths that are not links of
        each other (a hard link, as a bind mount makes too: two real paths, one
        socket), both idle, and a floor of 1, when planned, then it is not stopped:
        the two labels are one worker (min_workers, and alias for the other)."""
        # Arrange
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(str(tmp_path / "w.sock"))
        listening.listen()
        (tmp_path / "mounted.sock").hardlink_to(tmp_path / "w.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(tmp_path / "mounted.sock"))  # the same listener answers
            listening.accept()[0].close()
        labels = [f"unix:{tmp_path}/w.sock", f"unix:{tmp_path}/mounted.sock"]
        floor = PolicySettings(max_idle=60.0, min_workers=1)
        # Act
        plan = await PolicyPlanner(floor).plan([Reading(w, 500.0) for w in labels], 0.0)
        listening.close()
        # Assert
        assert sorted(d.verdict for d in plan.decisions) == [Verdict.ALIAS, Verdict.MIN_WORKERS]

    async def test_plan_warns_once_of_a_group_label_no_worker_has(self, caplog) -> None:
        """Given --group-by naming a label no reading has a value for (a misspelt
        wool_tags), when planned twice, then one warning names it; when a worker then
        carries it, a later absence warns again."""
        # Arrange
        planner = PolicyPlanner(PolicySettings(max_idle=60.0, group_by=("wool_tag", "pool")))
        unlabelled = [Reading(A, 0.0, group=("", "a")), Reading(B, 0.0, group=("", "b"))]
        labelled = [Reading(A, 0.0, group=("hot", "a"))]
        # Act
        await planner.plan(unlabelled, 0.0)
        await planner.plan(unlabelled, 1.0)
        first = caplog.text.count("--group-by wool_tag:")
        await planner.plan(labelled, 2.0)
        await planner.plan(unlabelled, 3.0)
        # Assert
        assert first == 1
        assert caplog.text.count("--group-by wool_tag:") == 2
        assert "--group-by pool" not in caplog.text


SHIFT = 1_800_000_000.0
"""Unix time minus monotonic time, in these tests."""


class TestPlannerMarks:
    async def test_restore_marks_of_an_earlier_process(self) -> None:
        """Given the marks an earlier planner wrote (A stopped, B refused and cooling
        down), when a new planner restores them 10 s later and plans with a floor of 2,
        then A is retiring and counts as gone for the floor (C, idle, is held by it: B
        and C are the two left), and B cools down."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=2)
        earlier = PolicyPlanner(rule)
        await earlier.plan([Reading(A, 500.0), Reading(B, 400.0)], 0.0)
        earlier.record(A, StopResult.STOPPED, 0.0)
        earlier.record(B, StopResult.REFUSED_BUSY, 0.0)
        marks = earlier.marks(SHIFT)
        planner = PolicyPlanner(rule)
        # Act
        planner.restore(marks, SHIFT - 50.0, clock=SHIFT + 10.0)  # monotonic now: 60.0
        plan = await planner.plan([Reading(A, 510.0), Reading(B, 410.0), Reading(C, 300.0)], 60.0)
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            A: Verdict.RETIRING,
            B: Verdict.COOLDOWN,
            C: Verdict.MIN_WORKERS,
        }
        assert planner.marks(SHIFT - 50.0) == marks

    async def test_restore_marks_from_the_future_count_from_now(self) -> None:
        """Given marks written after this host's clock now says (it was set back an
        hour), when restored, then a stop counts from now (retiring for the whole
        retiring time, not past it) and a cooldown ends within the cooldown from now."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, cooldown=300.0)
        future = SHIFT + 3600.0
        planner = PolicyPlanner(rule)
        # Act
        planner.restore(
            Marks(retiring={A: future}, cooldown_until={B: future + 10**6}), SHIFT, clock=SHIFT
        )
        # Assert
        assert planner.state.retiring == {A: 0.0}
        assert planner.state.cooldown_until == {B: 300.0}

    async def test_hold_stops_no_one_for_the_retiring_time(self) -> None:
        """Given a planner held at 0 (an earlier process's stops are unknown), when an
        idle worker is planned before the retiring time has passed, then it is held as
        min_age; once it has passed, it is a stop."""
        # Arrange
        planner = PolicyPlanner(RULE)
        planner.hold(0.0)
        # Act
        held = [await planner.plan([Reading(A, 500.0)], t) for t in (1.0, RULE.retiring_for - 1)]
        after = await planner.plan([Reading(A, 500.0)], RULE.retiring_for)
        # Assert
        assert [p.decisions[0].verdict for p in held] == [Verdict.MIN_AGE] * 2
        assert [d.worker for d in after.stops] == [A]


SCENARIOS = 300
"""Seeded random fleets the model-based property test drives the planner through."""


async def run_scenario(seed: int, cycles: int = 12) -> tuple[list[str], list[str]]:
    """Drive a planner through one seeded fleet: reads, stops whose results are fed
    back (a stop going on refreshed each cycle, as the daemon does), restarts that keep
    the marks (some held). The ways its plans break the model's rules, and the plans."""
    rng = random.Random(seed)
    rule = policy_model.random_rule(rng)
    fleet = policy_model.Fleet(rng, rule, rng.random() < 0.3, rng.choice([1.0, 0.3, 0.1]))
    model, planner = policy_model.Model(rule), PolicyPlanner(rule)
    now = last = 1000.0  # the clock never goes back: no cycle before the last result
    going_on, problems, plans = set[str](), [], []
    for cycle in range(cycles):
        now = max(now + rng.choice([0.0, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 150.0, 400.0]), last)
        read_at = now - rng.choice([0.0, 0.1])
        if rng.random() < 0.08:  # a restart
            marks, planner = planner.marks(SHIFT), PolicyPlanner(rule)
            if rng.random() < 0.3:  # without a readable state file
                marks = replace(marks, held_until=None)
                planner.hold(now - 1.0)
                model.held_until = now - 1.0 + rule.retiring_for
            planner.restore(marks, SHIFT, clock=now + SHIFT)
            if marks.held_until is not None:
                model.held_until = min(marks.held_until, now + SHIFT + rule.retiring_for) - SHIFT
            model.restarted(SHIFT, now)
            going_on.clear()
        for worker in going_on:
            planner.record(worker, StopResult.UNANSWERED, now)
            model.recorded(worker, StopResult.UNANSWERED, now)
        readings = fleet.read()
        view = model.observe(readings, now, read_at)
        plan = await planner.plan(readings, now, read_at=read_at)
        plans.append(repr((plan.decisions, plan.candidates)))
        found = model.forbidden(plan, readings, view, now)
        if fleet.simple and sorted(d.worker for d in plan.stops) != model.expected_stops(view, now):
            found.append(f"stops {plan.stops}, expected {model.expected_stops(view, now)}")
        problems += [f"seed {seed} cycle {cycle}: {problem}" for problem in found]
        for decision in plan.stops:
            result, at = rng.choice(list(StopResult)), now + rng.choice([0.0, 0.2])
            last = max(last, at)
            planner.record(decision.worker, result, at)
            model.recorded(decision.worker, result, at)
            if result is StopResult.UNANSWERED and rng.random() < 0.3:
                going_on.add(decision.worker)
    return problems, plans


class TestPlannerModelProperties:
    async def test_plan_follows_the_rules_over_random_fleets(self) -> None:
        """Given seeded random fleets (workers read under changing spellings, readings
        NaN, infinite, negative, stale, duplicated, conflicting, unresolved; workers
        coming, going and going down; every stop result fed back; time moving on
        irregularly; restarts keeping the marks), when planned cycle by cycle, then no
        plan stops a worker the reference model's rules forbid (busy, stale, unknown,
        conflicting, retiring, cooling down, too young, below the floor, over the rate
        limit, twice, or under a spelling other than its first), a worker held back is
        never idler than one stopped, fleets of one label per worker get exactly the
        model's stops, and the same fleet planned again gets the same plans."""
        # Arrange
        seeds = range(SCENARIOS)
        # Act
        runs = [await run_scenario(seed) for seed in seeds]
        again = [await run_scenario(seed) for seed in seeds[::10]]
        # Assert
        assert [p for problems, _ in runs for p in problems][:5] == []
        assert [plans for _, plans in again] == [plans for _, plans in runs[::10]]
