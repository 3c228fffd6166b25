"""floor_check: a group losing workers has its floor confirmed by the workers it counts on."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path

import grpc
import pytest
from support.draining import draining
from support.prometheus import free_port

from wool_idle.autoscaler.actuator import ActionSettings
from wool_idle.autoscaler.floor_check import MAX_ROUNDS, answers, confirm_floors
from wool_idle.autoscaler.policy import Decision, Plan, PolicyState
from wool_idle.autoscaler.verdicts import Verdict

SETTINGS = ActionSettings(rpc_timeout=2.0)


def planned(*decisions: tuple[str, Verdict, str], retiring: tuple[str, ...] = ()) -> Plan:
    """A plan of (worker, verdict, group) decisions; ``retiring``: workers a stop was
    sent to."""
    return Plan(
        tuple(Decision(w, 900.0, v, (g,)) for w, v, g in decisions),
        PolicyState(retiring=dict.fromkeys(retiring, 0.0)),
    )


class Asked:
    """An ``ask`` answering True for the workers in ``alive``; records who was asked."""

    def __init__(self, *alive: str, raising: str = "") -> None:
        self.alive, self.raising, self.asked = set(alive), raising, []

    async def __call__(self, worker: str) -> bool:
        self.asked.append(worker)
        if worker == self.raising:
            raise RuntimeError("a fault of ours")
        return worker in self.alive


def verdicts(plan: Plan) -> dict[str, Verdict]:
    return {d.worker: d.verdict for d in plan.decisions}


class TestAnswers:
    async def test_answers_live_worker_idle_or_busy(self, start_server, tmp_path: Path) -> None:
        """Given a live worker, idle, then draining a task for another caller's stop,
        when asked, then it answers while idle and does not while stopping (it drains
        for a stop and will be gone: it holds no floor)."""
        # Arrange
        idle_server = await start_server()
        gate = tmp_path / "gate"
        server, connection, running, other_stop = await draining(start_server, gate)
        # Act
        try:
            idle, stopping = await asyncio.gather(
                answers(idle_server.address, SETTINGS), answers(server.address, SETTINGS)
            )
        finally:
            gate.touch()
            await asyncio.gather(running, other_stop, return_exceptions=True)
            await connection.close()
        # Assert
        assert (idle, stopping) == (True, False)

    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            ({"seconds": 0.0}, True),
            ({"seconds": 12.5}, True),
            ({"with_idle": False}, True),
            ({"seconds": math.nan}, False),
            ({"seconds": -1.0}, False),
            ({"code": grpc.StatusCode.PERMISSION_DENIED}, False),
            ({"code": grpc.StatusCode.INTERNAL}, False),
            ({"reply": b"\xff\xff"}, False),
        ],
        ids=["busy", "idle", "unimplemented", "nan", "negative", "denied", "internal", "garbage"],
    )
    async def test_answers_scripted_replies(self, scripted, fields: dict, expected: bool) -> None:
        """Given a worker answering busy, an idle time, UNIMPLEMENTED (older than the
        idle RPC), an invalid value, an error or bytes that do not decode, when asked,
        then only a valid idle time or UNIMPLEMENTED shows it there."""
        # Arrange
        worker = await scripted(**fields)
        # Act
        answered = await answers(worker.address, SETTINGS)
        # Assert
        assert answered is expected

    @pytest.mark.parametrize("address", ["closed", "not an address"])
    async def test_answers_nobody_there(self, address: str) -> None:
        """Given a port nobody listens on, or a label that is no address, when asked,
        then it does not answer (and nothing raises)."""
        # Arrange
        target = f"127.0.0.1:{free_port()}" if address == "closed" else address
        # Act
        answered = await answers(target, SETTINGS)
        # Assert
        assert answered is False


class TestConfirmFloors:
    async def test_confirm_floors_without_floor_or_stops_asks_no_one(self) -> None:
        """Given a floor of 0, or a plan without stops, when confirmed, then nobody is
        asked and the plan is the same."""
        # Arrange
        ask = Asked()
        with_stop = planned(("a", Verdict.STOP, "g"), ("b", Verdict.BUSY, "g"))
        without = planned(("a", Verdict.MIN_WORKERS, "g"), ("b", Verdict.BUSY, "g"))
        # Act
        results = [await confirm_floors(with_stop, 0, ask), await confirm_floors(without, 1, ask)]
        # Assert
        assert results == [with_stop, without]
        assert ask.asked == []

    async def test_confirm_floors_holds_back_only_the_groups_not_confirmed(self, caplog) -> None:
        """Given stops in two groups, when the one holder of group x does not answer and
        those of group y do, then x's stop is held back as min_workers (logged, naming
        the silent worker), y's goes ahead; retiring workers, stops, aliases and workers
        read down are not asked."""
        # Arrange
        plan = planned(
            ("x-stop", Verdict.STOP, "x"),
            ("x-gone", Verdict.BUSY, "x"),
            ("x-retiring", Verdict.BUSY, "x"),
            ("x-down", Verdict.DOWN, "x"),
            ("y-stop", Verdict.STOP, "y"),
            ("y-busy", Verdict.BUSY, "y"),
            ("y-alias", Verdict.ALIAS, "y"),
            retiring=("x-retiring",),
        )
        ask = Asked("x-retiring", "y-busy")
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            confirmed = await confirm_floors(plan, 1, ask)
        # Assert
        assert verdicts(confirmed)["x-stop"] is Verdict.MIN_WORKERS
        assert verdicts(confirmed)["y-stop"] is Verdict.STOP
        assert sorted(ask.asked) == ["x-gone", "y-busy"]
        assert "group x: 0 of the 1 workers its --min-workers 1 counts on" in caplog.text
        assert "x-gone" in caplog.text

    @pytest.mark.parametrize(
        ("silent", "confirmed"), [(2 * MAX_ROUNDS - 1, True), (2 * MAX_ROUNDS, False)]
    )
    async def test_confirm_floors_asks_in_rounds(self, silent: int, confirmed: bool) -> None:
        """Given a floor of 1 and holders of which the first ``silent`` do not answer,
        when confirmed, then each round asks twice as many as are still needed, for
        ``MAX_ROUNDS`` rounds: a live holder within them confirms the floor, one past
        them is never asked (a large group's dead workers cost bounded rounds)."""
        # Arrange
        holders = [f"h{i}" for i in range(silent + 1)]
        plan = planned(("s", Verdict.STOP, "g"), *((h, Verdict.BUSY, "g") for h in holders))
        ask = Asked(holders[-1])
        # Act
        result = await confirm_floors(plan, 1, ask)
        # Assert
        assert (verdicts(result)["s"] is Verdict.STOP) is confirmed
        assert len(ask.asked) == min(len(holders), 2 * MAX_ROUNDS)

    async def test_confirm_floors_stops_asking_once_confirmed(self) -> None:
        """Given a floor of 2 and eight holders of which h1 and h4 answer, when
        confirmed, then the first round asks four (twice the two needed), the second
        two (twice the one still needed), and nobody after the floor is confirmed."""
        # Arrange
        holders = [f"h{i}" for i in range(8)]
        plan = planned(("s", Verdict.STOP, "g"), *((h, Verdict.COOLDOWN, "g") for h in holders))
        ask = Asked("h1", "h4")
        # Act
        result = await confirm_floors(plan, 2, ask)
        # Assert
        assert verdicts(result)["s"] is Verdict.STOP
        assert ask.asked == holders[:6]

    async def test_confirm_floors_ask_raising_counts_as_silent(self, caplog) -> None:
        """Given an ``ask`` that raises for the only holder (a fault of ours), when
        confirmed, then the stop is held back and the fault logged, not raised."""
        # Arrange
        plan = planned(("s", Verdict.STOP, "g"), ("h", Verdict.BUSY, "g"))
        # Act
        with caplog.at_level(logging.ERROR, logger="wool_idle.autoscaler"):
            result = await confirm_floors(plan, 1, Asked(raising="h"))
        # Assert
        assert verdicts(result)["s"] is Verdict.MIN_WORKERS
        assert "asking it for the floor failed" in caplog.text

    async def test_confirm_floors_warning_bounds_a_long_group_value(self, caplog) -> None:
        """Given a group whose label value is 20000 characters (a source's text) and
        whose only holder does not answer, when confirmed, then the warning quotes the
        value cut, so the line stays under the 16 KiB at which a log collector splits
        it (the rest would read as a line the value could have forged)."""
        # Arrange
        group = "x" * 10_000 + "\n" + "y" * 10_000
        plan = planned(("s", Verdict.STOP, group), ("h", Verdict.BUSY, group))
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            await confirm_floors(plan, 1, Asked())
        # Assert
        (record,) = [r for r in caplog.records if "counts on answered now" in r.getMessage()]
        assert len(record.getMessage().encode()) < 16 * 1024
        assert "(20001 characters)" in record.getMessage()

    async def test_confirm_floors_leaving_gives_up_the_questions(self, caplog) -> None:
        """Given a stop in each of two groups, and holders that never answer, when the
        daemon starts leaving while they are asked, then the questions are given up
        (cancelled, not left running) and every stop is held back: no stop starts once
        leaving, and hung holders do not hold up the exit for their rounds."""
        # Arrange
        plan = planned(
            ("x-stop", Verdict.STOP, "x"),
            ("x-hung", Verdict.BUSY, "x"),
            ("y-stop", Verdict.STOP, "y"),
            ("y-hung", Verdict.BUSY, "y"),
        )
        leaving, asked, given_up = asyncio.Event(), asyncio.Event(), []

        async def hung(worker: str) -> bool:
            asked.set()
            try:
                await asyncio.Event().wait()
            finally:
                given_up.append(worker)
            return True

        async def leave() -> None:
            await asked.wait()
            leaving.set()

        # Act
        with caplog.at_level(logging.INFO, logger="wool_idle.autoscaler"):
            result, _ = await asyncio.wait_for(
                asyncio.gather(confirm_floors(plan, 1, hung, leaving), leave()), 30
            )
        # Assert
        assert verdicts(result)["x-stop"] is verdicts(result)["y-stop"] is Verdict.MIN_WORKERS
        assert sorted(given_up) == ["x-hung", "y-hung"]
        assert "floors left unconfirmed" in caplog.text
