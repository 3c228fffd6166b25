"""The autoscaler daemon against real worker processes and a real exporter process."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import threading
import time
from collections.abc import Collection
from dataclasses import replace
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path

import grpc
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from support import tasks
from support.instant_vector import vector
from support.pooled import settled
from support.unix_http import socket_path
from support.waiting import eventually_async
from support.wool_namespaces import fresh_namespace, held
from support.wool_pools import unique_namespace
from wool.runtime.discovery.local import _short_hash

from wool_idle.autoscaler import actuator as actuator_module
from wool_idle.autoscaler import daemon as daemon_module
from wool_idle.autoscaler import identity as identity_module
from wool_idle.autoscaler import memory as memory_module
from wool_idle.autoscaler.daemon import Autoscaler
from wool_idle.autoscaler.decision_log import MAX_FIELD
from wool_idle.autoscaler.policy import RETIRING_TTL, Decision, Reading
from wool_idle.autoscaler.sources import ExporterSource, PrometheusSource, Selector
from wool_idle.autoscaler.state_file import Marks, StateFile
from wool_idle.autoscaler.stop_outcome import StopAttempt
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.discovery import drop as drop_module
from wool_idle.discovery.drop import Dropper, DropResult
from wool_idle.discovery.published import read_records
from wool_idle.discovery.spec import DiscoverySpec
from wool_idle.exceptions import DispatchRejected, TransientRpcError
from wool_idle.exporter.app import ExporterSettings, create_app
from wool_idle.exporter.discovered import DiscoveredTargets
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.target import Target
from wool_idle.exporter.targets import TargetSet
from wool_idle.worker import LocalWorker, WorkerConnection
from wool_idle.worker.channels import ChannelKey, pool

VECTOR = '{"status": "success", "data": {"resultType": "vector", "result": [%s]}}'


async def on_prometheus(make_autoscaler, aiohttp_server, body: str) -> Autoscaler:
    """An autoscaler (max idle 1 s) reading a real HTTP server that answers every
    Prometheus query with ``body``."""

    async def answer(request: web.Request) -> web.Response:
        return web.Response(text=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/query", answer)
    server = await aiohttp_server(app)
    autoscaler = make_autoscaler("", max_idle=1.0)
    autoscaler.source = PrometheusSource(
        autoscaler.source.session, str(server.make_url("/")), [], None, 5.0, alert_max_age=60.0
    )
    return autoscaler


def value(autoscaler, name: str, **labels: str) -> float:
    return autoscaler.registry.get_sample_value(name, labels)


class TestAutoscaler:
    async def test_cycle_stops_idle_keeps_busy_and_floor(
        self, fleet, exporter_process, make_autoscaler, tmp_path: Path
    ) -> None:
        """Given three idle workers and one busy, a floor of 2, when a cycle runs past
        max-idle, then the two longest-idle workers exit, the busy one and one idle
        one keep running (the floor)."""
        # Arrange
        addresses = await fleet.start(4)
        busy, idle = addresses[0], addresses[1:]
        await fleet.keep_busy(busy, tmp_path / "gate")
        exporter = exporter_process(addresses)
        autoscaler = make_autoscaler(exporter.url, max_idle=0.3, min_workers=2, cooldown=0.0)
        await asyncio.sleep(0.4)
        # Act
        ok = await autoscaler.cycle()
        stopped = [r.worker for r in autoscaler.records if r.result is StopResult.STOPPED]
        # Assert
        assert ok
        assert len(stopped) == 2 and set(stopped) <= set(idle)
        for address in stopped:
            assert await fleet.wait_exit(address) == 0
        assert fleet.alive(busy)
        assert sum(fleet.alive(a) for a in idle) == 1
        assert value(autoscaler, "wool_autoscaler_stops_total", result="stopped") == 2
        assert value(autoscaler, "wool_autoscaler_blocked_total", reason="min_workers") == 1
        assert value(autoscaler, "wool_autoscaler_source_up") == 1

    async def test_cycle_worker_draining_for_another_stop_holds_no_floor(
        self, fleet, exporter_process, make_autoscaler, tmp_path: Path
    ) -> None:
        """Given a pool of two workers and a floor of 1, one draining a task for a stop
        this autoscaler did not send (an operator's `wool-idle stop`, a supervisor's
        SIGTERM) and the other idle, when a cycle runs past max-idle, then the idle
        one is kept (min_workers): the leaving one counts no more (it read busy and
        held the floor, so the idle one was stopped and the pool emptied)."""
        # Arrange
        leaving, idle = await fleet.start(2)
        gate = tmp_path / "gate"
        await fleet.keep_busy(leaving, gate)
        outside = WorkerConnection(leaving)
        stop = asyncio.ensure_future(outside.stop(30.0, timeout=60))
        with pytest.raises((TransientRpcError, DispatchRejected)):
            while True:  # until it drains (new tasks refused)
                await outside.dispatch(tasks.echo, 1)
        exporter = exporter_process([leaving, idle])
        autoscaler = make_autoscaler(exporter.url, max_idle=0.3, min_workers=1, cooldown=0.0)
        await asyncio.sleep(0.4)
        # Act
        try:
            ok = await autoscaler.cycle()
            verdicts = {r.worker: r.verdict for r in autoscaler.records}
        finally:
            gate.touch()
            await asyncio.gather(stop, return_exceptions=True)
            await outside.close()
        # Assert
        assert ok
        assert fleet.alive(idle)
        assert verdicts[idle] == Verdict.MIN_WORKERS

    async def test_race_task_arrives_before_stop(
        self, fleet, exporter_process, make_autoscaler, tmp_path: Path
    ) -> None:
        """Given a worker nominated while idle, when it receives a long task right
        before the stop (a hook between confirmation and stop), then it is not stopped
        (refused_busy, counted once: as a stop result, not also as blocked), the task
        completes, and a later cycle retires it once idle again."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        gate = tmp_path / "gate"
        arrivals = []

        async def task_arrives(worker: str) -> None:
            if not arrivals:
                arrivals.append(worker)
                await fleet.keep_busy(worker, gate)

        autoscaler = make_autoscaler(
            exporter.url, max_idle=0.3, min_workers=0, cooldown=0.0, before_stop=task_arrives
        )
        await asyncio.sleep(0.4)
        # Act
        await autoscaler.cycle()
        first = autoscaler.records[-1].result
        alive_after_race = fleet.alive(address)
        gate.touch()
        task_result = await fleet.running[0]
        await asyncio.sleep(0.5)
        await autoscaler.cycle()
        second = autoscaler.records[-1].result
        # Assert
        assert first is StopResult.REFUSED_BUSY
        assert alive_after_race
        assert task_result == "ok"
        assert second is StopResult.STOPPED
        assert await fleet.wait_exit(address) == 0
        assert value(autoscaler, "wool_autoscaler_stops_total", result="refused_busy") == 1
        assert value(autoscaler, "wool_autoscaler_blocked_total", reason="busy_on_recheck") is None

    async def test_exporter_down_stops_no_one_then_resumes(
        self, fleet, exporter_process, make_autoscaler
    ) -> None:
        """Given idle workers and an exporter that goes down, when cycles run while it
        is down, then no one is stopped and source_up is 0; when it returns on the same
        address, decisions resume. The address is a Unix socket: a TCP port freed while
        the exporter is down may be taken by another process (on a busy machine)."""
        # Arrange
        addresses = await fleet.start(2)
        exporter = exporter_process(addresses, listen=f"unix:{socket_path('exporter')}")
        autoscaler = make_autoscaler(exporter.url, max_idle=0.2, min_workers=0)
        await asyncio.sleep(0.3)
        exporter.stop()
        # Act
        down = [await autoscaler.cycle() for _ in range(2)]
        source_down = value(autoscaler, "wool_autoscaler_source_up")
        alive_while_down = [fleet.alive(a) for a in addresses]
        exporter.start()
        up = await autoscaler.cycle()
        # Assert
        assert down == [False, False] and source_down == 0
        assert alive_while_down == [True, True]
        assert up and value(autoscaler, "wool_autoscaler_source_up") == 1
        assert value(autoscaler, "wool_autoscaler_stops_total", result="stopped") == 2

    async def test_shutdown_lets_the_current_stop_finish(
        self, fleet, exporter_process, make_autoscaler, monkeypatch
    ) -> None:
        """Given two idle workers planned for stopping in one cycle, one stop at a
        time, when shutdown is requested during the first stop (as its RPC is made),
        then that stop completes (the worker exits 0) and the second worker is left
        running: no planned stop starts once shutdown is asked for."""
        # Arrange
        monkeypatch.setattr(daemon_module, "RETIRING_AT_ONCE", 1)
        addresses = await fleet.start(2)
        exporter = exporter_process(addresses)
        autoscaler = make_autoscaler(exporter.url, max_idle=0.2, min_workers=0)
        stop = WorkerConnection.stop

        async def shutdown_requested(connection: WorkerConnection, *args, **kwargs) -> None:
            autoscaler.stopping.set()
            await stop(connection, *args, **kwargs)

        monkeypatch.setattr(WorkerConnection, "stop", shutdown_requested)
        await asyncio.sleep(0.3)
        # Act
        await autoscaler.cycle()
        stopped = [r.worker for r in autoscaler.records if r.result is StopResult.STOPPED]
        # Assert
        assert len(stopped) == 1
        assert await fleet.wait_exit(stopped[0]) == 0
        (other,) = set(addresses) - set(stopped)
        assert fleet.alive(other)

    async def test_dry_run_reports_and_stops_no_one(
        self, fleet, exporter_process, make_autoscaler
    ) -> None:
        """Given an idle worker and a dry run, when a cycle runs, then the decision log
        says dry_run with the confirmed idle, and the worker keeps serving."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        autoscaler = make_autoscaler(exporter.url, max_idle=0.2, min_workers=0, dry_run=True)
        await asyncio.sleep(0.3)
        # Act
        await autoscaler.cycle()
        record = autoscaler.records[-1]
        # Assert
        assert record.verdict is Verdict.STOP
        assert record.result is StopResult.DRY_RUN and record.confirmed_idle >= 0.2
        async with WorkerConnection(address) as connection:
            assert await connection.idle_time() > 0
        assert value(autoscaler, "wool_autoscaler_stops_total", result="dry_run") == 1

    async def test_unreachable_worker_on_confirm(self, make_autoscaler, aiohttp_server) -> None:
        """Given a source that reports a dead address as idle, when a cycle runs, then
        the confirmation fails, the result is unreachable and the worker cools down."""

        # Arrange
        async def metrics(request):
            return web.Response(
                text='wool_worker_idle_seconds{worker="127.0.0.1:1"} 500\n'
                'wool_worker_up{worker="127.0.0.1:1"} 1\n'
                'wool_worker_idle_supported{worker="127.0.0.1:1"} 1\n'
            )

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        server = await aiohttp_server(app)
        autoscaler = make_autoscaler(
            str(server.make_url("/metrics")), max_idle=1.0, min_workers=0, cooldown=60.0
        )
        # Act
        await autoscaler.cycle()
        await autoscaler.cycle()
        # Assert
        assert autoscaler.records[0].result is StopResult.UNREACHABLE
        assert autoscaler.records[1].verdict.value == "cooldown"

    async def test_cycle_survives_bad_candidates_and_stops_the_good_one(
        self, fleet, make_autoscaler, serve_text, undecodable_worker
    ) -> None:
        """Given a source listing, longest idle first, a worker label that is a name, an
        address with a trailing space, a worker whose idle reply does not decode, and a
        real idle worker, when a cycle runs, then it completes: the two labels are
        invalid_address (never dialled), the undecodable worker's result is failed, and
        the real worker is stopped."""
        # Arrange
        (address,) = await fleet.start(1)
        rows = {
            "worker-name": 900,
            "127.0.0.1:1 ": 800,
            undecodable_worker.address: 700,
            address: 600,
        }
        text = "".join(
            f'wool_worker_idle_seconds{{worker="{w}"}} {idle}\n'
            f'wool_worker_up{{worker="{w}"}} 1\n'
            f'wool_worker_idle_supported{{worker="{w}"}} 1\n'
            for w, idle in rows.items()
        )
        autoscaler = make_autoscaler(await serve_text(text), max_idle=0.2, min_workers=0)
        await asyncio.sleep(0.3)
        # Act
        ok = await autoscaler.cycle()
        outcomes = {r.worker: r.result or r.verdict for r in autoscaler.records}
        # Assert
        assert ok
        assert outcomes == {
            "worker-name": Verdict.INVALID_ADDRESS,
            "127.0.0.1:1 ": Verdict.INVALID_ADDRESS,
            undecodable_worker.address: StopResult.FAILED,
            address: StopResult.STOPPED,
        }
        assert await fleet.wait_exit(address) == 0
        assert undecodable_worker.stops == 0
        assert value(autoscaler, "wool_autoscaler_blocked_total", reason="invalid_address") == 2
        assert value(autoscaler, "wool_autoscaler_stops_total", result="failed") == 1

    async def test_cycle_silent_candidates_do_not_hold_up_the_others(
        self, fleet, make_autoscaler, serve_text, scripted
    ) -> None:
        """Given a real idle worker listed first (longest idle) and three workers that
        never answer their idle RPC, all planned for stopping, when a cycle runs, then
        the three are asked while the first is being stopped (one silent worker costs
        its own timeout, not that of every stop after it), the first is stopped, and
        the three are unreachable."""
        # Arrange
        (address,) = await fleet.start(1)
        silent = [await scripted(hang=True) for _ in range(3)]
        rows = {address: 900} | {worker.address: 800 for worker in silent}
        text = "".join(
            f'wool_worker_idle_seconds{{worker="{w}"}} {idle}\n'
            f'wool_worker_up{{worker="{w}"}} 1\n'
            f'wool_worker_idle_supported{{worker="{w}"}} 1\n'
            for w, idle in rows.items()
        )
        asked_meanwhile: list[bool] = []

        async def before_stop(worker: str) -> None:
            if worker == address:
                asked = await eventually_async(lambda: all(w.idle_calls for w in silent), 5.0)
                asked_meanwhile.append(asked)

        autoscaler = make_autoscaler(
            await serve_text(text), max_idle=0.2, min_workers=0, before_stop=before_stop
        )
        autoscaler.action = replace(autoscaler.action, rpc_timeout=1.0)
        autoscaler.__post_init__()
        await asyncio.sleep(0.3)  # the real worker idle past max_idle by its own clock
        # Act
        ok = await autoscaler.cycle()
        outcomes = {r.worker: r.result for r in autoscaler.records}
        # Assert
        assert ok and asked_meanwhile == [True]
        assert outcomes == {address: StopResult.STOPPED} | {
            worker.address: StopResult.UNREACHABLE for worker in silent
        }

    async def test_run_survives_a_cycle_that_raises(self, make_autoscaler, caplog) -> None:
        """Given a source that raises an unexpected error once (not a SourceError), when
        the daemon runs, then the error is logged and counted, and the next cycle runs:
        the daemon lives on."""

        # Arrange
        class Flaky:
            description, empty_hint = "flaky", "?"
            reads = 0

            async def read(self) -> list[Reading]:
                self.reads += 1
                if self.reads == 1:
                    raise RuntimeError("boom")
                autoscaler.stopping.set()
                return []

        autoscaler = make_autoscaler("", source=Flaky(), max_idle=1.0)
        # Act
        with caplog.at_level(logging.ERROR, logger="wool_idle.autoscaler"):
            await asyncio.wait_for(autoscaler.run(0.01), 10)
        # Assert
        assert autoscaler.source.reads == 2
        assert any("cycle failed" in r.getMessage() for r in caplog.records)
        assert value(autoscaler, "wool_autoscaler_cycle_errors_total") == 1.0

    @pytest.mark.parametrize(
        "body",
        [
            "[" * 100_000,
            VECTOR % '{"metric": {"__name__": [], "worker": "a:1"}, "value": [1, "1"]}',
            VECTOR % '{"metric": {"__name__": {}, "worker": "a:1"}, "value": [1, "1"]}',
        ],
    )
    async def test_cycle_prometheus_garbage_is_a_source_failure(
        self, make_autoscaler, aiohttp_server, body: str
    ) -> None:
        """Given a Prometheus source answering deeply nested or mistyped JSON, when a
        cycle runs, then it returns False (source down) instead of raising."""

        # Arrange
        autoscaler = await on_prometheus(make_autoscaler, aiohttp_server, body)
        # Act
        ok = await autoscaler.cycle()
        # Assert
        assert ok is False
        assert value(autoscaler, "wool_autoscaler_source_up") == 0

    async def test_cycle_source_listing_no_worker_is_warned_of_once(
        self, make_autoscaler, aiohttp_server, caplog
    ) -> None:
        """Given --metrics-url at a page of valid exposition text with no worker series
        (the exporter's /metrics/exporter, a Prometheus server's own /metrics), when two
        cycles run, then each read succeeds and one warning names the source and the URL
        to use, instead of a silent fleet of none."""

        # Arrange
        async def answer(request: web.Request) -> web.Response:
            return web.Response(text="# TYPE process_open_fds gauge\nprocess_open_fds 9.0\n")

        app = web.Application()
        app.router.add_get("/metrics/exporter", answer)
        server = await aiohttp_server(app)
        autoscaler = make_autoscaler(str(server.make_url("/metrics/exporter")), max_idle=1.0)
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            ok = [await autoscaler.cycle(), await autoscaler.cycle()]
        # Assert
        warnings = [r.getMessage() for r in caplog.records if "lists no worker" in r.getMessage()]
        assert ok == [True, True]
        assert len(warnings) == 1
        assert "/metrics/exporter" in warnings[0] and "not /metrics/exporter" in warnings[0]

    async def test_cycle_selector_leaving_every_worker_out_is_named(
        self, make_autoscaler, serve_text, caplog
    ) -> None:
        """Given --metrics-url at a fleet whose one worker is in pool "prod", and
        --selector pool=production (a typo), when a cycle runs, then the warning that
        no worker is listed names the selector, not only the URL: the source does list
        a worker, and the URL is right."""
        # Arrange
        url = await serve_text(
            "# TYPE wool_worker_idle_seconds gauge\n"
            'wool_worker_idle_seconds{worker="127.0.0.1:1",pool="prod"} 5.0\n'
        )
        selectors = [Selector.parse("pool=production")]
        autoscaler = make_autoscaler(url, max_idle=1.0)
        autoscaler.source = ExporterSource(autoscaler.source.session, url, selectors, 5.0)
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            ok = await autoscaler.cycle()
        # Assert
        warnings = [r.getMessage() for r in caplog.records if "lists no worker" in r.getMessage()]
        assert ok is True
        assert len(warnings) == 1
        assert 'selecting {pool="production"}' in warnings[0] and "--selector" in warnings[0]

    async def test_cycle_prometheus_listing_no_worker_asks_about_the_exporter(
        self, make_autoscaler, aiohttp_server, caplog
    ) -> None:
        """Given --prometheus-url at a server with no worker series (it does not scrape
        the exporter, or the exporter is down), when a cycle runs, then the warning
        asks whether it scrapes the exporter, not about the exporter's pages, which no
        --prometheus-url names."""

        # Arrange
        autoscaler = await on_prometheus(make_autoscaler, aiohttp_server, json.dumps(vector()))
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            ok = await autoscaler.cycle()
        # Assert
        warnings = [r.getMessage() for r in caplog.records if "lists no worker" in r.getMessage()]
        assert ok is True and len(warnings) == 1
        assert "scrape the exporter" in warnings[0] and "/metrics/exporter" not in warnings[0]


class TestOneWorkerManyNames:
    @pytest.mark.parametrize(("min_workers", "stops"), [(1, 0), (0, 1)])
    async def test_cycle_counts_a_worker_listed_under_two_spellings_once(
        self, fleet, exporter_process, make_autoscaler, min_workers: int, stops: int
    ) -> None:
        """Given the only worker, idle, listed to a real exporter twice (127.0.0.1:P and
        localhost:P), when a cycle runs, then with a floor of 1 it keeps running (held
        by min_workers: one worker, not two), and with no floor it is stopped once,
        through 127.0.0.1:P (never a second stop through the other spelling)."""
        # Arrange
        (address,) = await fleet.start(1)
        port = address.rpartition(":")[2]
        exporter = exporter_process([address, f"localhost:{port}"])
        autoscaler = make_autoscaler(exporter.url, max_idle=0.3, min_workers=min_workers)
        await asyncio.sleep(0.4)
        # Act
        ok = await autoscaler.cycle()
        # Assert
        assert ok
        tried = [(r.worker, r.result) for r in autoscaler.records if r.result is not None]
        assert tried == [(address, StopResult.STOPPED)] * stops
        if stops:
            assert await fleet.wait_exit(address) == 0
        else:
            assert fleet.alive(address)
            assert [(r.worker, r.verdict) for r in autoscaler.records] == [
                (address, Verdict.MIN_WORKERS)
            ]

    async def test_cycle_shows_a_worker_retired_under_every_spelling_read(
        self, fleet, exporter_process, make_autoscaler
    ) -> None:
        """Given the only worker, on [::1], idle, listed to a real exporter as [::1]:P and
        [0:0:0:0:0:0:0:1]:P, with no floor, when a cycle stops it (once, through the
        first spelling), then it is shown retired under both spellings: the exporter
        goes on reading it down under each, and one left unmarked would alert as down."""
        # Arrange
        worker = LocalWorker("[::1]:0")
        fleet.workers.append(worker)
        await worker.start()
        port = worker.address.rpartition(":")[2]
        spellings = [worker.address, f"[0:0:0:0:0:0:0:1]:{port}"]
        exporter = exporter_process(spellings)
        autoscaler = make_autoscaler(exporter.url, max_idle=0.3, min_workers=0)
        await asyncio.sleep(0.4)
        # Act
        await autoscaler.cycle()
        # Assert
        tried = [(r.worker, r.result) for r in autoscaler.records if r.result is not None]
        assert tried == [(spellings[1], StopResult.STOPPED)]
        assert await fleet.wait_exit(worker.address) == 0
        assert all(retired(autoscaler, label) is not None for label in spellings)

    async def test_cycle_a_target_that_never_answered_holds_no_floor(
        self, fleet, exporter_process, make_autoscaler, scripted
    ) -> None:
        """Given the only real worker, idle, and beside it on a real exporter a target
        whose every reply is over the client's receive limit (the client's own
        RESOURCE_EXHAUSTED: nothing shows a worker answered), with a floor of 1, when a
        cycle runs, then the real worker keeps running: the other target is down and
        counts for nothing."""
        # Arrange
        (address,) = await fleet.start(1)
        oversized = await scripted(reply=b"\x7a" + bytes([0x80, 0x80, 0x80, 0x02]) + bytes(1 << 22))
        exporter = exporter_process([address, oversized.address])
        autoscaler = make_autoscaler(exporter.url, max_idle=0.3, min_workers=1)
        await asyncio.sleep(0.4)
        # Act
        ok = await autoscaler.cycle()
        # Assert
        assert ok and fleet.alive(address)
        assert [(r.worker, r.verdict) for r in autoscaler.records] == [
            (address, Verdict.MIN_WORKERS)
        ]


class ScriptedSource:
    """A source answering the readings a test sets (the autoscaler's own view)."""

    description, empty_hint = "scripted", "?"

    def __init__(self) -> None:
        self.readings: list[Reading] = []

    async def read(self) -> list[Reading]:
        return list(self.readings)


class SampledSource:
    """A source serving samples taken at set moments (``taken``: worker to monotonic
    time, every worker 1000 s idle), aged as of the start of its read, which then
    takes ``delay`` seconds to answer (the rest of a Prometheus read: more queries,
    the parse)."""

    description, empty_hint = "sampled", "?"

    def __init__(self, taken: dict[str, float], delay: float) -> None:
        self.taken, self.delay = taken, delay

    async def read(self) -> list[Reading]:
        evaluated = time.monotonic()
        readings = [
            Reading(w, 1000.0 - i, age=evaluated - t) for i, (w, t) in enumerate(self.taken.items())
        ]
        await asyncio.sleep(self.delay)
        return readings


def retired(autoscaler, worker: str, **group: str) -> float | None:
    return value(autoscaler, "wool_autoscaler_retired_timestamp_seconds", worker=worker, **group)


class TestRetirement:
    async def test_cycle_marks_a_worker_whose_stop_got_no_answer_retired(
        self, make_autoscaler, serve_text, scripted
    ) -> None:
        """Given an idle worker whose stop call fails without a refusal (it may be
        draining), when a cycle runs, then its result is unanswered and it is shown
        retired, so its exit reads as retired, not as down."""
        # Arrange
        worker = await scripted(seconds=900.0, stop_code=grpc.StatusCode.UNAVAILABLE)
        text = (
            f'wool_worker_idle_seconds{{worker="{worker.address}"}} 900\n'
            f'wool_worker_up{{worker="{worker.address}"}} 1\n'
            f'wool_worker_idle_supported{{worker="{worker.address}"}} 1\n'
        )
        autoscaler = make_autoscaler(await serve_text(text), max_idle=0.2, min_workers=0)
        # Act
        await autoscaler.cycle()
        # Assert
        assert [r.result for r in autoscaler.records] == [StopResult.UNANSWERED]
        assert retired(autoscaler, worker.address) is not None

    async def test_cycle_marks_the_stopped_worker_retired_with_its_group(
        self, fleet, make_autoscaler, serve_text
    ) -> None:
        """Given two idle hot workers and a cold one, grouped by wool_tags with a floor
        of 1, when a cycle runs, then one hot worker is stopped and shown retired (its
        stop time, its wool_tags), and the others are not."""
        # Arrange
        hot, other_hot, cold = await fleet.start(3)
        text = "".join(
            f'wool_worker_idle_seconds{{worker="{w}",wool_tags="{t}"}} {idle}\n'
            f'wool_worker_up{{worker="{w}",wool_tags="{t}"}} 1\n'
            f'wool_worker_idle_supported{{worker="{w}",wool_tags="{t}"}} 1\n'
            for w, t, idle in ((hot, "hot", 900), (other_hot, "hot", 800), (cold, "cold", 950))
        )
        autoscaler = make_autoscaler(
            await serve_text(text), max_idle=0.2, min_workers=1, group_by=("wool_tags",)
        )
        await asyncio.sleep(0.3)
        before = time.time()
        # Act
        await autoscaler.cycle()
        # Assert
        stopped = [r for r in autoscaler.records if r.result is StopResult.STOPPED]
        assert [(r.worker, dict(r.group)) for r in stopped] == [(hot, {"wool_tags": "hot"})]
        assert before <= retired(autoscaler, hot, wool_tags="hot") <= time.time()
        assert retired(autoscaler, other_hot, wool_tags="hot") is None
        assert retired(autoscaler, cold, wool_tags="cold") is None
        assert await fleet.wait_exit(hot) == 0 and fleet.alive(other_hot) and fleet.alive(cold)

    async def test_cycle_marks_the_stopped_worker_retired_with_its_whole_group_value(
        self, fleet, make_autoscaler, serve_text
    ) -> None:
        """Given an idle worker, grouped by wool_tags, whose tags label is longer than
        the decision log keeps (``MAX_FIELD``: a worker of many tags), when a cycle
        stops it, then it is shown retired under its whole tags label, the one its own
        series carry (the decision log's cut value named a group no worker is in)."""
        # Arrange
        (worker,) = await fleet.start(1)
        tags = ",".join(f"tag{i}" for i in range(400))
        text = (
            f'wool_worker_idle_seconds{{worker="{worker}",wool_tags="{tags}"}} 900\n'
            f'wool_worker_up{{worker="{worker}",wool_tags="{tags}"}} 1\n'
            f'wool_worker_idle_supported{{worker="{worker}",wool_tags="{tags}"}} 1\n'
        )
        autoscaler = make_autoscaler(
            await serve_text(text), max_idle=0.2, min_workers=0, group_by=("wool_tags",)
        )
        await asyncio.sleep(0.3)
        # Act
        await autoscaler.cycle()
        # Assert
        assert [r.result for r in autoscaler.records] == [StopResult.STOPPED]
        assert len(tags) > MAX_FIELD
        assert retired(autoscaler, worker, wool_tags=tags) is not None

    async def test_retired_mark_ends_when_a_new_worker_answers(
        self, fleet, make_autoscaler
    ) -> None:
        """Given a worker stopped and marked retired, when the source reports it up
        (draining), then down, then up again, then the mark stays all through (a
        draining worker may read down once); once its retiring time is over, the next
        up reading (a new worker at the address) ends it."""
        # Arrange
        (address,) = await fleet.start(1)
        source = ScriptedSource()
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_workers=0)
        await asyncio.sleep(0.3)
        source.readings = [Reading(address, 900.0)]
        await autoscaler.cycle()
        marks = []
        # Act
        for reading in (
            Reading(address, 901.0),
            Reading(address, None, up=False),
            Reading(address, 0.0),
        ):
            source.readings = [reading]
            await autoscaler.cycle()
            marks.append(retired(autoscaler, address) is not None)
        state = autoscaler.planner.state
        expired = {w: since - RETIRING_TTL for w, since in state.retiring.items()}
        autoscaler.planner.state = replace(state, retiring=expired)
        await autoscaler.cycle()
        marks.append(retired(autoscaler, address) is not None)
        # Assert
        assert autoscaler.records[0].result is StopResult.STOPPED
        assert marks == [True, True, True, False]

    async def test_cycle_worker_draining_past_the_retiring_time_holds_no_floor(
        self, make_autoscaler, scripted, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given an unbounded grace, a floor of 1, and a worker (no conditional stop)
        whose stop goes on draining in the background, when its retiring mark has run
        out while the call still goes on and it reads busy (draining) beside another
        worker now idle, then it still counts as gone: the idle one is held by the
        floor, and no stop is sent to it."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.2)
        draining = await scripted(seconds=900.0, stop_delay=60.0)
        other = await scripted(seconds=900.0)
        source = ScriptedSource()
        autoscaler = make_autoscaler("", source=source, grace=-1.0, max_idle=60.0, min_workers=1)
        source.readings = [Reading(draining.address, 900.0), Reading(other.address, 0.0)]
        await autoscaler.cycle()
        state = autoscaler.planner.state
        retiring_for = autoscaler.planner.settings.retiring_for
        ran_out = {w: since - retiring_for - 1.0 for w, since in state.retiring.items()}
        autoscaler.planner.state = replace(state, retiring=ran_out)
        source.readings = [Reading(draining.address, 0.0), Reading(other.address, 900.0)]
        # Act
        await autoscaler.cycle()
        # Assert
        assert [(r.worker, r.result) for r in autoscaler.records if r.result] == [
            (draining.address, StopResult.UNANSWERED)
        ]
        assert autoscaler.records[-1].verdict is Verdict.MIN_WORKERS
        assert other.stop_requests == []
        await draining.close()
        await autoscaler.actuator.finish_stops(5.0)

    async def test_retiring_time_follows_the_grace(self, make_autoscaler) -> None:
        """Given an autoscaler whose stops drain for 10 minutes, then its planner keeps
        a stopped worker retiring for that drain, the stop's margin and the max
        staleness (60 s)."""
        # Act
        autoscaler = make_autoscaler("", source=ScriptedSource(), max_idle=60.0, grace=600.0)
        # Assert
        assert autoscaler.planner.settings.retiring_for == 670.0

    async def test_cycle_stopped_workers_old_samples_never_hold_the_floor(
        self, fleet, make_autoscaler
    ) -> None:
        """Given four idle workers, a floor of 2, one stop per cycle, a max staleness
        of 10 minutes, and cycles that stopped the two longest idle, when RETIRING_TTL
        later the source still serves the stopped workers' samples from before their
        stops (a caching proxy, /federate, a long scrape interval), fresh, beside newer
        ones of the two others, idle longer, then the next cycles stop no one: the old
        samples hold no floor, and the two other workers keep running."""
        # Arrange
        addresses = await fleet.start(4)
        source = ScriptedSource()
        autoscaler = make_autoscaler(
            "",
            source=source,
            max_idle=0.2,
            min_workers=2,
            max_stops_per_cycle=1,
            max_staleness=600.0,
        )
        await asyncio.sleep(0.3)
        source.readings = [Reading(a, 900.0 - i) for i, a in enumerate(addresses)]
        for _ in range(3):
            await autoscaler.cycle()
        stopped = [r.worker for r in autoscaler.records if r.result is StopResult.STOPPED]
        for address in stopped:
            await fleet.wait_exit(address)
        state = autoscaler.planner.state
        later = {w: since - RETIRING_TTL - 1.0 for w, since in state.retiring.items()}
        autoscaler.planner.state = replace(state, retiring=later)
        old = [replace(r, age=RETIRING_TTL + 2.0) for r in source.readings[:2]]
        source.readings = [*old, Reading(addresses[2], 1200.0), Reading(addresses[3], 1199.0)]
        # Act
        for _ in range(2):
            await autoscaler.cycle()
        # Assert
        assert stopped == addresses[:2]
        assert [r.worker for r in autoscaler.records if r.result is StopResult.STOPPED] == stopped
        assert [fleet.alive(a) for a in addresses] == [False, False, True, True]

    async def test_cycle_crashed_workers_last_sample_never_holds_the_floor(
        self, fleet, make_autoscaler
    ) -> None:
        """Given three idle workers and a floor of 2, when the longest idle one crashes
        (SIGKILL) and the source goes on serving every worker's last samples, 10 s old
        (a scrape interval longer than a cycle, a caching proxy), then the cycle that
        picks it finds it unreachable, and the next cycles read it as down and stop no
        one: its old sample holds no floor, and the other two keep running; a sample
        taken since (as fresh as the read) counts as read (it cools down)."""
        # Arrange
        addresses = await fleet.start(3)
        crashed, *kept = addresses
        source = ScriptedSource()
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_workers=2)
        await asyncio.sleep(0.3)
        source.readings = [Reading(a, 900.0 - i, age=10.0) for i, a in enumerate(addresses)]
        await fleet.workers[0].kill()
        # Act
        for _ in range(3):
            await autoscaler.cycle()
        old = await autoscaler.planner.plan(source.readings, time.monotonic())
        source.readings[0] = replace(source.readings[0], age=0.0)
        fresh = await autoscaler.planner.plan(source.readings, time.monotonic())
        # Assert
        assert [(r.worker, r.result) for r in autoscaler.records if r.result] == [
            (crashed, StopResult.UNREACHABLE)
        ]
        assert all(fleet.alive(a) for a in kept)
        assert {d.worker: d.verdict for d in old.decisions}[crashed] is Verdict.DOWN
        assert {d.worker: d.verdict for d in fresh.decisions}[crashed] is Verdict.COOLDOWN

    async def test_cycle_floor_held_by_a_worker_crashed_since_its_reading_stops_no_one(
        self, fleet, make_autoscaler, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given two idle workers, a floor of 1 and fresh readings of both, when the
        less idle one has crashed since its reading was taken (before the next scrape
        of a Prometheus source), then the cycle asks it whether it answers, finds it
        does not and keeps the other back (``min_workers``): the group's last live
        worker is not stopped (it was, and the group was empty); once the crashed one
        reads down, the survivor is still held by the floor."""
        # Arrange
        addresses = await fleet.start(2)
        survivor, crashed = addresses
        source = ScriptedSource()
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_workers=1)
        await asyncio.sleep(0.3)
        source.readings = [Reading(survivor, 900.0, age=1.0), Reading(crashed, 800.0, age=1.0)]
        await fleet.workers[1].kill()
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            await autoscaler.cycle()
        source.readings[1] = replace(source.readings[1], up=False)
        await autoscaler.cycle()
        # Assert
        assert [r.result for r in autoscaler.records if r.result] == []
        assert fleet.alive(survivor)
        assert [r.verdict for r in autoscaler.records if r.worker == survivor] == [
            Verdict.MIN_WORKERS,
            Verdict.MIN_WORKERS,
        ]
        assert "0 of the 1 workers its --min-workers 1 counts on answered now" in caplog.text
        assert crashed in caplog.text

    async def test_cycle_leaving_during_the_floor_check_stops_no_one(
        self, fleet, make_autoscaler, scripted
    ) -> None:
        """Given an idle worker and, holding its group's floor of 1, a worker whose
        idle RPC never answers (its timeout an hour), when the daemon is signalled
        while the cycle asks that one, then the cycle ends without waiting out the
        question (it waited its rounds of timeouts, the daemon's exit with it) and the
        idle worker is held back, not stopped."""
        # Arrange
        (idle,) = await fleet.start(1)
        hung = await scripted(hang=True)
        source = ScriptedSource()
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_workers=1)
        autoscaler.action = replace(autoscaler.action, rpc_timeout=3600.0)
        source.readings = [Reading(idle, 900.0, age=1.0), Reading(hung.address, 0.0, age=1.0)]
        cycle = asyncio.ensure_future(autoscaler.cycle())
        assert await eventually_async(lambda: hung.idle_calls > 0)
        key = ChannelKey(hung.address, None, tuple(actuator_module.CHANNEL_OPTIONS))
        assert pool().users(key) == 1  # the question, open
        # Act
        autoscaler.stopping.set()
        await asyncio.wait_for(cycle, 30)
        # Assert
        assert fleet.alive(idle)
        assert [(r.worker, r.verdict) for r in autoscaler.records] == [(idle, Verdict.MIN_WORKERS)]
        assert pool().users(key) == 0  # the question's connection closed

    async def test_cycle_leaving_during_a_stops_confirmation_sends_no_stop(
        self, make_autoscaler, scripted
    ) -> None:
        """Given a worker planned for a stop (floor 0) whose idle RPC never answers (the
        confirmation's timeout an hour), when the daemon is signalled while the cycle
        confirms it, then the cycle ends without waiting out the confirmation (it held
        the exit up to --rpc-timeout), and no stop is sent, nor settled."""
        # Arrange
        hung = await scripted(seconds=900.0, hang=True)
        source = ScriptedSource()
        source.readings = [Reading(hung.address, 900.0, age=1.0)]
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_workers=0)
        settings = autoscaler.actuator.settings
        autoscaler.actuator.settings = replace(settings, rpc_timeout=3600.0)
        cycle = asyncio.ensure_future(autoscaler.cycle())
        assert await eventually_async(lambda: hung.idle_calls > 0)
        # Act
        autoscaler.stopping.set()
        ok = await asyncio.wait_for(cycle, 30)
        # Assert
        assert ok
        assert hung.stop_requests == []
        assert list(autoscaler.records) == []
        stops = [value(autoscaler, "wool_autoscaler_stops_total", result=r) for r in StopResult]
        assert not any(stops)

    async def test_cycle_leaving_during_the_write_before_a_stop_on_a_hung_mount(
        self, fleet, make_autoscaler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given an idle worker planned for a stop (floor 0) and a state file on a mount
        that hangs (a write that never returns, as one cannot be made here; the write
        timeout an hour), when the daemon is signalled during the write before the stop,
        then the cycle ends without waiting for the file (its last write, after the cut,
        queued behind the hung one for the write timeout, the exit with it), no stop is
        sent, and a later write does not name the worker retiring (it was kept as sent)."""
        # Arrange
        (idle,) = await fleet.start(1)
        path = tmp_path / "state.json"
        writing, release = threading.Event(), threading.Event()
        save = StateFile.save

        def hung_save(self: StateFile, marks: Marks) -> None:
            writing.set()
            release.wait()

        monkeypatch.setattr(memory_module, "WRITE_TIMEOUT", 3600.0)
        source = ScriptedSource()
        source.readings = [Reading(idle, 900.0, age=1.0)]
        autoscaler = make_autoscaler(
            "", source=source, state_file=StateFile(path), max_idle=0.2, min_workers=0
        )
        await asyncio.sleep(0.3)
        monkeypatch.setattr(StateFile, "save", hung_save)
        cycle = asyncio.ensure_future(autoscaler.cycle())
        try:
            assert await eventually_async(writing.is_set)
            # Act
            autoscaler.stopping.set()
            ok = await asyncio.wait_for(cycle, 30)
        finally:
            monkeypatch.setattr(StateFile, "save", save)
            release.set()
        assert autoscaler.memory is not None
        await autoscaler.memory.save()
        # Assert
        assert ok
        assert fleet.alive(idle)
        assert list(autoscaler.records) == []
        assert idle not in StateFile(path).load().retiring

    async def test_cycle_leaving_during_the_name_lookups_stops_no_one(
        self, make_autoscaler, monkeypatch: pytest.MonkeyPatch, caplog
    ) -> None:
        """Given a worker read idle under a host name whose lookup hangs (a DNS server
        that does not answer: here a lookup that never returns, as one cannot be run
        here), the resolver's wait an hour, when the daemon is signalled during the
        lookup, then the cycle ends without waiting for it (it held the exit up to the
        resolver's timeout) and plans nothing: no decision is made, and it says so."""
        # Arrange
        caplog.set_level(logging.INFO, "wool_idle.autoscaler")
        looking, release = threading.Event(), threading.Event()

        def hung_look_up(worker: str) -> None:
            looking.set()
            release.wait()

        monkeypatch.setattr(identity_module, "look_up", hung_look_up)
        source = ScriptedSource()
        source.readings = [Reading("stalled.example:1", 900.0, age=1.0)]
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_workers=0)
        autoscaler.planner.resolver.timeout = 3600.0
        cycle = asyncio.ensure_future(autoscaler.cycle())
        try:
            assert await eventually_async(looking.is_set)
            # Act
            autoscaler.stopping.set()
            ok = await asyncio.wait_for(cycle, 30)
        finally:
            release.set()
        # Assert
        assert ok
        assert list(autoscaler.records) == []
        assert "shutting down: the plan cut short, no worker stopped" in caplog.text

    async def test_cycle_floor_confirmed_by_its_live_workers_stops_as_planned(
        self, fleet, make_autoscaler
    ) -> None:
        """Given three idle workers and a floor of 1, all alive, when a cycle runs, then
        the floor's workers answer and the two longest idle are stopped as planned:
        the check holds back nothing when the floor is there."""
        # Arrange
        addresses = await fleet.start(3)
        source = ScriptedSource()
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_workers=1)
        await asyncio.sleep(0.3)
        source.readings = [Reading(a, 900.0 - i, age=1.0) for i, a in enumerate(addresses)]
        # Act
        await autoscaler.cycle()
        # Assert (the two stops run at once: recorded as each ends)
        assert sorted((r.worker, r.result) for r in autoscaler.records if r.result) == sorted(
            [(addresses[0], StopResult.STOPPED), (addresses[1], StopResult.STOPPED)]
        )
        assert fleet.alive(addresses[2])

    @pytest.mark.parametrize("leave", ["once", "run"])
    async def test_leaving_waits_for_a_drain_within_the_stops_deadline(
        self, make_autoscaler, scripted, monkeypatch: pytest.MonkeyPatch, leave: str
    ) -> None:
        """Given stops sent with a 3 s grace and a worker that answers its stop once
        drained, 1.5 s later, past the cycle's wait for the reply and past EXIT_WAIT,
        when the daemon leaves (after --once, or asked to stop while running), then it
        waits for the stop within its deadline (grace and margin): the call is answered,
        not cut short (a wool worker whose stop call is cut never exits)."""
        # Arrange
        monkeypatch.setattr(actuator_module, "STOP_REPLY_WAIT", 0.2)
        monkeypatch.setattr(daemon_module, "EXIT_WAIT", 0.2)
        worker = await scripted(seconds=900.0, stop_delay=1.5)
        source = ScriptedSource()
        source.readings = [Reading(worker.address, 900.0)]
        autoscaler = make_autoscaler("", source=source, max_idle=60.0, min_workers=0, grace=3.0)
        # Act
        if leave == "once":
            await autoscaler.once()
        else:
            running = asyncio.create_task(autoscaler.run(3600.0))
            await eventually_async(lambda: len(worker.stop_requests) == 1)
            autoscaler.stopping.set()
            await running
        # Assert
        assert (worker.stops_answered, worker.stops_cancelled) == (1, 0)

    async def test_cycle_sample_taken_just_before_the_crash_was_found_reads_down(
        self, fleet, make_autoscaler
    ) -> None:
        """Given three idle workers and a floor of 2, when the longest idle one crashes
        and is found unreachable by the stop of a cycle, and the next read serves a
        sample of it taken just before that finding, then that sample reads as down
        however long the read took after its evaluation (ages are set against when the
        read began): the next cycle stops no one, and the other two keep running."""
        # Arrange
        addresses = await fleet.start(3)
        crashed, *kept = addresses
        await asyncio.sleep(0.3)
        await fleet.workers[0].kill()
        before_the_stop = time.monotonic() - 0.3
        source = SampledSource({a: before_the_stop for a in addresses}, delay=0.0)
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_workers=2)
        await autoscaler.cycle()
        source.taken = {crashed: before_the_stop, **{a: time.monotonic() for a in kept}}
        source.delay = 2.0
        # Act
        await autoscaler.cycle()
        # Assert
        assert [(r.worker, r.result) for r in autoscaler.records if r.result] == [
            (crashed, StopResult.UNREACHABLE)
        ]
        assert all(fleet.alive(a) for a in kept)

    async def test_cycle_min_age_counts_from_the_end_of_a_slow_first_read(
        self, fleet, make_autoscaler
    ) -> None:
        """Given two idle workers, a floor of 1 and a min age of 3 s, when the read that
        first sees them takes 3 s (a slow source: up to --source-timeout) and the next
        cycle follows at once, then that cycle stops no one (min_age): the min age
        counts from the end of the read that saw them, not from its start."""
        # Arrange
        addresses = await fleet.start(2)
        await asyncio.sleep(0.3)
        source = SampledSource(dict.fromkeys(addresses, time.monotonic()), delay=3.0)
        autoscaler = make_autoscaler("", source=source, max_idle=0.2, min_age=3.0)
        await autoscaler.cycle()
        source.taken, source.delay = dict.fromkeys(addresses, time.monotonic()), 0.0
        # Act
        await autoscaler.cycle()
        # Assert
        assert [r.verdict for r in autoscaler.records] == [Verdict.MIN_AGE] * 4
        assert all(fleet.alive(a) for a in addresses)

    async def test_failed_drop_never_undoes_the_stop(
        self, fleet, aiohttp_server, make_autoscaler, caplog
    ) -> None:
        """Given an autoscaler publishing drops in a namespace that does not exist, when
        it stops an idle worker whose series name that namespace, then the stop stands
        (the worker exits, it is shown retired), the drop is counted as
        namespace_missing and logged, and the cycle completes."""
        # Arrange
        (address,) = await fleet.start(1)
        absent = unique_namespace("absent")
        prober, url = await exporter_over(named(absent, address), aiohttp_server)
        autoscaler = make_autoscaler(url, max_idle=0.2, min_workers=0, dropper=Dropper([absent]))
        await asyncio.sleep(0.3)
        # Act
        try:
            ok = await autoscaler.cycle()
        finally:
            await prober.close()
        # Assert
        assert ok and await fleet.wait_exit(address) == 0
        assert retired(autoscaler, address) is not None
        assert value(autoscaler, "wool_autoscaler_drops_total", result="namespace_missing") == 1
        assert value(autoscaler, "wool_autoscaler_drops_total", result="published") == 0
        assert f"worker {address}: drop namespace_missing" in caplog.text

    async def test_a_drop_that_raises_touches_no_other_stop(
        self, fleet, aiohttp_server, make_autoscaler, caplog
    ) -> None:
        """Given two idle workers stopped in one cycle and a dropper whose first drop
        raises (a fault of ours), when the cycle runs, then the fault is logged and
        both stops are recorded, counted and shown retired, and the other drop is
        published as usual."""

        # Arrange
        class RaisingOnce(Dropper):
            raised = False

            async def drop(self, address: str, namespaces: Collection[str]) -> DropResult | None:
                if not self.raised:
                    self.raised = True
                    raise RuntimeError("boom")
                return await super().drop(address, namespaces)

        first, second = await fleet.start(2)
        absent = unique_namespace("absent")
        prober, url = await exporter_over(named(absent, first, second), aiohttp_server)
        autoscaler = make_autoscaler(
            url, max_idle=0.2, min_workers=0, dropper=RaisingOnce([absent])
        )
        await asyncio.sleep(0.3)
        # Act
        try:
            ok = await autoscaler.cycle()
        finally:
            await prober.close()
        # Assert
        assert ok
        assert [r.result for r in autoscaler.records] == [StopResult.STOPPED] * 2
        assert value(autoscaler, "wool_autoscaler_stops_total", result="stopped") == 2
        assert retired(autoscaler, first) is not None and retired(autoscaler, second) is not None
        assert "publishing its drop failed" in caplog.text
        assert value(autoscaler, "wool_autoscaler_drops_total", result="namespace_missing") == 1

    async def test_late_stop_is_learnt_between_cycles(self, make_autoscaler) -> None:
        """Given a cycle under way (its plan would overwrite the planner's state when it
        ends), when a stop that went on in the background ends, then the planner
        learns it only once the cycle ended (never lost to the plan), and the worker
        is retiring and shown retired afresh."""
        # Arrange
        autoscaler = make_autoscaler("http://127.0.0.1:1/metrics", max_idle=60.0)
        await autoscaler._lock.acquire()  # a cycle under way
        ended = Decision("127.0.0.1:7", 900.0, Verdict.STOP)
        # Act
        ending = autoscaler.bookkeeping.stop_ended(ended, StopResult.UNANSWERED)
        late = asyncio.ensure_future(ending)
        await asyncio.sleep(0.1)
        during = dict(autoscaler.planner.state.retiring)
        autoscaler._lock.release()
        await late
        # Assert
        assert during == {}
        assert "127.0.0.1:7" in autoscaler.planner.state.retiring
        assert retired(autoscaler, "127.0.0.1:7") is not None

    async def test_late_refusal_ends_the_marks_and_cools_down(self, make_autoscaler) -> None:
        """Given a worker whose stop got no answer in time (retiring, shown retired),
        when that stop is refused after all, then the worker is neither retiring nor
        shown retired (it is alive), and it cools down."""
        # Arrange
        autoscaler = make_autoscaler("http://127.0.0.1:1/metrics", max_idle=60.0)
        decision = Decision("127.0.0.1:7", 900.0, Verdict.STOP)
        await autoscaler.bookkeeping.settle(decision, StopAttempt(StopResult.UNANSWERED, 900.0))
        marked = retired(autoscaler, "127.0.0.1:7")
        # Act
        await autoscaler.bookkeeping.stop_ended(decision, StopResult.REFUSED_BUSY)
        # Assert
        state = autoscaler.planner.state
        assert marked is not None and retired(autoscaler, "127.0.0.1:7") is None
        assert "127.0.0.1:7" not in state.retiring and "127.0.0.1:7" in state.cooldown_until

    @pytest.mark.parametrize(
        "ended",
        [StopAttempt(StopResult.REFUSED_BUSY, 0.0), StopAttempt(StopResult.UNANSWERED, 900.0)],
        ids=["refused", "cut_off_at_once"],
    )
    async def test_stops_ended_undropped_never_crowd_out_the_note_of_a_draining_one(
        self, make_autoscaler, monkeypatch, ended: StopAttempt
    ) -> None:
        """Given a worker listed in a namespace whose stop goes on in the background,
        when more stops than the dropper keeps notes of end with no drop to make
        meanwhile (refused, or unanswered at once: their calls cut off, no
        ``stop_ended`` comes for them) and then the draining stop ends stopped, then
        its record is dropped (their notes went, never to crowd out one still needed)."""
        # Arrange
        monkeypatch.setattr(drop_module, "NOTES_KEPT", 2)
        with fresh_namespace() as namespace:
            async with held(namespace) as publications:
                await publications.add("127.0.0.1:7")
                autoscaler = make_autoscaler(
                    "http://127.0.0.1:1/metrics", max_idle=60.0, dropper=Dropper([namespace])
                )
                draining = Decision(
                    "127.0.0.1:7", 900.0, Verdict.STOP, namespaces=frozenset({namespace})
                )
                await autoscaler._before_stop(draining.worker)
                going_on = StopAttempt(StopResult.UNANSWERED, 900.0, going_on=True)
                await autoscaler.bookkeeping.settle(draining, going_on)
                for port in (8, 9, 10):
                    other = Decision(f"127.0.0.1:{port}", 900.0, Verdict.STOP)
                    await autoscaler._before_stop(other.worker)
                    await autoscaler.bookkeeping.settle(other, ended)
                # Act
                await autoscaler.bookkeeping.stop_ended(draining, StopResult.STOPPED)
                # Assert
                assert value(autoscaler, "wool_autoscaler_drops_total", result="published") == 1
                assert read_records(namespace) == []

    async def test_dry_run_neither_marks_nor_drops(
        self, fleet, exporter_process, make_autoscaler
    ) -> None:
        """Given a dry run with a dropper, when an idle worker is confirmed, then it is
        not shown retired and no drop is tried."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        autoscaler = make_autoscaler(
            exporter.url,
            max_idle=0.2,
            min_workers=0,
            dry_run=True,
            dropper=Dropper([unique_namespace("absent")]),
        )
        await asyncio.sleep(0.3)
        # Act
        await autoscaler.cycle()
        # Assert
        assert autoscaler.records[-1].result is StopResult.DRY_RUN
        assert retired(autoscaler, address) is None
        assert (
            sum(
                value(autoscaler, "wool_autoscaler_drops_total", result=r.value) for r in DropResult
            )
            == 0
        )


async def floor_of_one_per_tag(targets: TargetSet, aiohttp_server, make_autoscaler):
    """A real exporter app over ``targets`` (its prober, to close) and an autoscaler
    reading its /metrics: grouped by wool_tags, a floor of 1, max-idle 0.2 s, no cooldown."""
    prober = Prober(tls=None, timeout=5.0, concurrency=8)
    app = create_app(targets, prober, CollectorRegistry(), ExporterSettings())
    server = await aiohttp_server(app)
    autoscaler = make_autoscaler(
        str(server.make_url("/metrics")),
        grace=1.0,
        max_idle=0.2,
        min_workers=1,
        cooldown=0.0,
        group_by=("wool_tags",),
    )
    return prober, autoscaler


def named(namespace: str, *addresses: str) -> TargetSet:
    """Targets at ``addresses`` whose series name ``namespace`` (``wool_namespace``), as
    the exporter labels a discovered worker's."""
    return TargetSet(static=[Target(a, (("wool_namespace", namespace),)) for a in addresses])


async def exporter_over(targets: TargetSet, aiohttp_server) -> tuple[Prober, str]:
    """A real exporter app over ``targets``: its prober (to close) and its /metrics URL."""
    prober = Prober(tls=None, timeout=5.0, concurrency=8)
    app = create_app(targets, prober, CollectorRegistry(), ExporterSettings())
    server = await aiohttp_server(app)
    return prober, str(server.make_url("/metrics"))


def idle_readings(*workers) -> list[Reading]:
    """Fresh readings of ``workers``, idle 900 s, 899 s, ... (the first longest)."""
    return [Reading(w.address, 900.0 - i) for i, w in enumerate(workers)]


class TestStateFile:
    async def test_restart_counts_the_stops_of_the_earlier_process_retiring(
        self, make_autoscaler, scripted, tmp_path: Path
    ) -> None:
        """Given three idle workers that go on answering after their stop (draining, or
        a source serving old samples), a floor of 2, and an autoscaler that stopped the
        first, when a new autoscaler on the same state file runs a cycle over the same
        readings, then the first counts as retiring (gone for the floor) and no other
        worker is stopped: two stay."""
        # Arrange
        workers = [await scripted(seconds=900.0) for _ in range(3)]
        source = ScriptedSource()
        source.readings = idle_readings(*workers)
        path = tmp_path / "state.json"
        StateFile(path).save(Marks())  # not a first start: a first start holds every stop
        rule = {"max_idle": 60.0, "min_workers": 2, "source": source}
        earlier = make_autoscaler("", state_file=StateFile(path), **rule)
        await earlier.once()
        restarted = make_autoscaler("", state_file=StateFile(path), **rule)
        # Act
        await restarted.once()
        # Assert
        assert [len(w.stop_requests) for w in workers] == [1, 0, 0]
        assert workers[0].address in restarted.planner.state.retiring
        assert {r.worker: r.verdict for r in restarted.records} == {
            workers[1].address: Verdict.MIN_WORKERS,
            workers[2].address: Verdict.MIN_WORKERS,
        }

    async def test_restart_shows_the_workers_retired_before(
        self, make_autoscaler, scripted, tmp_path: Path
    ) -> None:
        """Given an autoscaler on a state file, grouped by wool_tags, that stopped an idle
        hot worker, when a new autoscaler starts on the same file and runs a cycle that
        reads the worker down (its static target stays), then the worker is shown retired
        again, with the stop time and the group of the first process (so WoolWorkerDown
        does not fire for it), and the file still holds the mark."""
        # Arrange
        worker = await scripted(seconds=900.0)
        source = ScriptedSource()
        source.readings = [Reading(worker.address, 900.0, group=("hot",))]
        path = tmp_path / "state.json"
        StateFile(path).save(Marks())
        rule = {"max_idle": 60.0, "min_workers": 0, "group_by": ("wool_tags",), "source": source}
        earlier = make_autoscaler("", state_file=StateFile(path), **rule)
        await earlier.once()
        stopped_at = retired(earlier, worker.address, wool_tags="hot")
        source.readings = [Reading(worker.address, None, up=False, group=("hot",))]
        restarted = make_autoscaler("", state_file=StateFile(path), **rule)
        # Act
        await restarted.once()
        # Assert
        assert len(worker.stop_requests) == 1 and stopped_at is not None
        assert retired(restarted, worker.address, wool_tags="hot") == stopped_at
        assert StateFile(path).load().retired[worker.address].at == stopped_at

    @pytest.mark.parametrize("task_arrives", [False, True])
    async def test_stop_is_written_down_before_it_is_sent(
        self, make_autoscaler, scripted, tmp_path: Path, task_arrives: bool
    ) -> None:
        """Given an idle worker (one that does not honour the conditional stop) and a
        state file, when a cycle stops it, then right before the stop is sent the file
        already names it retiring (a crash between leaves it retiring), and after, the
        file still does; when a task reaches it while the stop is written down, no stop
        is sent (its second confirmation reads busy) and the file no longer names it:
        an autoscaler restarted on it stops it in its turn, not after a retiring time
        for a stop never sent."""
        # Arrange
        worker = await scripted(seconds=900.0)
        source = ScriptedSource()
        source.readings = idle_readings(worker)
        state = StateFile(tmp_path / "state.json")
        state.save(Marks())
        on_disk = []

        async def read_file(address: str) -> None:
            on_disk.append(set(state.load().retiring))
            if task_arrives:
                worker.seconds = 0.0

        autoscaler = make_autoscaler(
            "",
            source=source,
            state_file=state,
            max_idle=60.0,
            min_workers=0,
            before_stop=read_file,
        )
        # Act
        await autoscaler.once()
        # Assert
        assert len(worker.stop_requests) == (0 if task_arrives else 1)
        assert on_disk == [{worker.address}]
        assert set(state.load().retiring) == (set() if task_arrives else {worker.address})

    async def test_stop_not_written_down_is_not_sent(
        self, make_autoscaler, scripted, tmp_path: Path
    ) -> None:
        """Given an idle worker and a state file whose directory is gone after start,
        when a cycle would stop the worker, then no stop is sent (it could not be written
        down first): the attempt failed, the worker cools down, the failed write is
        counted, and the cycle ends normally."""
        # Arrange
        worker = await scripted(seconds=900.0)
        source = ScriptedSource()
        source.readings = idle_readings(worker)
        directory = tmp_path / "state"
        directory.mkdir()
        state = StateFile(directory / "state.json")
        state.save(Marks())
        autoscaler = make_autoscaler(
            "", source=source, state_file=state, max_idle=60.0, min_workers=0
        )
        autoscaler.memory.recall()
        shutil.rmtree(directory)
        # Act
        ok = await autoscaler.cycle()
        # Assert
        assert ok
        assert worker.stop_requests == []
        assert [r.result for r in autoscaler.records] == [StopResult.FAILED]
        assert worker.address in autoscaler.planner.state.cooldown_until
        assert value(autoscaler, "wool_autoscaler_state_write_errors_total") >= 1

    @pytest.mark.parametrize("content", [None, "{not json", '{"version": 1}'])
    async def test_missing_or_unreadable_state_file_holds_every_stop(
        self, make_autoscaler, scripted, tmp_path: Path, content: str | None, caplog
    ) -> None:
        """Given an idle worker and a state file that is missing or malformed, when a
        cycle runs, then no stop is sent (the earlier process's stops are unknown): the
        worker is held as min_age, the reason is logged, and the file is written anew,
        with the hold."""
        # Arrange
        worker = await scripted(seconds=900.0)
        source = ScriptedSource()
        source.readings = idle_readings(worker)
        path = tmp_path / "state.json"
        if content is not None:
            path.write_text(content)
        autoscaler = make_autoscaler(
            "", source=source, state_file=StateFile(path), max_idle=60.0, min_workers=0
        )
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            await autoscaler.once()
        # Assert
        assert worker.stop_requests == []
        assert [r.verdict for r in autoscaler.records] == [Verdict.MIN_AGE]
        assert "none is sent for 300s" in caplog.text
        written = StateFile(path).load()
        assert (written.retiring, written.held_until is not None) == ({}, True)

    async def test_restart_within_the_hold_holds_on(
        self, make_autoscaler, scripted, tmp_path: Path
    ) -> None:
        """Given three idle workers, a floor of 2, an autoscaler that stopped the first,
        its state file lost, and a new autoscaler that held every stop for it (and wrote
        the file anew), when a third starts on that file within the hold and the first
        worker reads busy (it drains a task that came before its stop), then the third
        holds on too: no other worker is stopped (the lost stop is still unknown)."""
        # Arrange
        workers = [await scripted(seconds=900.0) for _ in range(3)]
        source = ScriptedSource()
        source.readings = idle_readings(*workers)
        path = tmp_path / "state.json"
        StateFile(path).save(Marks())
        rule = {"max_idle": 60.0, "min_workers": 2, "source": source}
        await make_autoscaler("", state_file=StateFile(path), **rule).once()
        path.unlink()
        source.readings = [replace(source.readings[0], idle=5.0), *source.readings[1:]]
        await make_autoscaler("", state_file=StateFile(path), **rule).once()
        third = make_autoscaler("", state_file=StateFile(path), **rule)
        # Act
        await third.once()
        # Assert
        assert [len(w.stop_requests) for w in workers] == [1, 0, 0]
        assert {r.worker: r.verdict for r in third.records} == {
            workers[1].address: Verdict.MIN_AGE,
            workers[2].address: Verdict.MIN_AGE,
        }


class TestDiscoveryDown:
    async def test_cycle_workers_kept_from_an_unreadable_discovery_are_not_stopped(
        self, make_autoscaler, aiohttp_server, start_server
    ) -> None:
        """Given a real exporter following a namespace with two idle hot workers, and a
        cold worker whose pool was SIGKILLed (its record listed, its block gone: wool
        cannot read the namespace), down past the exporter's grace, when an autoscaler
        grouping by wool_tags with a floor of 1 runs a cycle past max-idle, then it stops
        neither hot worker (either could be a new worker of another pool on a dead
        worker's port: their pool is unknown): both read without an idle value."""
        # Arrange
        hot = [await start_server(), await start_server()]
        targets = TargetSet()
        with fresh_namespace() as namespace:
            spec = DiscoverySpec.parse(f"local:{namespace}")
            discovered = DiscoveredTargets([spec], targets, poll_interval=0.1, grace=0.0)
            prober, autoscaler = await floor_of_one_per_tag(
                targets, aiohttp_server, make_autoscaler
            )
            task = asyncio.ensure_future(discovered.run())
            try:
                async with held(namespace) as publish:
                    for worker in hot:
                        await publish.add(worker.address, tags=("hot",))
                    dead = await publish.add("127.0.0.1:9", tags=("cold",))
                    await settled(lambda: len(targets.all()) == 3)
                    SharedMemory(name=_short_hash(dead.hex)).unlink()
                    await settled(lambda: all(t.pool_unknown for t in targets.all()))
                    await asyncio.sleep(0.3)  # every worker idle past max-idle
                    # Act
                    ok = await autoscaler.cycle()
                    await publish.drop(dead)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await prober.close()
        # Assert
        assert ok
        assert not [r for r in autoscaler.records if r.result is StopResult.STOPPED]
        verdicts = {r.worker: r.verdict for r in autoscaler.records}
        assert {verdicts[w.address] for w in hot} == {Verdict.INVALID_VALUE}
        for worker in hot:
            async with WorkerConnection(worker.address) as connection:
                assert await connection.idle_time() > 0


class TestTargetsFileCut:
    async def test_cycle_worker_moved_by_a_cut_targets_file_holds_no_floor(
        self, make_autoscaler, aiohttp_server, start_server, tmp_path: Path
    ) -> None:
        """Given a real exporter over a targets file listing worker Y in pool g and
        worker X in pool gpu, both idle, when the file is read half rewritten in place,
        cut inside X's label value (gpu read as g), and an autoscaler grouping by
        wool_tags with a floor of 1 runs a cycle past max-idle, then it stops no one:
        X is withheld (it holds no floor in g, so Y is g's last worker and is kept)."""
        # Arrange
        y, x = await start_server(), await start_server()
        path = tmp_path / "targets.yml"
        whole = (
            f"- targets: ['{y.address}']\n  labels:\n    wool_tags: g\n"
            f"- targets: ['{x.address}']\n  labels:\n    wool_tags: gpu\n"
        )
        path.write_text(whole)
        targets = TargetSet(path=str(path))
        targets.reload(force=True)
        prober, autoscaler = await floor_of_one_per_tag(targets, aiohttp_server, make_autoscaler)
        try:
            path.write_text(whole[: whole.rindex("gpu") + 1])
            await targets.refresh()
            await asyncio.sleep(0.3)  # every worker idle past max-idle
            # Act
            ok = await autoscaler.cycle()
        finally:
            await prober.close()
        # Assert
        assert ok
        assert dict(targets.get(x.address).labels) == {"wool_tags": "g"}
        assert not [r for r in autoscaler.records if r.result is StopResult.STOPPED]
        verdicts = {r.worker: r.verdict for r in autoscaler.records}
        assert verdicts[x.address] is Verdict.INVALID_VALUE
        for worker in (x, y):
            async with WorkerConnection(worker.address) as connection:
                assert await connection.idle_time() > 0


class TestDrops:
    async def test_cycle_mixed_fleet_drops_only_the_discovered_worker(
        self, make_autoscaler, aiohttp_server, start_server, caplog
    ) -> None:
        """Given a real exporter listing one idle worker from --target (its series name
        no wool namespace) and following a held namespace that publishes another idle
        worker, and an autoscaler dropping stopped workers from that namespace, when a
        cycle stops both, then the discovered worker is dropped from the namespace and
        no drop is made for the other: nothing counted or logged as not_found."""
        # Arrange
        listed, found = await start_server(), await start_server()
        targets = TargetSet(static=[Target(listed.address)])
        caplog.set_level(logging.INFO, logger="wool_idle.discovery")
        with fresh_namespace() as namespace:
            spec = DiscoverySpec.parse(f"local:{namespace}")
            discovered = DiscoveredTargets([spec], targets, poll_interval=0.1, grace=0.0)
            prober, url = await exporter_over(targets, aiohttp_server)
            autoscaler = make_autoscaler(
                url, grace=1.0, max_idle=0.2, min_workers=0, dropper=Dropper([namespace])
            )
            task = asyncio.ensure_future(discovered.run())
            try:
                async with held(namespace) as publish:
                    await publish.add(found.address)
                    await settled(lambda: len(targets.all()) == 2)
                    await asyncio.sleep(0.3)  # both idle past max-idle
                    # Act
                    ok = await autoscaler.cycle()
                    remaining = read_records(namespace)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await prober.close()
        # Assert
        assert ok
        assert {r.worker: r.result for r in autoscaler.records} == {
            listed.address: StopResult.STOPPED,
            found.address: StopResult.STOPPED,
        }
        assert value(autoscaler, "wool_autoscaler_drops_total", result="published") == 1
        assert value(autoscaler, "wool_autoscaler_drops_total", result="not_found") == 0
        assert remaining == []
        assert f"worker {found.address}: drop published" in caplog.text
        assert "not_found" not in caplog.text

    async def test_cycle_worker_of_a_namespace_not_followed_is_not_dropped(
        self, make_autoscaler, aiohttp_server, start_server, caplog
    ) -> None:
        """Given a held namespace listing an idle worker whose series name it, and an
        autoscaler dropping from another namespace only, when a cycle stops the worker,
        then the stop stands, the worker stays listed in its namespace (never touched:
        the autoscaler does not follow it) and the drop counts as not_followed."""
        # Arrange
        worker = await start_server()
        with fresh_namespace() as namespace:
            async with held(namespace) as publish:
                await publish.add(worker.address)
                prober, url = await exporter_over(named(namespace, worker.address), aiohttp_server)
                dropper = Dropper([unique_namespace("absent")])
                autoscaler = make_autoscaler(
                    url, grace=1.0, max_idle=0.2, min_workers=0, dropper=dropper
                )
                await asyncio.sleep(0.3)
                # Act
                try:
                    ok = await autoscaler.cycle()
                finally:
                    await prober.close()
                remaining = read_records(namespace)
        # Assert
        assert ok and autoscaler.records[-1].result is StopResult.STOPPED
        assert value(autoscaler, "wool_autoscaler_drops_total", result="not_followed") == 1
        assert value(autoscaler, "wool_autoscaler_drops_total", result="namespace_missing") == 0
        assert [r.address for r in remaining] == [worker.address]
        assert f"worker {worker.address}: drop not_followed" in caplog.text
