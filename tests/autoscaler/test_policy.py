"""The pure retirement policy: examples and properties."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from wool_idle.autoscaler import floor
from wool_idle.autoscaler.policy import (
    RETIRING_TTL,
    PolicySettings,
    PolicyState,
    Reading,
    after_stop,
    plan,
    retiring_time,
)
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.contract import valid_idle

RULE = PolicySettings(max_idle=60.0, min_workers=0, max_stops_per_cycle=10, cooldown=100.0)


EMPTY = PolicyState()


def verdicts(readings, state=EMPTY, rule=RULE, now=0.0):
    return {d.worker: d.verdict for d in plan(readings, state, rule, now).decisions}


def stopped(state, worker, now, rule=RULE):
    return after_stop(state, worker, result=StopResult.STOPPED, now=now, settings=rule)


class TestPlan:
    @pytest.mark.parametrize(
        ("reading", "expected"),
        [
            (Reading("w", 60.0), Verdict.STOP),
            (Reading("w", 59.999), Verdict.BUSY),
            (Reading("w", 0.0), Verdict.BUSY),
            (Reading("w", None), Verdict.INVALID_VALUE),
            (Reading("w", math.nan), Verdict.INVALID_VALUE),
            (Reading("w", math.inf), Verdict.INVALID_VALUE),
            (Reading("w", -1.0), Verdict.INVALID_VALUE),
            (Reading("w", 100.0, up=False), Verdict.DOWN),
            (Reading("w", 100.0, supported=False), Verdict.UNSUPPORTED),
            (Reading("w", 100.0, age=61.0), Verdict.STALE),
            (Reading("w", 100.0, age=-1.0), Verdict.STALE),
            (Reading("w", 100.0, age=math.inf), Verdict.STALE),
            (Reading("w", 100.0, alerting=False), Verdict.NOT_ALERTING),
            (Reading("w", 100.0, conflicting=True), Verdict.CONFLICTING),
            (Reading("w", 100.0, up=False, conflicting=True), Verdict.CONFLICTING),
        ],
    )
    def test_plan_single_reading(self, reading: Reading, expected: Verdict) -> None:
        """Given one reading, when planned, then its verdict follows the rule."""
        # Act / Assert
        assert verdicts([reading]) == {"w": expected}

    def test_plan_min_workers_floor(self) -> None:
        """Given four idle workers and a floor of 2, when planned, then the two
        longest idle are stopped and the others held by min_workers."""
        # Arrange
        rule = PolicySettings(max_idle=10.0, min_workers=2)
        readings = [Reading(f"w{i}", 10.0 + i) for i in range(4)]
        # Act
        result = verdicts(readings, rule=rule)
        # Assert
        assert result == {
            "w3": Verdict.STOP,
            "w2": Verdict.STOP,
            "w1": Verdict.MIN_WORKERS,
            "w0": Verdict.MIN_WORKERS,
        }

    def test_plan_busy_workers_count_towards_floor(self) -> None:
        """Given one busy and two idle workers with a floor of 1, when planned, then
        both idle workers may go (the busy one keeps the floor)."""
        # Arrange
        rule = PolicySettings(max_idle=10.0, min_workers=1)
        readings = [Reading("busy", 0.0), Reading("a", 20.0), Reading("b", 30.0)]
        # Act / Assert
        assert verdicts(readings, rule=rule) == {
            "b": Verdict.STOP,
            "a": Verdict.STOP,
            "busy": Verdict.BUSY,
        }

    def test_plan_rate_limit(self) -> None:
        """Given five idle workers and at most two stops per cycle, when planned, then
        the two longest idle are stopped and three rate-limited."""
        # Arrange
        rule = PolicySettings(max_idle=1.0, min_workers=0, max_stops_per_cycle=2)
        readings = [Reading(f"w{i}", float(i + 1)) for i in range(5)]
        # Act
        result = plan(readings, PolicyState(), rule, 0.0)
        # Assert
        assert [d.worker for d in result.stops] == ["w4", "w3"]
        assert sum(d.verdict is Verdict.RATE_LIMIT for d in result.decisions) == 3
        assert result.candidates == 5

    def test_plan_wait_count_needs_consecutive_cycles(self) -> None:
        """Given wait_count 3, when a worker is idle past the rule on two cycles, dips
        below once, then idle again for three, then it is stopped only on the last."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=0, wait_count=3)
        series = [10.0, 11.0, 1.0, 6.0, 7.0, 8.0]
        state = PolicyState()
        seen = []
        # Act
        for idle in series:
            result = plan([Reading("w", idle)], state, rule, 0.0)
            state = result.state
            seen.append(result.decisions[0].verdict)
        # Assert
        assert seen == [
            Verdict.WAITING,
            Verdict.WAITING,
            Verdict.BUSY,
            Verdict.WAITING,
            Verdict.WAITING,
            Verdict.STOP,
        ]

    def test_plan_retiring_not_stopped_twice_and_counts_against_floor(self) -> None:
        """Given a worker stopped last cycle that the source still reports idle, when
        planned, then it is RETIRING (not stopped again) and counts as gone for the
        floor."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=1)
        first = plan([Reading("a", 9.0), Reading("b", 6.0)], PolicyState(), rule, 0.0)
        state = stopped(first.state, "a", 0.5, rule)
        # Act
        second = plan([Reading("a", 10.0), Reading("b", 7.0)], state, rule, 1.0)
        # Assert
        assert [d.verdict for d in first.decisions] == [Verdict.STOP, Verdict.MIN_WORKERS]
        assert {d.worker: d.verdict for d in second.decisions} == {
            "a": Verdict.RETIRING,
            "b": Verdict.MIN_WORKERS,
        }

    def test_plan_retiring_kept_through_a_down_read(self) -> None:
        """Given a floor of 1 and a worker stopped last cycle, when a read reports it
        down (its probe timed out while it drained) and the next one up and busy
        beside an idle worker, then it still counts as gone: the idle worker is held
        by the floor."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=1)
        first = plan([Reading("a", 9.0), Reading("b", 0.0)], PolicyState(), rule, 0.0)
        state = stopped(first.state, "a", 0.5, rule)
        # Act
        down = plan([Reading("a", None, up=False), Reading("b", 0.0)], state, rule, 1.0)
        back = plan([Reading("a", 0.0), Reading("b", 9.0)], down.state, rule, 2.0)
        # Assert
        assert set(down.state.retiring) == {"a"}
        assert {d.worker: d.verdict for d in back.decisions} == {
            "a": Verdict.BUSY,
            "b": Verdict.MIN_WORKERS,
        }

    def test_plan_retiring_kept_while_missing_from_a_read(self) -> None:
        """Given a floor of 1 and a worker stopped last cycle, when a read misses it and
        the next one reports it up and busy (still draining) beside an idle worker,
        then it still counts as gone (retiring): the idle worker is held by the floor,
        so the fleet is never left below it once the drain ends."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=1)
        first = plan([Reading("a", 9.0), Reading("b", 0.0)], PolicyState(), rule, 0.0)
        state = stopped(first.state, "a", 0.5, rule)
        # Act
        missed = plan([Reading("b", 0.0)], state, rule, 1.0)
        back = plan([Reading("a", 0.0), Reading("b", 9.0)], missed.state, rule, 2.0)
        # Assert
        assert [d.verdict for d in first.decisions] == [Verdict.STOP, Verdict.BUSY]
        assert set(missed.state.retiring) == {"a"}
        assert {d.worker: d.verdict for d in back.decisions} == {
            "a": Verdict.BUSY,
            "b": Verdict.MIN_WORKERS,
        }

    @pytest.mark.parametrize(
        ("grace", "max_staleness", "expected"),
        [
            (0.0, 60.0, RETIRING_TTL),
            (30.0, 60.0, RETIRING_TTL),
            (600.0, 60.0, 670.0),
            (-1.0, 60.0, RETIRING_TTL),
            (30.0, 600.0, 640.0),
            (-1.0, 600.0, 600.0),
        ],
    )
    def test_retiring_time_covers_the_stop_deadline_and_staleness(
        self, grace: float, max_staleness: float, expected: float
    ) -> None:
        """Given a stop's grace and the rule's max staleness, then a stopped worker
        retires for RETIRING_TTL or, when longer, the stop's whole deadline (grace and
        margin: it may answer until then) plus the max staleness (a reading of it from
        before it left is fresh that long); an unbounded grace has no deadline to
        cover."""
        assert retiring_time(grace, max_staleness=max_staleness) == expected

    def test_plan_retiring_for_a_long_drain(self) -> None:
        """Given a rule whose retiring time covers a 10-minute drain, when a stopped
        worker still reads idle after RETIRING_TTL, then it is still retiring (never
        stopped twice, gone for the floor) until that time is over."""
        # Arrange
        rule = PolicySettings(
            max_idle=60.0, min_workers=0, retiring_for=retiring_time(600.0, max_staleness=60.0)
        )
        state = stopped(PolicyState(), "a", 0.0, rule)
        # Act
        draining = verdicts([Reading("a", 95.0)], state, rule=rule, now=RETIRING_TTL + 1.0)
        after = verdicts([Reading("a", 95.0)], state, rule=rule, now=671.0)
        # Assert
        assert (draining, after) == ({"a": Verdict.RETIRING}, {"a": Verdict.STOP})

    def test_plan_retiring_expires(self) -> None:
        """Given a worker stopped long ago that the source still reports up and idle
        (a new worker on the same address), when planned past RETIRING_TTL, then it is
        a candidate again."""
        # Arrange
        state = stopped(PolicyState(), "a", 0.0)
        # Act
        soon = verdicts([Reading("a", 95.0)], state, now=10.0)
        later = verdicts([Reading("a", 95.0)], state, now=RETIRING_TTL + 1.0)
        # Assert
        assert (soon, later) == ({"a": Verdict.RETIRING}, {"a": Verdict.STOP})

    @pytest.mark.parametrize(
        "result", [StopResult.REFUSED_BUSY, StopResult.UNREACHABLE, StopResult.FAILED]
    )
    def test_after_stop_failure_cools_down(self, result: StopResult) -> None:
        """Given a planned stop that was refused, unreachable or failed, when the state
        is updated, then the worker cools down for `cooldown` seconds, is not retiring,
        and is a candidate again after."""
        # Arrange
        first = plan([Reading("a", 90.0)], PolicyState(), RULE, 0.0)
        # Act
        state = after_stop(first.state, "a", result=result, now=10.0, settings=RULE)
        during = verdicts([Reading("a", 95.0)], state, now=50.0)
        after = verdicts([Reading("a", 200.0)], state, now=111.0)
        # Assert
        assert state.retiring == {}
        assert (during, after) == ({"a": Verdict.COOLDOWN}, {"a": Verdict.STOP})

    @pytest.mark.parametrize(
        ("age", "old_verdict", "other_verdict"),
        [
            (5.0, Verdict.UNSUPPORTED, Verdict.STOP),
            (math.inf, Verdict.STALE, Verdict.MIN_WORKERS),
            (600.0, Verdict.STALE, Verdict.MIN_WORKERS),
        ],
    )
    def test_plan_unsupported_holds_the_floor_only_when_fresh(
        self, age: float, old_verdict: Verdict, other_verdict: Verdict
    ) -> None:
        """Given a worker that predates the idle RPC beside an idle one, and
        `min_workers` 1, when planned, then the old worker holds the floor (the idle
        one is stopped) only when the answer saying it predates the RPC is fresh; an
        old or unknown one is stale."""
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        readings = [Reading("old", None, supported=False, age=age), Reading("b", 95.0)]
        assert verdicts(readings, rule=rule) == {"old": old_verdict, "b": other_verdict}

    def test_after_stop_unanswered_counts_as_retiring_for_the_floor(self) -> None:
        """Given two workers of one group and `min_workers` 1, when the stop of the
        first got no answer (it may be draining) and the next cycle reads it up and
        busy beside the other, now idle, then the first counts as gone and the other is
        held by the floor: a worker that may be draining never holds the floor."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        first = plan([Reading("a", 90.0), Reading("b", 10.0)], PolicyState(), rule, 0.0)
        state = after_stop(first.state, "a", result=StopResult.UNANSWERED, now=1.0, settings=rule)
        # Act
        later = verdicts([Reading("a", 5.0), Reading("b", 95.0)], state, rule=rule, now=30.0)
        # Assert
        assert later == {"a": Verdict.BUSY, "b": Verdict.MIN_WORKERS}

    def test_after_stop_dry_run_changes_nothing(self) -> None:
        """Given a planned stop that a dry run only confirmed, when the state is
        updated, then it is unchanged: not retiring, not cooling down, so the worker
        is planned for a stop again next cycle."""
        # Arrange
        first = plan([Reading("a", 90.0)], PolicyState(), RULE, 0.0)
        # Act
        state = after_stop(first.state, "a", result=StopResult.DRY_RUN, now=1.0, settings=RULE)
        # Assert
        assert state == first.state
        assert verdicts([Reading("a", 91.0)], state, now=2.0) == {"a": Verdict.STOP}

    def test_after_stop_requires_keywords(self) -> None:
        """Given after_stop, when called with the result positionally, then TypeError:
        what came of the stop is always named at the call site."""
        with pytest.raises(TypeError):
            after_stop(PolicyState(), "a", StopResult.STOPPED, 0.0, RULE)  # type: ignore[misc]

    def test_plan_conflicting_duplicate_readings(self) -> None:
        """Given two readings of one worker that disagree (one idle, one busy), and an
        identical pair for another, when planned, then the first is CONFLICTING (one
        decision, never a stop) and the second collapses into one STOP."""
        # Arrange
        readings = [Reading("a", 500.0), Reading("a", 0.0), Reading("b", 90.0), Reading("b", 90.0)]
        # Act
        result = plan(readings, PolicyState(), RULE, 0.0)
        # Assert
        assert [(d.worker, d.verdict) for d in result.decisions] == [
            ("b", Verdict.STOP),
            ("a", Verdict.CONFLICTING),
        ]

    def test_plan_conflicting_worker_does_not_hold_the_floor(self) -> None:
        """Given a floor of 1, an idle worker and a conflicting one, when planned, then
        the idle worker is held by min_workers: a worker whose reading conflicts is not
        counted as up."""
        # Arrange
        rule = PolicySettings(max_idle=10.0, min_workers=1)
        readings = [Reading("idle", 20.0), Reading("odd", 0.0, conflicting=True)]
        # Act / Assert
        assert verdicts(readings, rule=rule) == {
            "idle": Verdict.MIN_WORKERS,
            "odd": Verdict.CONFLICTING,
        }

    def test_plan_floor_holds_per_group(self) -> None:
        """Given three idle hot workers and one idle cold one, grouped by tag with a
        floor of 1, when planned, then two hot workers are stopped and one hot and the
        cold one are held by min_workers: no group is emptied (without groups, the
        floor of 1 would let every hot worker go)."""
        # Arrange
        rule = PolicySettings(max_idle=10.0, min_workers=1, group_by=("wool_tags",))
        readings = [
            Reading("h1", 40.0, group=("hot",)),
            Reading("h2", 30.0, group=("hot",)),
            Reading("h3", 20.0, group=("hot",)),
            Reading("c1", 50.0, group=("cold",)),
        ]
        # Act
        result = verdicts(readings, rule=rule)
        fleet_wide = verdicts([replace(r, group=()) for r in readings], rule=rule)
        # Assert
        assert result == {
            "h1": Verdict.STOP,
            "h2": Verdict.STOP,
            "h3": Verdict.MIN_WORKERS,
            "c1": Verdict.MIN_WORKERS,
        }
        assert sorted(w for w, v in fleet_wide.items() if v is Verdict.STOP) == ["c1", "h1", "h2"]

    def test_plan_busy_worker_holds_its_own_group_only(self) -> None:
        """Given a busy cold worker and an idle hot one, floor 1 per tag, when planned,
        then the hot worker is held: the busy worker keeps only its own group's floor."""
        # Arrange
        rule = PolicySettings(max_idle=10.0, min_workers=1, group_by=("wool_tags",))
        readings = [Reading("c1", 0.0, group=("cold",)), Reading("h1", 90.0, group=("hot",))]
        # Act / Assert
        assert verdicts(readings, rule=rule) == {"h1": Verdict.MIN_WORKERS, "c1": Verdict.BUSY}

    def test_plan_rate_limit_per_group(self) -> None:
        """Given three idle workers in each of two groups and one stop per cycle, when
        planned, then each group loses its longest idle worker and no more."""
        # Arrange
        rule = PolicySettings(max_idle=1.0, min_workers=0, max_stops_per_cycle=1)
        readings = [
            Reading(f"{g}{i}", float(10 * i + 5 + (g == "b")), group=(g,))
            for g in "ab"
            for i in range(3)
        ]
        # Act
        result = plan(readings, EMPTY, rule, 0.0)
        # Assert
        assert [d.worker for d in result.stops] == ["b2", "a2"]
        assert sum(d.verdict is Verdict.RATE_LIMIT for d in result.decisions) == 4

    def test_plan_retiring_counts_against_its_group(self) -> None:
        """Given a hot worker stopped last cycle and still reported up, and two more
        idle hot workers, floor 1 per group, when planned, then only one more hot
        worker goes: the retiring one counts as gone for its group."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=1)
        readings = [Reading(w, 9.0, group=("hot",)) for w in ("a", "b", "c")]
        state = stopped(plan(readings, EMPTY, rule, 0.0).state, "a", 0.5, rule)
        # Act
        result = verdicts(readings, state, rule, now=1.0)
        # Assert
        assert result == {"a": Verdict.RETIRING, "b": Verdict.STOP, "c": Verdict.MIN_WORKERS}

    def test_plan_missing_group_label_is_its_own_group(self) -> None:
        """Given a worker with the empty group value and one tagged, floor 1, when
        planned, then each is the only worker of its group and is held."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=1, group_by=("wool_tags",))
        readings = [Reading("a", 9.0, group=("",)), Reading("b", 9.0, group=("hot",))]
        # Act / Assert
        assert set(verdicts(readings, rule=rule).values()) == {Verdict.MIN_WORKERS}

    def test_plan_min_age_holds_a_new_worker(self) -> None:
        """Given min_age 60 s and a worker idle past the rule, when it is first read at
        t=100, then it is held by min_age at t=100 and t=159.9 and stopped at t=160."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=0, min_age=60.0)
        state = EMPTY
        seen = []
        # Act
        for now in (100.0, 159.9, 160.0):
            result = plan([Reading("w", 500.0)], state, rule, now)
            state = result.state
            seen.append(result.decisions[0].verdict)
        # Assert
        assert seen == [Verdict.MIN_AGE, Verdict.MIN_AGE, Verdict.STOP]
        assert state.first_seen == {"w": 100.0}

    def test_plan_min_age_restarts_for_a_worker_that_went_missing(self) -> None:
        """Given min_age 60 s and a worker seen at t=0, when it is missing from the
        readings at t=30 and back at t=70, then it is new again: held by min_age."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=0, min_age=60.0)
        state = plan([Reading("w", 500.0)], EMPTY, rule, 0.0).state
        state = plan([Reading("other", 0.0)], state, rule, 30.0).state
        # Act
        result = verdicts([Reading("w", 500.0)], state, rule, now=70.0)
        # Assert
        assert result == {"w": Verdict.MIN_AGE}

    def test_plan_min_age_restarts_for_a_worker_read_down(self) -> None:
        """Given min_age 60 s and a worker seen at t=0, when it reads down at t=30 (it
        crashed; a static target stays in the readings) and up again at t=70 (a new
        worker restarted at its address, idle since it started), then it is new
        again: held by min_age until t=130."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=0, min_age=60.0)
        state = plan([Reading("w", 500.0)], EMPTY, rule, 0.0).state
        state = plan([Reading("w", None, up=False)], state, rule, 30.0).state
        # Act
        back = plan([Reading("w", 40.0)], state, rule, 70.0)
        later = verdicts([Reading("w", 100.0)], back.state, rule, now=130.0)
        # Assert
        assert back.decisions[0].verdict is Verdict.MIN_AGE
        assert later == {"w": Verdict.STOP}

    def test_plan_min_age_counts_the_held_worker_as_a_candidate(self) -> None:
        """Given a young idle worker and min_age, when planned, then it is counted
        among the candidates (idle past the rule, held back by a rule) and never
        stopped; a young busy worker is just busy."""
        # Arrange
        rule = PolicySettings(max_idle=5.0, min_workers=0, min_age=60.0)
        # Act
        result = plan([Reading("young", 9.0), Reading("busy", 1.0)], EMPTY, rule, 0.0)
        # Assert
        assert {d.worker: d.verdict for d in result.decisions} == {
            "young": Verdict.MIN_AGE,
            "busy": Verdict.BUSY,
        }
        assert result.candidates == 1 and result.stops == ()

    def test_plan_readings_in_two_groups_conflict(self) -> None:
        """Given two readings of one worker with different groups, when planned, then
        the worker is conflicting and never stopped."""
        # Arrange
        readings = [Reading("w", 90.0, group=("hot",)), Reading("w", 90.0, group=("cold",))]
        # Act / Assert
        assert verdicts(readings) == {"w": Verdict.CONFLICTING}

    @pytest.mark.parametrize(
        ("other", "holds"),
        [
            (Reading("other", 0.0), True),
            (Reading("other", 500.0, alerting=False), True),
            (Reading("other", None, supported=False), True),
            (Reading("other", None), False),
            (Reading("other", math.nan), False),
            (Reading("other", 5.0, age=61.0), False),
            (Reading("other", None, up=False), False),
            (Reading("other", 0.0, conflicting=True), False),
        ],
    )
    def test_plan_floor_counts_only_workers_known_alive(self, other: Reading, holds: bool) -> None:
        """Given a floor of 1, an idle worker and another reading, when planned, then
        the other holds the floor (the idle worker is stopped) only if it shows a worker
        alive: a fresh valid value, busy or idle, or UNIMPLEMENTED (unsupported); a
        reading merely up with no value, an invalid or stale value, down or conflicting
        holds none."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        # Act
        result = verdicts([Reading("idle", 500.0), other], rule=rule)
        # Assert
        assert result["idle"] is (Verdict.STOP if holds else Verdict.MIN_WORKERS)

    def test_plan_one_worker_under_two_labels_counts_once(self) -> None:
        """Given the only worker read under two labels (one identity), both idle, and a
        floor of 1, when planned, then neither label is stopped: the worker counts once
        (min_workers under its first label, alias under the other)."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        readings = [
            Reading("localhost:7", 500.0, identity="127.0.0.1:7"),
            Reading("127.0.0.1:7", 500.1, identity="127.0.0.1:7"),
        ]
        # Act / Assert
        assert verdicts(readings, rule=rule) == {
            "127.0.0.1:7": Verdict.MIN_WORKERS,
            "localhost:7": Verdict.ALIAS,
        }

    def test_plan_labels_that_agree_stop_the_worker_once(self) -> None:
        """Given one worker read under three labels that agree, no floor, and another
        idle worker, with one stop per cycle, when planned, then the worker is one
        candidate: stopped once, under its first label, with the least idle value of
        its labels (the other worker is longer idle than that, and goes first)."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=0, max_stops_per_cycle=2)
        same = "127.0.0.1:7"
        readings = [
            Reading("localhost:7", 900.0, identity=same),
            Reading("127.0.0.1:7", 300.0, identity=same),
            Reading("LOCALHOST:7", 900.0, identity=same),
            Reading("other:1", 400.0),
        ]
        # Act
        result = plan(readings, EMPTY, rule, 0.0)
        # Assert
        assert [(d.worker, d.idle) for d in result.stops] == [("other:1", 400.0), (same, 300.0)]
        assert sum(d.verdict is Verdict.ALIAS for d in result.decisions) == 2
        assert result.candidates == 2

    @pytest.mark.parametrize(
        "second",
        [
            Reading("localhost:7", 0.0, identity="127.0.0.1:7"),
            Reading("localhost:7", None, up=False, identity="127.0.0.1:7"),
            Reading("localhost:7", 500.0, group=("cold",), identity="127.0.0.1:7"),
        ],
    )
    def test_plan_labels_that_disagree_are_conflicting(self, second: Reading) -> None:
        """Given one worker read under two labels that disagree (idle and busy, up and
        down, two groups), and another idle worker with a floor of 1, when planned, then
        both labels are conflicting: never stopped, and they do not hold the floor."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        readings = [Reading("127.0.0.1:7", 500.0, identity="127.0.0.1:7"), second]
        readings.append(Reading("other:1", 500.0, group=readings[0].group))
        # Act / Assert
        assert verdicts(readings, rule=rule) == {
            "127.0.0.1:7": Verdict.CONFLICTING,
            "localhost:7": Verdict.CONFLICTING,
            "other:1": Verdict.MIN_WORKERS,
        }

    def test_plan_worker_stopped_under_one_label_is_retiring_under_every_label(self) -> None:
        """Given a worker read under one label and stopped, when it is read next under
        that label and a new one, and then under the new one alone, then it is retiring
        each time (never stopped again through the other spelling), and it does not hold
        the floor for the other idle worker."""
        # Arrange
        rule = PolicySettings(max_idle=60.0, min_workers=1)
        same = "127.0.0.1:7"
        state = stopped(EMPTY, "localhost:7", 0.0, rule)
        both = [Reading("localhost:7", 500.0, identity=same), Reading(same, 500.0, identity=same)]
        other = Reading("other:1", 500.0)
        # Act
        first = plan([*both, other], state, rule, 1.0)
        second = plan([both[1], other], first.state, rule, 2.0)
        # Assert
        assert {d.worker: d.verdict for d in first.decisions} == {
            same: Verdict.RETIRING,
            "localhost:7": Verdict.ALIAS,
            "other:1": Verdict.MIN_WORKERS,
        }
        assert {d.worker: d.verdict for d in second.decisions} == {
            same: Verdict.RETIRING,
            "other:1": Verdict.MIN_WORKERS,
        }

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"max_idle": 0.0},
            {"max_idle": -1.0},
            {"max_idle": math.nan},
            {"max_idle": math.inf},
            {"max_idle": 1.0, "wait_count": 0},
            {"max_idle": 1.0, "min_workers": -1},
            {"max_idle": 1.0, "min_age": -1.0},
            {"max_idle": 1.0, "min_age": math.inf},
            {"max_idle": 1.0, "min_age": math.nan},
            {"max_idle": 1.0, "max_staleness": math.inf},  # an unknown age (inf) fresh
            {"max_idle": 1.0, "max_staleness": -1.0},
            {"max_idle": 1.0, "max_staleness": math.nan},
            {"max_idle": 1.0, "cooldown": -1.0},
            {"max_idle": 1.0, "cooldown": math.nan},
            {"max_idle": 1.0, "cooldown": math.inf},
            {"max_idle": 1.0, "group_by": ("zone", "zone")},
            {"max_idle": 1.0, "retiring_for": 0.0},
            {"max_idle": 1.0, "retiring_for": -1.0},
            {"max_idle": 1.0, "retiring_for": math.inf},
            {"max_idle": 1.0, "retiring_for": math.nan},
        ],
    )
    def test_settings_reject_invalid(self, kwargs) -> None:
        """Given invalid settings, when constructed, then ValueError."""
        with pytest.raises(ValueError):
            PolicySettings(**kwargs)


idle_values = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1000)
)
readings_strategy = st.lists(
    st.builds(
        Reading,
        worker=st.sampled_from([f"w{i}" for i in range(12)]),
        idle=idle_values,
        up=st.booleans(),
        supported=st.booleans(),
        age=st.one_of(st.floats(0, 120), st.floats(allow_nan=True, allow_infinity=True)),
        alerting=st.booleans(),
        conflicting=st.booleans(),
    ),
    max_size=20,
)
settings_strategy = st.builds(
    PolicySettings,
    max_idle=st.floats(0.001, 500),
    wait_count=st.integers(1, 4),
    min_workers=st.integers(0, 8),
    max_stops_per_cycle=st.integers(0, 6),
    cooldown=st.floats(0, 500),
    max_staleness=st.floats(0.001, 100),
    dry_run=st.booleans(),
)


class TestPlanProperties:
    @given(
        history=st.lists(readings_strategy, min_size=1, max_size=5),
        rule=settings_strategy,
        failures=st.sets(st.sampled_from([f"w{i}" for i in range(12)])),
    )
    @settings(max_examples=300, deadline=None)
    def test_plan_invariants(self, history, rule, failures) -> None:
        """Given arbitrary readings (duplicates included) over several cycles, settings
        and failed stops, when planned cycle by cycle, then no plan takes the fleet below
        the floor, exceeds the per-cycle limit, or picks a worker under the threshold,
        down, unsupported, stale, not alerting, conflicting, read twice differently or
        with an invalid value."""
        state = PolicyState()
        consecutive: dict[str, int] = {}
        for cycle, readings in enumerate(history):
            now = float(cycle * 10)
            result = plan(readings, state, rule, now)
            by_worker = {r.worker: r for r in readings}
            first_read = {}
            for r in readings:
                first_read.setdefault(r.worker, r)
            read_twice = {r.worker for r in readings if r != first_read[r.worker]}
            consecutive = {
                r.worker: consecutive.get(r.worker, 0) + 1
                for r in by_worker.values()
                if r.up
                and r.supported
                and r.alerting
                and not r.conflicting
                and r.worker not in read_twice
                and r.idle is not None
                and math.isfinite(r.idle)
                and r.idle >= rule.max_idle
                and 0 <= r.age <= rule.max_staleness
            }
            stops = result.stops
            up = len({r.worker for r in readings if r.up})
            retiring_up = len([w for w in state.retiring if w in by_worker and by_worker[w].up])
            assert len(stops) <= rule.max_stops_per_cycle
            assert up - retiring_up - len(stops) >= rule.min_workers or not stops
            for decision in stops:
                reading = by_worker[decision.worker]
                assert decision.worker not in read_twice and not reading.conflicting
                assert reading.up and reading.supported and reading.alerting
                assert reading.idle is not None and math.isfinite(reading.idle)
                assert reading.idle >= rule.max_idle
                assert 0 <= reading.age <= rule.max_staleness
                assert decision.worker not in state.retiring
                assert consecutive[decision.worker] >= rule.wait_count
            assert sorted(d.worker for d in result.decisions) == sorted(by_worker)
            state = result.state
            for decision in stops:
                failed = decision.worker in failures
                outcome = StopResult.FAILED if failed else StopResult.STOPPED
                state = after_stop(state, decision.worker, result=outcome, now=now, settings=rule)
                if failed:
                    consecutive.pop(decision.worker, None)


GROUPS = [("hot", "a"), ("hot", "b"), ("cold", "a"), ("", "")]
WORKERS = [f"w{i}" for i in range(10)]
STEPS = [0.5, 4.5, 5.0, 10.0, 20.0, 24.5, 25.0]
"""Seconds between cycles: sums land just under and at the min_age values."""


@st.composite
def grouped_readings(draw: st.DrawFn) -> list[Reading]:
    """One cycle's readings: mostly one per worker, mostly up and idle past small
    thresholds, with now and then a conflicting reading or a duplicate (equal, or
    in another group)."""
    readings = draw(
        st.lists(
            st.builds(
                Reading,
                worker=st.sampled_from(WORKERS),
                idle=st.one_of(st.floats(0, 1000), st.none()),
                up=st.sampled_from([True, True, True, False]),
                age=st.floats(0, 20),
                conflicting=st.sampled_from([False] * 9 + [True]),
                group=st.sampled_from(GROUPS),
            ),
            unique_by=lambda r: r.worker,
            max_size=len(WORKERS),
        )
    )
    if readings:
        echoes = draw(st.lists(st.sampled_from(readings), max_size=2))
        groups = draw(st.lists(st.sampled_from(GROUPS), min_size=len(echoes)))
        readings += [replace(r, group=g) for r, g in zip(echoes, groups, strict=False)]
    return draw(st.permutations(readings))


grouped_settings = st.builds(
    PolicySettings,
    max_idle=st.floats(0.001, 200),
    wait_count=st.integers(1, 2),
    min_workers=st.integers(0, 3),
    max_stops_per_cycle=st.integers(0, 4),
    cooldown=st.floats(0, 50),
    max_staleness=st.floats(10, 100),
    min_age=st.sampled_from([0.0, 5.0, 25.0]),
    group_by=st.just(("tag", "zone")),
)


class TestGroupProperties:
    @given(
        history=st.lists(
            st.tuples(st.sampled_from(STEPS), grouped_readings()), min_size=1, max_size=6
        ),
        rule=grouped_settings,
        failures=st.sets(st.sampled_from(WORKERS)),
    )
    @example(  # a retiring worker read as conflicting holds no floor: not subtracted twice
        history=[
            (0.5, [Reading("w0", 0.0, group=("hot", "a")), Reading("w6", 1.0, group=("hot", "a"))]),
            (
                0.5,
                [
                    Reading("w1", 1.0, group=("cold", "a")),
                    Reading("w6", 0.0, conflicting=True, group=("cold", "a")),
                ],
            ),
        ],
        rule=PolicySettings(max_idle=1.0, min_workers=0, group_by=("tag", "zone")),
        failures=set(),
    )
    @settings(max_examples=300, deadline=None)
    def test_plan_group_invariants(self, history, rule, failures) -> None:
        """Given workers in groups read over several cycles (duplicates, conflicts,
        workers coming and going), any settings and failed stops, when planned cycle
        by cycle, then in every plan the floor holds per group, no group loses more
        than the rate limit, and no worker first seen less than min_age ago is stopped."""
        state, now = PolicyState(), 0.0
        first_seen: dict[str, float] = {}
        for step, readings in history:
            now += step
            # Arrange
            first: dict[str, Reading] = {}
            for reading in readings:
                first.setdefault(reading.worker, reading)
            first_seen = {w: first_seen.get(w, now) for w in first}
            trusted = {
                w
                for w, r in first.items()
                if not r.conflicting and all(o == r for o in readings if o.worker == w)
            }
            up = Counter(first[w].group for w in trusted if first[w].up)
            retiring = Counter(
                first[w].group
                for w, since in state.retiring.items()
                if w in trusted and first[w].up and now - since < RETIRING_TTL
            )
            # Act
            result = plan(readings, state, rule, now)
            # Assert
            stops = Counter(first[d.worker].group for d in result.stops)
            holding = floor.holders(result.decisions, result.state.retiring)
            for group, count in stops.items():
                assert count <= rule.max_stops_per_cycle
                assert up[group] - retiring[group] - count >= rule.min_workers
                assert len(holding.get(group, [])) >= rule.min_workers  # what floor_check asks
            held = {w for workers in holding.values() for w in workers}
            assert not held & {d.worker for d in result.stops}
            for decision in result.stops:
                assert now - first_seen[decision.worker] >= rule.min_age
                assert decision.group == first[decision.worker].group
            state = result.state
            for decision in result.stops:
                failed = decision.worker in failures
                outcome = StopResult.FAILED if failed else StopResult.STOPPED
                state = after_stop(state, decision.worker, result=outcome, now=now, settings=rule)


SPELLINGS = ["10.0.0.", "localhost-", "LOCALHOST-"]
"""How a label of worker ``n`` is spelled: ``10.0.0.n:1``, ``localhost-n:1``, ..."""


@st.composite
def aliased_history(draw: st.DrawFn) -> list[list[Reading]]:
    """Cycles of readings of up to six workers, each read under one to three labels
    (the same ones every cycle; several labels share the worker's identity). A
    worker's labels mostly agree, with idle values a little apart (each label read at
    its own moment), and now and then disagree."""
    labels = [
        draw(st.lists(st.sampled_from(SPELLINGS), min_size=1, max_size=3, unique=True))
        for _ in range(draw(st.integers(0, 6)))
    ]
    fields = st.fixed_dictionaries(
        {
            "idle": st.one_of(st.floats(0, 1000), st.none(), st.just(math.nan)),
            "up": st.sampled_from([True, True, True, False]),
            "supported": st.sampled_from([True, True, True, False]),
            "age": st.floats(0, 20),
            "group": st.sampled_from(GROUPS),
        }
    )
    history = []
    for _ in range(draw(st.integers(1, 4))):
        readings = []
        for n, spellings in enumerate(labels):
            identity = f"10.0.0.{n}:1" if len(spellings) > 1 else ""
            base = draw(fields)
            for spelling in spellings:
                own = draw(fields) if draw(st.integers(0, 5)) == 0 else dict(base)
                if own["idle"] is not None and draw(st.booleans()):
                    own["idle"] += draw(st.floats(0, 0.5))
                readings.append(Reading(f"{spelling}{n}:1", identity=identity, **own))
        history.append(draw(st.permutations(readings)))
    return history


class TestAliasProperties:
    @given(history=aliased_history(), rule=grouped_settings)
    @settings(max_examples=300, deadline=None)
    def test_plan_aliases_never_break_the_floor(self, history, rule) -> None:
        """Given workers read under several labels each (agreeing or not) over several
        cycles, when planned cycle by cycle, then each worker is stopped at most once
        per cycle, under one label, only when every label of it is a valid candidate
        in one group; and every group keeps min_workers workers (counted by worker, not
        by label) with a reading up."""
        state, now = PolicyState(), 0.0
        for readings in history:
            now += 30.0
            # Arrange
            worker_of = {r.worker: r.worker.rpartition(".")[2] for r in readings}
            worker_of |= {r.worker: r.worker.split("-")[1] for r in readings if "-" in r.worker}
            up = {(worker_of[r.worker], r.group) for r in readings if r.up}
            # Act
            result = plan(readings, state, rule, now)
            # Assert
            stopped_workers = [worker_of[d.worker] for d in result.stops]
            assert len(stopped_workers) == len(set(stopped_workers))
            for decision in result.stops:
                labels = [r for r in readings if worker_of[r.worker] == worker_of[decision.worker]]
                assert all(r.up and r.supported and not r.conflicting for r in labels)
                assert all(valid_idle(r.idle) and r.idle >= rule.max_idle for r in labels)
                assert all(r.age <= rule.max_staleness for r in labels)
                assert {r.group for r in labels} == {decision.group}
                assert decision.idle == min(r.idle for r in labels)
            stops = Counter(d.group for d in result.stops)
            holding = floor.holders(result.decisions, result.state.retiring)
            for group, count in stops.items():
                alive = len({w for w, g in up if g == group})
                assert alive - count >= rule.min_workers
                held = [worker_of[w] for w in holding.get(group, [])]  # what floor_check asks
                assert len(held) == len(set(held)) >= rule.min_workers
                assert not set(held) & set(stopped_workers)
            state = result.state
