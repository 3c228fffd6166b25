"""The autoscaler's stop path under a flaky network: a real TCP proxy between the daemon
and real worker processes drops, delays, resets, black-holes or re-points the calls;
the decision log, the metrics and the floor of the next cycle stay right."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support import tasks
from support.flaky_proxy import FlakyProxy

from wool_idle import contract
from wool_idle.autoscaler import actuator as actuator_module
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.worker import WorkerConnection

pytestmark = pytest.mark.e2e


def exposition(*workers: str) -> str:
    """Every worker up and idle past any rule, the first longest (planned first)."""
    return "".join(
        f'wool_worker_idle_seconds{{worker="{w}"}} {900 + 100 * (len(workers) - i)}\n'
        f'wool_worker_up{{worker="{w}"}} 1\n'
        f'wool_worker_idle_supported{{worker="{w}"}} 1\n'
        for i, w in enumerate(workers)
    )


def value(autoscaler, name: str, **labels: str) -> float | None:
    return autoscaler.registry.get_sample_value(name, labels)


def outcomes(autoscaler) -> list[tuple[str, str]]:
    return [(r.worker, str(r.result or r.verdict)) for r in autoscaler.records]


async def takes_tasks(address: str) -> bool:
    """Whether the worker at ``address`` runs a task (a stopping worker refuses it)."""
    async with WorkerConnection(address) as connection:
        return await connection.dispatch(tasks.echo, "ok") == "ok"


class TestAutoscalerOverAFlakyNetwork:
    @pytest.mark.parametrize(
        ("fault", "stopped"),
        [
            ("drop_before", False),
            ("drop_reply", True),
            ("reset_mid_frame", False),
            ("delay_reply", True),
        ],
    )
    async def test_cycle_stop_without_an_answer_is_retiring(
        self, fleet, make_autoscaler, serve_text, monkeypatch, fault: str, stopped: bool
    ) -> None:
        """Given two idle workers, one behind a proxy that breaks the stop call after the
        confirming idle reply (dropped before the stop, its reply dropped, reset mid
        frame, its reply held past the deadline), and a floor of 1, when a cycle runs
        and then another, then the stop is ``unanswered`` (once, in the log and the
        metric), the worker is shown retired and counts gone for the floor (the other
        holds it), no call reaches it again, and it was stopped only if the stop
        reached it."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.5)
        monkeypatch.setattr(contract, "STOP_DEADLINE_MARGIN", 1.0)
        behind, direct = await fleet.start(2)
        async with FlakyProxy(behind, fault, at=2, delay=5.0) as proxy:
            url = await serve_text(exposition(proxy.address, direct))
            autoscaler = make_autoscaler(url, max_idle=0.2, min_workers=1, grace=1.0)
            await asyncio.sleep(0.3)
            # Act
            first = await autoscaler.cycle()
            await autoscaler.actuator.finish_stops(30.0)
            calls = proxy.calls
            second = await autoscaler.cycle()
            # Assert
            assert first and second and proxy.faulted.is_set()
            assert outcomes(autoscaler) == [
                (direct, Verdict.MIN_WORKERS),
                (proxy.address, StopResult.UNANSWERED),
                (direct, Verdict.MIN_WORKERS),
            ]
            assert value(autoscaler, "wool_autoscaler_stops_total", result="unanswered") == 1
            assert value(autoscaler, "wool_autoscaler_stops_total", result="stopped") == 0
            shown = "wool_autoscaler_retired_timestamp_seconds"
            assert value(autoscaler, shown, worker=proxy.address) is not None
            assert proxy.calls == calls == 2
            if stopped:
                assert await fleet.wait_exit(behind) == 0
            else:
                assert await takes_tasks(behind)
            assert await takes_tasks(direct)

    async def test_cycle_black_holed_worker_is_never_stopped(
        self, fleet, make_autoscaler, serve_text
    ) -> None:
        """Given an idle worker behind a proxy that accepts connections and never
        answers, when two cycles run, then its confirmation times out
        (``unreachable``: no stop sent) and it cools down on the next cycle."""
        # Arrange
        (behind,) = await fleet.start(1)
        async with FlakyProxy(behind, "black_hole") as proxy:
            url = await serve_text(exposition(proxy.address))
            autoscaler = make_autoscaler(url, max_idle=0.2, min_workers=0, cooldown=60.0)
            autoscaler.actuator.settings = actuator_module.ActionSettings(rpc_timeout=1.0)
            await asyncio.sleep(0.3)
            # Act
            await autoscaler.cycle()
            await autoscaler.cycle()
            # Assert
            assert outcomes(autoscaler) == [
                (proxy.address, StopResult.UNREACHABLE),
                (proxy.address, Verdict.COOLDOWN),
            ]
            assert value(autoscaler, "wool_autoscaler_stops_total", result="unreachable") == 1
            assert value(autoscaler, "wool_autoscaler_blocked_total", reason="cooldown") == 1
            assert await takes_tasks(behind)

    async def test_cycle_stop_repointed_to_a_busy_worker_is_refused(
        self, fleet, make_autoscaler, serve_text, tmp_path: Path
    ) -> None:
        """Given an idle worker behind a proxy that, after the confirming idle reply,
        closes the connection and sends the next one to a busy worker, when a cycle
        runs, then the busy worker refuses the conditional stop (``refused_busy``),
        its task completes, and the idle worker is not stopped either."""
        # Arrange
        idle, busy = await fleet.start(2)
        gate = tmp_path / "gate"
        await fleet.keep_busy(busy, gate)
        async with FlakyProxy(idle) as proxy:

            async def repoint(worker: str) -> None:
                await proxy.repoint(busy)

            url = await serve_text(exposition(proxy.address))
            autoscaler = make_autoscaler(url, max_idle=0.2, min_workers=0, before_stop=repoint)
            await asyncio.sleep(0.3)
            # Act
            await autoscaler.cycle()
            gate.touch()
            # Assert
            assert outcomes(autoscaler) in (
                [(proxy.address, StopResult.REFUSED_BUSY)],
                [(proxy.address, StopResult.UNANSWERED)],  # sent on the closed connection
            )
            assert await fleet.running[0] == "ok"
            assert await takes_tasks(busy) and await takes_tasks(idle)
