"""The exporter's endpoints over real HTTP, against real workers and faulty servers."""

from __future__ import annotations

import asyncio
import gzip
import math
import time
from pathlib import Path

import pytest
from support import tasks
from support.hung import HungServer
from support.metrics import by_worker, samples

from wool_idle.worker import LocalWorker, WorkerConnection


@pytest.fixture
async def busy_and_idle(tmp_path: Path):
    """Two real worker processes: one running a task until the test ends, one idle."""
    tasks.by_value()
    busy, idle = LocalWorker(), LocalWorker()
    await asyncio.gather(busy.start(), idle.start())
    gate = tmp_path / "gate"
    connection = WorkerConnection(busy.address)
    running = asyncio.ensure_future(connection.dispatch(tasks.gated, str(gate)))
    while await connection.idle_time() != 0.0:
        await asyncio.sleep(0.01)
    yield busy.address, idle.address
    gate.touch()
    await running
    await connection.close()
    await asyncio.gather(busy.stop(grace=1.0), idle.stop(grace=1.0))


class TestMetricsEndpoint:
    async def test_metrics_every_series_per_worker(self, exporter, scripted, busy_and_idle) -> None:
        """Given a busy and an idle real worker, a dead address, a hung server, a
        server without idle, and servers answering NaN, +Inf and -1, when /metrics is
        scraped, then each worker has exactly the series the contract gives it, and no
        idle series where there is no valid value."""
        # Arrange
        busy, idle = busy_and_idle
        hung = HungServer()
        await hung.start()
        stuck = await scripted(hang=True)
        legacy = await scripted(with_idle=False)
        nan, inf, negative = [await scripted(seconds=v) for v in (math.nan, math.inf, -1.0)]
        dead = "127.0.0.1:1"
        client = await exporter(
            [
                busy,
                idle,
                dead,
                hung.address,
                stuck.address,
                legacy.address,
                nan.address,
                inf.address,
                negative.address,
            ],
            timeout=1.0,
        )
        # Act
        response = await client.get("/metrics")
        text = await response.text()
        await hung.close()
        # Assert
        assert response.status == 200
        idle_series = by_worker(text, "wool_worker_idle_seconds")
        assert set(idle_series) == {busy, idle}
        assert idle_series[busy] == 0.0
        assert idle_series[idle] > 0.0
        up = by_worker(text, "wool_worker_up")
        assert up == {
            busy: 1,
            idle: 1,
            dead: 0,
            hung.address: 0,
            stuck.address: 0,
            legacy.address: 1,
            nan.address: 1,
            inf.address: 1,
            negative.address: 1,
        }
        supported = by_worker(text, "wool_worker_idle_supported")
        assert supported == {
            busy: 1,
            idle: 1,
            dead: 0,
            hung.address: 0,
            stuck.address: 0,
            legacy.address: 0,
            nan.address: 1,
            inf.address: 1,
            negative.address: 1,
        }
        assert set(by_worker(text, "wool_worker_probe_duration_seconds")) == set(up)
        errors = {
            dict(k[1])["reason"]: v
            for k, v in samples(text).items()
            if k[0] == "wool_exporter_probe_errors_total"
        }
        assert errors == {
            "unavailable": 1,
            "deadline": 2,
            "unimplemented": 1,
            "invalid_value": 3,
            "other": 0,
        }
        assert samples(text)[("wool_exporter_targets", frozenset())] == 9
        assert ("process_cpu_seconds_total", frozenset()) in samples(text)

    async def test_metrics_hung_worker_within_header_budget(self, exporter, scripted) -> None:
        """Given a hung worker and a healthy one, when Prometheus scrapes with a 1.5s
        scrape timeout, then the response arrives within that budget and the hung
        worker shows up 0."""
        # Arrange
        hung = HungServer()
        await hung.start()
        healthy = await scripted(seconds=4.0)
        client = await exporter([hung.address, healthy.address], timeout=30.0)
        # Act
        started = time.monotonic()
        response = await client.get(
            "/metrics", headers={"X-Prometheus-Scrape-Timeout-Seconds": "1.5"}
        )
        elapsed = time.monotonic() - started
        text = await response.text()
        await hung.close()
        # Assert
        assert elapsed < 1.5
        assert by_worker(text, "wool_worker_up") == {hung.address: 0, healthy.address: 1}
        assert by_worker(text, "wool_worker_idle_seconds") == {healthy.address: 4.0}

    async def test_metrics_concurrent_scrapes_coalesce(self, exporter, scripted) -> None:
        """Given three workers that take 0.3s to answer, when 10 scrapes arrive at
        once, then each worker receives exactly one idle RPC and every scrape gets
        every worker's value."""
        # Arrange
        workers = [await scripted(seconds=float(i), delay=0.3) for i in range(3)]
        client = await exporter([w.address for w in workers])
        # Act
        responses = await asyncio.gather(*(client.get("/metrics") for _ in range(10)))
        bodies = [await r.text() for r in responses]
        # Assert
        assert [w.idle_calls for w in workers] == [1, 1, 1]
        for body in bodies:
            assert by_worker(body, "wool_worker_idle_seconds") == {
                w.address: float(i) for i, w in enumerate(workers)
            }

    async def test_metrics_joined_scrape_keeps_its_own_budget(self, exporter, scripted) -> None:
        """Given a fan-out in flight for a scrape with a long budget over a worker that
        takes 1 s to answer, when a scrape with a 0.8 s timeout joins it, then the
        joiner answers within its budget with that worker unanswered (up 0, no idle
        value), the first scrape gets the value, and the worker was asked once."""
        # Arrange
        slow = await scripted(seconds=9.0, delay=1.0)
        client = await exporter([slow.address], timeout=5.0)
        first = asyncio.ensure_future(client.get("/metrics"))
        while slow.idle_calls == 0:
            await asyncio.sleep(0.01)
        # Act
        started = time.monotonic()
        joined = await client.get(
            "/metrics", headers={"X-Prometheus-Scrape-Timeout-Seconds": "0.8"}
        )
        elapsed = time.monotonic() - started
        joined_text, first_text = await joined.text(), await (await first).text()
        # Assert
        assert elapsed < 0.8
        assert by_worker(joined_text, "wool_worker_up") == {slow.address: 0}
        assert by_worker(joined_text, "wool_worker_idle_seconds") == {}
        assert by_worker(first_text, "wool_worker_idle_seconds") == {slow.address: 9.0}
        assert slow.idle_calls == 1

    async def test_metrics_no_stale_value_after_worker_dies(self, exporter) -> None:
        """Given a worker scraped once, when it is killed and scraped again, then its
        idle series is gone and it shows up 0."""
        # Arrange
        worker = LocalWorker()
        address = await worker.start()
        client = await exporter([address], timeout=2.0)
        first = await (await client.get("/metrics")).text()
        # Act
        await worker.kill()
        second = await (await client.get("/metrics")).text()
        # Assert
        assert address in by_worker(first, "wool_worker_idle_seconds")
        assert by_worker(second, "wool_worker_idle_seconds") == {}
        assert by_worker(second, "wool_worker_up") == {address: 0}

    async def test_metrics_worker_restarted_on_same_address(self, exporter) -> None:
        """Given a worker scraped once, when it is replaced by a new process on the
        same address, then a later scrape reads the new worker without restarting the
        exporter."""
        # Arrange
        first = LocalWorker("127.0.0.1:0")
        address = await first.start()
        client = await exporter([address], timeout=2.0)
        before = by_worker(await (await client.get("/metrics")).text(), "wool_worker_up")
        await first.stop(grace=1.0)
        # Act
        second = LocalWorker(address)
        await second.start()
        deadline = time.monotonic() + 10
        up = {}
        while time.monotonic() < deadline:
            up = by_worker(await (await client.get("/metrics")).text(), "wool_worker_up")
            if up == {address: 1}:
                break
            await asyncio.sleep(0.2)
        await second.stop(grace=1.0)
        # Assert
        assert before == {address: 1}
        assert up == {address: 1}

    async def test_metrics_openmetrics_and_gzip(self, exporter, scripted) -> None:
        """Given a worker, when scraped asking for OpenMetrics and gzip, then the body
        is gzip-compressed OpenMetrics text ending in # EOF."""
        # Arrange
        worker = await scripted(seconds=2.0)
        client = await exporter([worker.address])
        # Act
        response = await client.get(
            "/metrics",
            headers={
                "Accept": "application/openmetrics-text; version=1.0.0",
                "Accept-Encoding": "gzip",
            },
            auto_decompress=False,
        )
        raw = await response.read()
        # Assert
        assert response.headers["Content-Encoding"] == "gzip"
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        assert gzip.decompress(raw).decode().rstrip().endswith("# EOF")


class TestProbeEndpoint:
    async def test_probe_single_target_series_only(self, exporter, scripted) -> None:
        """Given two configured workers, when /probe asks for one, then only that
        worker's series come back, and only it was asked."""
        # Arrange
        one, other = await scripted(seconds=7.0), await scripted(seconds=9.0)
        client = await exporter([one.address, other.address])
        # Act
        response = await client.get("/probe", params={"target": one.address})
        text = await response.text()
        # Assert
        assert response.status == 200
        assert by_worker(text, "wool_worker_idle_seconds") == {one.address: 7.0}
        assert by_worker(text, "wool_worker_up") == {one.address: 1}
        assert (one.idle_calls, other.idle_calls) == (1, 0)
        assert "wool_exporter_targets" not in text

    async def test_probe_unconfigured_target(self, exporter, scripted) -> None:
        """Given an exporter without targets, when /probe names a worker, then that
        worker is probed (Prometheus does the discovery)."""
        # Arrange
        worker = await scripted(seconds=3.0)
        client = await exporter([])
        # Act
        text = await (await client.get("/probe", params={"target": worker.address})).text()
        # Assert
        assert by_worker(text, "wool_worker_idle_seconds") == {worker.address: 3.0}

    @pytest.mark.parametrize(
        "query",
        ["", "?target=", "?target=nohost", "?target=h:0", "?target=h:99999", "?target=unix:"],
    )
    async def test_probe_bad_target_400(self, exporter, query: str) -> None:
        """Given a missing or invalid target, when /probe is called, then 400 with a message."""
        # Arrange
        client = await exporter([])
        # Act
        response = await client.get(f"/probe{query}")
        # Assert
        assert response.status == 400
        assert "target" in (await response.text()) or "address" in (await response.text())


class TestOtherEndpoints:
    async def test_landing_health_ready(self, exporter, scripted) -> None:
        """Given an exporter with one worker scraped once, when /, /-/healthy and
        /-/ready are fetched, then the page lists the worker with its state and the
        probes say OK."""
        # Arrange
        worker = await scripted(seconds=12.0)
        client = await exporter([worker.address])
        await client.get("/metrics")
        # Act
        page = await (await client.get("/")).text()
        healthy = await client.get("/-/healthy")
        ready = await client.get("/-/ready")
        # Assert
        assert worker.address in page and "idle 12.0s" in page
        assert healthy.status == ready.status == 200

    async def test_ready_503_until_targets_file_loads(self, exporter, tmp_path: Path) -> None:
        """Given a targets file that does not exist yet, when /-/ready is fetched, then
        503; once it exists and is reloaded, 200."""
        # Arrange
        path = tmp_path / "targets.json"
        client = await exporter(path=str(path))
        # Act
        before = (await client.get("/-/ready")).status
        path.write_text('[{"targets": ["127.0.0.1:1"]}]')
        client.targets.reload()
        after = (await client.get("/-/ready")).status
        # Assert
        assert (before, after) == (503, 200)
