"""The exporter's endpoints over real HTTP, against real workers and faulty servers."""

from __future__ import annotations

import asyncio
import gzip
import html
import json
import math
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from aiohttp.test_utils import make_mocked_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import tasks
from support.closing import ClosingServer
from support.hung import HungServer
from support.metrics import by_worker, samples
from support.pooled import settled, users
from support.raw import length_delimited
from support.unix_http import socket_path

from wool_idle.autoscaler.sources.exposition import parse_exposition
from wool_idle.contract import MAX_REPLY_BYTES
from wool_idle.exporter.app import (
    SCRAPE_TIMEOUT_HEADER,
    ExporterSettings,
    create_app,
    scrape_budget,
)
from wool_idle.exporter.connections import CHANNEL_OPTIONS, ConnectionCache
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.targets import TargetSet
from wool_idle.proto import IdleTime
from wool_idle.web.metrics import process_registry
from wool_idle.worker import ClientTls, LocalWorker, WorkerConnection

PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
"""The Accept header of Prometheus 2.42's scrapes."""
UNDECODABLE = b"\x09\x00"
"""Bytes that do not decode as an IdleTime (a double field cut short)."""


def write_targets(path: Path, addresses: list[str]) -> None:
    path.write_text(json.dumps([{"targets": addresses}]))


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
            "tls": 0,
            "invalid_value": 3,
            "invalid_reply": 0,
            "other": 0,
            "discovery_down": 0,
            "pool_changed": 0,
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
        exporter. The address is a Unix socket: a TCP port freed by the first worker
        may be taken by another process (on a busy machine) before the second binds."""
        # Arrange
        first = LocalWorker(f"unix:{socket_path('worker')}")
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

    async def test_metrics_undecodable_reply_is_that_workers_failure(
        self, exporter, scripted
    ) -> None:
        """Given a worker answering bytes that are not an IdleTime and a healthy one,
        when /metrics is scraped, then 200 with the healthy worker's value, and the
        other shows down with no idle series and reason invalid_reply."""
        # Arrange
        garbled = await scripted(reply=UNDECODABLE)
        healthy = await scripted(seconds=8.0)
        client = await exporter([garbled.address, healthy.address])
        # Act
        response = await client.get("/metrics")
        text = await response.text()
        # Assert
        assert response.status == 200
        assert by_worker(text, "wool_worker_idle_seconds") == {healthy.address: 8.0}
        assert by_worker(text, "wool_worker_up") == {garbled.address: 0, healthy.address: 1}
        reason = frozenset({("reason", "invalid_reply")})
        assert samples(text)[("wool_exporter_probe_errors_total", reason)] == 1

    async def test_metrics_oversize_reply_is_that_workers_failure(self, exporter, scripted) -> None:
        """Given a worker whose idle reply is a valid idle time padded with a 1 MiB
        field of no meaning (a hostile target makes the exporter take in that much on
        every scrape), when /metrics is scraped, then that worker shows down with no
        idle series and the healthy one keeps its value."""
        # Arrange
        padding = length_delimited(15, bytes(1 << 20))  # a field IdleTime does not have
        bloated = await scripted(reply=IdleTime(seconds=900.0).SerializeToString() + padding)
        healthy = await scripted(seconds=8.0)
        client = await exporter([bloated.address, healthy.address])
        # Act
        response = await client.get("/metrics")
        text = await response.text()
        # Assert
        assert response.status == 200
        assert by_worker(text, "wool_worker_idle_seconds") == {healthy.address: 8.0}
        assert by_worker(text, "wool_worker_up") == {bloated.address: 0, healthy.address: 1}
        reason = frozenset({("reason", "other")})  # RESOURCE_EXHAUSTED, from gRPC's client
        assert samples(text)[("wool_exporter_probe_errors_total", reason)] == 1

    async def test_metrics_labels_too_long_to_read_back_keep_the_last_good_file(
        self, exporter, scripted, tmp_path: Path
    ) -> None:
        """Given two workers loaded from a targets file, when the file is rewritten with
        one of them labelled by a value of 70,000 characters (each of its lines longer
        than the 64 KiB the autoscaler reads: it refused the whole body, every worker's
        reading) and reloaded, then the file is not loaded, and /metrics, read back as
        the autoscaler reads it, still has both workers' values."""
        # Arrange
        first, second = await scripted(seconds=5.0), await scripted(seconds=8.0)
        path = tmp_path / "targets.json"
        write_targets(path, [first.address, second.address])
        client = await exporter(path=str(path))
        groups = [{"targets": [first.address]}, {"targets": [second.address]}]
        groups[1]["labels"] = {"note": "x" * 70_000}
        path.write_text(json.dumps(groups))
        # Act
        loaded = client.targets.reload()
        text = await (await client.get("/metrics")).text()
        readings = {r.worker: r.idle for r in parse_exposition(text)}
        # Assert
        assert not loaded
        assert readings == {first.address: 5.0, second.address: 8.0}

    async def test_metrics_in_flight_survives_removal_and_probe(
        self, exporter, scripted, tmp_path: Path
    ) -> None:
        """Given a scrape waiting on a slow worker, when that worker leaves the targets
        file and a /probe arrives meanwhile, then the scrape still answers 200 with
        both workers' values, and the removed worker's channel closes after it."""
        # Arrange
        slow, other = await scripted(seconds=6.0, delay=0.5), await scripted(seconds=2.0)
        path = tmp_path / "targets.json"
        write_targets(path, [slow.address, other.address])
        client = await exporter(path=str(path))
        scraping = asyncio.ensure_future(client.get("/metrics"))
        await settled(lambda: slow.idle_calls == 1)
        # Act
        write_targets(path, [other.address])
        await client.targets.refresh()
        probe = await client.get("/probe", params={"target": other.address})
        response = await scraping
        text = await response.text()
        after = await (await client.get("/metrics")).text()
        await settled(lambda: users(slow.address) == 0)
        # Assert
        assert (probe.status, response.status) == (200, 200)
        assert by_worker(text, "wool_worker_idle_seconds") == {
            slow.address: 6.0,
            other.address: 2.0,
        }
        assert by_worker(after, "wool_worker_idle_seconds") == {other.address: 2.0}
        assert users(slow.address) == 0

    async def test_metrics_openmetrics_and_gzip(self, exporter, scripted) -> None:
        """Given a worker and 40 unreachable targets (a body over the gzip threshold),
        when scraped asking for OpenMetrics only, and gzip, then the body is
        gzip-compressed OpenMetrics text ending in # EOF."""
        # Arrange
        worker = await scripted(seconds=2.0)
        client = await exporter([worker.address, *(f"unix:/nonexistent/w{i}" for i in range(40))])
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

    async def test_metrics_gzip_refused_with_q_0_is_not_sent(self, exporter, scripted) -> None:
        """Given a body over the gzip threshold, when scraped with gzip refused
        (gzip;q=0), then the body is sent uncompressed, and the answer says it varies
        with Accept and Accept-Encoding (a cache must not serve it to another client)."""
        # Arrange
        worker = await scripted(seconds=2.0)
        client = await exporter([worker.address, *(f"unix:/nonexistent/w{i}" for i in range(40))])
        # Act
        response = await client.get(
            "/metrics",
            headers={"Accept-Encoding": "gzip;q=0, identity"},
            auto_decompress=False,
        )
        text = (await response.read()).decode()
        # Assert
        assert "Content-Encoding" not in response.headers
        assert response.headers["Vary"] == "Accept, Accept-Encoding"
        assert by_worker(text, "wool_worker_idle_seconds") == {worker.address: 2.0}

    async def test_metrics_scrape_timeout_at_offset_still_probes(self, exporter, scripted) -> None:
        """Given a healthy worker and the default offset of 0.5 s, when Prometheus
        scrapes with a scrape timeout of 0.5 s (no more than the offset), then the
        worker still gets half of it and is reported up with its value."""
        # Arrange
        worker = await scripted(seconds=4.0)
        client = await exporter([worker.address])
        # Act
        response = await client.get(
            "/metrics", headers={"X-Prometheus-Scrape-Timeout-Seconds": "0.5"}
        )
        text = await response.text()
        # Assert
        assert by_worker(text, "wool_worker_up") == {worker.address: 1}
        assert by_worker(text, "wool_worker_idle_seconds") == {worker.address: 4.0}

    async def test_metrics_prometheus_accept_gets_text_format_gzipped(
        self, exporter, scripted
    ) -> None:
        """Given a worker and 40 unreachable targets, when scraped with Prometheus's
        Accept header (OpenMetrics preferred, text 0.0.4 allowed) and gzip, then the
        body is the text format 0.0.4, gzip-compressed."""
        # Arrange
        worker = await scripted(seconds=2.0)
        client = await exporter([worker.address, *(f"unix:/nonexistent/w{i}" for i in range(40))])
        # Act
        response = await client.get(
            "/metrics",
            headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"},
            auto_decompress=False,
        )
        text = gzip.decompress(await response.read()).decode()
        # Assert
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert response.headers["Content-Encoding"] == "gzip"
        assert response.headers["Vary"] == "Accept, Accept-Encoding"
        assert "# EOF" not in text
        assert by_worker(text, "wool_worker_idle_seconds") == {worker.address: 2.0}


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

    async def test_probe_from_a_stale_sd_list_withholds_idle(
        self, exporter, scripted, tmp_path: Path
    ) -> None:
        """Given a worker listed in the targets file under pool a, whose /sd group a
        Prometheus holds, when the file drops it (a contested or gone record, a worker
        of another pool now on its port) and Prometheus, its list not yet refreshed,
        probes it with that group's parameters, then its idle value is withheld
        (pool_changed): Prometheus would label it pool a. A probe from a current group,
        or with no group's parameters (Prometheus's own discovery), gets the value."""
        # Arrange
        worker, other = await scripted(seconds=50.0), await scripted(seconds=60.0)
        path = tmp_path / "targets.json"
        path.write_text(
            json.dumps([{"targets": [worker.address, other.address], "labels": {"pool": "a"}}])
        )
        client = await exporter(path=str(path))
        held = {g["targets"][0]: g for g in await (await client.get("/sd")).json()}
        path.write_text(json.dumps([{"targets": [other.address], "labels": {"pool": "a"}}]))
        client.targets.reload()

        async def probe(group: dict[str, object] | None, address: str) -> str:
            params = {"target": address}
            if group is not None:  # as Prometheus: every __param_ label of the group
                labels = group["labels"]
                assert isinstance(labels, dict)
                params |= {k[8:]: v for k, v in labels.items() if k.startswith("__param_")}
            return await (await client.get("/probe", params=params)).text()

        # Act
        stale = await probe(held[worker.address], worker.address)
        current = await (await client.get("/sd")).json()
        fresh = await probe(current[0], other.address)
        own = await probe(None, worker.address)
        counted = samples(await (await client.get("/metrics/exporter")).text())
        # Assert
        assert by_worker(stale, "wool_worker_up") == {worker.address: 1}
        assert by_worker(stale, "wool_worker_idle_seconds") == {}
        errors = ("wool_exporter_probe_errors_total", frozenset({("reason", "pool_changed")}))
        assert counted[errors] == 1
        assert by_worker(fresh, "wool_worker_idle_seconds") == {other.address: 60.0}
        assert by_worker(own, "wool_worker_idle_seconds") == {worker.address: 50.0}

    async def test_probe_undecodable_reply_answers_200(self, exporter, scripted) -> None:
        """Given a worker answering bytes that are not an IdleTime, when /probe asks
        for it, then 200 with the worker down and no idle series."""
        # Arrange
        garbled = await scripted(reply=UNDECODABLE)
        client = await exporter([])
        # Act
        response = await client.get("/probe", params={"target": garbled.address})
        text = await response.text()
        # Assert
        assert response.status == 200
        assert by_worker(text, "wool_worker_idle_seconds") == {}
        assert by_worker(text, "wool_worker_up") == {garbled.address: 0}

    async def test_probe_in_flight_survives_target_removal(
        self, exporter, scripted, tmp_path: Path
    ) -> None:
        """Given a /probe waiting on a slow configured worker, when the worker leaves
        the targets file and a /metrics fan-out drops its connection, then the probe
        still answers 200 with the worker's value, the scrape answers too, and the
        channel closes once the probe is done."""
        # Arrange
        slow, other = await scripted(seconds=6.0, delay=0.5), await scripted(seconds=2.0)
        path = tmp_path / "targets.json"
        write_targets(path, [slow.address, other.address])
        client = await exporter(path=str(path))
        await client.get("/metrics")
        probing = asyncio.ensure_future(client.get("/probe", params={"target": slow.address}))
        await settled(lambda: slow.idle_calls == 2)
        # Act
        write_targets(path, [other.address])
        await client.targets.refresh()
        metrics = await client.get("/metrics")
        probe = await probing
        text = await probe.text()
        await settled(lambda: users(slow.address) == 0)
        # Assert
        assert (metrics.status, probe.status) == (200, 200)
        assert by_worker(text, "wool_worker_idle_seconds") == {slow.address: 6.0}
        assert users(slow.address) == 0

    async def test_probe_prometheus_accept_gets_small_text_body_uncompressed(
        self, exporter, scripted
    ) -> None:
        """Given a configured worker, when /probe is scraped with Prometheus's headers
        (OpenMetrics preferred, gzip), then the answer is the text format 0.0.4 and,
        being short, not compressed."""
        # Arrange
        worker = await scripted(seconds=5.0)
        client = await exporter([worker.address])
        # Act
        response = await client.get(
            "/probe",
            params={"target": worker.address},
            headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"},
            auto_decompress=False,
        )
        text = (await response.read()).decode()
        # Assert
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "Content-Encoding" not in response.headers
        assert by_worker(text, "wool_worker_idle_seconds") == {worker.address: 5.0}

    async def test_probe_only_configured_targets_keep_their_channels(
        self, exporter, scripted
    ) -> None:
        """Given three configured workers, an ad-hoc limit of 1 and no /metrics scrape
        ever, when /probe asks each worker twice in turn, then each worker saw one
        connection (its channel kept, never counted as ad hoc) and all three stay open."""
        # Arrange
        workers = [await scripted(seconds=float(i)) for i in range(3)]
        client = await exporter([w.address for w in workers], adhoc_limit=1)
        # Act
        for _ in range(2):
            for worker in workers:
                await client.get("/probe", params={"target": worker.address})
        # Assert
        assert [w.idle_calls for w in workers] == [2, 2, 2]
        assert [len(set(w.peers)) for w in workers] == [1, 1, 1]
        assert client.prober.connections.open() == {w.address for w in workers}

    async def test_probe_unconfigured_beyond_limit_503_configured_still_served(
        self, exporter, scripted
    ) -> None:
        """Given an ad-hoc limit of 2 and two /probe requests in flight to unconfigured
        hung servers, when a third unconfigured target is probed, then it is answered
        503 at once (never queued, never dialled), while /probe and /metrics of a
        configured worker answer with its value."""
        # Arrange
        hung = [HungServer(), HungServer()]
        for server in hung:
            await server.start()
        third = await scripted(seconds=1.0)
        worker = await scripted(seconds=8.0)
        client = await exporter([worker.address], timeout=2.0, adhoc_limit=2)
        flood = [
            asyncio.ensure_future(client.get("/probe", params={"target": h.address})) for h in hung
        ]
        await settled(lambda: all(h.connections for h in hung))
        # Act
        refused = await client.get("/probe", params={"target": third.address})
        refused_text = await refused.text()
        probe = await (await client.get("/probe", params={"target": worker.address})).text()
        metrics = await (await client.get("/metrics")).text()
        flooded = [await (await f).text() for f in flood]
        for server in hung:
            await server.close()
        # Assert
        assert refused.status == 503
        assert "in flight" in refused_text
        assert third.idle_calls == 0
        assert by_worker(probe, "wool_worker_idle_seconds") == {worker.address: 8.0}
        assert by_worker(metrics, "wool_worker_idle_seconds") == {worker.address: 8.0}
        assert [by_worker(t, "wool_worker_up") for t in flooded] == [{h.address: 0} for h in hung]

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


class TestScrapeBudget:
    @pytest.mark.parametrize(
        ("header", "offset", "budget"),
        [
            (None, 0.5, 5.0),
            ("10", 0.5, 5.0),
            ("3", 0.5, 2.5),
            ("0.5", 0.5, 0.25),
            ("0.2", 0.5, 0.1),
            ("4", 315360000.0, 2.0),
            ("0", 0.5, 5.0),
            ("soon", 0.5, 5.0),
            ("0_2", 0.5, 5.0),
            ("\u0663", 0.5, 5.0),
        ],
    )
    def test_scrape_budget_offset_takes_at_most_half(
        self, header: str | None, offset: float, budget: float
    ) -> None:
        """Given --timeout 5s, an offset and Prometheus's announced scrape timeout, when
        the budget is computed, then it is the timeout less the offset, the offset
        taking at most half of it, capped by --timeout; no usable header (missing, not a
        positive number, or not plain ASCII digits): --timeout."""
        # Arrange
        headers = {} if header is None else {SCRAPE_TIMEOUT_HEADER: header}
        request = make_mocked_request("GET", "/metrics", headers=headers)
        settings = ExporterSettings(timeout=5.0, timeout_offset=offset)
        # Act
        found = scrape_budget(request, settings)
        # Assert
        assert found == pytest.approx(budget)


class TestOwnMetricsEndpoint:
    async def test_own_metrics_without_fan_out(self, exporter, scripted) -> None:
        """Given an exporter with two targets (a worker and a dead address), when
        /metrics/exporter is fetched, then it answers 200 with the exporter's own series
        (its targets, its targets file's state, its probe error counts) and no worker's
        series, nor a fan-out duration (there was none: not a 0), and no worker was
        asked: a /probe-only Prometheus scrapes it to know the exporter is up without
        fanning out over the fleet."""
        # Arrange
        worker = await scripted(seconds=12.0)
        client = await exporter([worker.address, "127.0.0.1:1"])
        # Act
        response = await client.get("/metrics/exporter")
        found = samples(await response.text())
        # Assert
        assert response.status == 200
        assert found[("wool_exporter_targets", frozenset())] == 2
        assert found[("wool_exporter_targets_reload_success", frozenset())] == 1
        assert ("wool_exporter_probe_errors_total", frozenset({("reason", "deadline")})) in found
        assert not [name for name, _ in found if name.startswith("wool_worker_")]
        assert ("wool_exporter_scrape_duration_seconds", frozenset()) not in found
        assert client.prober.last == {}


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

    async def test_landing_probe_link_leads_to_its_target(self, exporter, tmp_path: Path) -> None:
        """Given targets whose addresses hold characters a query treats apart (a unix
        path with a space, &, = and +; an IPv6 zone with %), when their links on the
        landing page are followed, then each probe is of that very target."""
        # Arrange
        addresses = [f"unix:{tmp_path}/a b&c=d+e.sock", "[::1%20]:1"]
        client = await exporter(addresses)
        page = await (await client.get("/")).text()
        # Act
        links = [html.unescape(link) for link in re.findall(r'href="(/probe\?[^"]*)"', page)]
        responses = [await client.get(link) for link in links]
        texts = [await response.text() for response in responses]
        # Assert
        assert [response.status for response in responses] == [200, 200]
        assert [by_worker(text, "wool_worker_up") for text in texts] == [
            {address: 0} for address in addresses
        ]

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


BUDGET = 0.6
"""Seconds each scrape of the property test may spend (the exporter's --timeout)."""
FAULTS = ["undecodable", "huge", "slow", "closing", "unimplemented", "internal", "raising"]


class RaisingConnection(WorkerConnection):
    """A client that fails in itself, as a bug in it would."""

    async def idle_time(self, timeout: float | None = None) -> float:
        raise RuntimeError("a fault in the client")


class Fleet:
    """Servers of every behaviour, started on first need and reused across examples,
    behind one exporter whose targets file each example rewrites."""

    def __init__(self, scripted, tmp_path: Path) -> None:
        self.scripted = scripted
        self.path = tmp_path / "targets.json"
        self.servers: dict[tuple[str, int], object] = {}
        self.raising: set[str] = set()
        self.closing: list[ClosingServer] = []

    async def start(self, aiohttp_client) -> None:
        # grace 0: each example's new workers are not held as new to the file (pool_changed)
        self.targets = TargetSet(path=str(self.path), grace=0.0)
        cache = ConnectionCache(connect=self.connect)
        self.prober = Prober(tls=None, timeout=BUDGET, concurrency=16, connections=cache)
        app = create_app(
            self.targets, self.prober, process_registry(), ExporterSettings(timeout=BUDGET)
        )
        self.client = await aiohttp_client(app)

    def connect(self, address: str, tls: ClientTls | None) -> WorkerConnection:
        kind = RaisingConnection if address in self.raising else WorkerConnection
        return kind(address, tls=tls, options=CHANNEL_OPTIONS)

    async def address(self, behaviour: str, index: int, value: float) -> str:
        """The address of the ``index``-th server behaving as ``behaviour``."""
        server = self.servers.get((behaviour, index))
        if server is None:
            server = self.servers[(behaviour, index)] = await self._start(behaviour)
        if behaviour in ("good", "invalid_value"):
            server.seconds = value
        return server.address

    async def _start(self, behaviour: str) -> object:
        if behaviour == "closing":
            server = ClosingServer()
            await server.start()
            self.closing.append(server)
            return server
        if behaviour == "raising":
            server = await self.scripted(seconds=1.0)
            self.raising.add(server.address)
            return server
        fields = {
            "good": {},
            "invalid_value": {},
            "undecodable": {"reply": UNDECODABLE},
            "huge": {"reply": length_delimited(15, bytes(MAX_REPLY_BYTES + 1024))},
            "slow": {"hang": True},
            "unimplemented": {"with_idle": False},
            "internal": {"code": grpc.StatusCode.INTERNAL},
        }[behaviour]
        return await self.scripted(**fields)

    async def close(self) -> None:
        await self.prober.close()
        for server in self.closing:
            await server.close()


@pytest.fixture
async def fleet(aiohttp_client, scripted, tmp_path: Path) -> AsyncIterator[Fleet]:
    started = Fleet(scripted, tmp_path)
    await started.start(aiohttp_client)
    yield started
    await started.close()


BEHAVIOUR = st.one_of(
    st.tuples(st.just("good"), st.floats(min_value=0.0, max_value=1e12)),
    st.tuples(
        st.just("invalid_value"),
        st.sampled_from([math.nan, math.inf, -math.inf, -1.0, -5e-324]),
    ),
    st.tuples(st.sampled_from(FAULTS), st.just(0.0)),
)


class TestMetricsFanOutProperty:
    @given(drawn=st.lists(BEHAVIOUR, max_size=8))
    @settings(
        max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    async def test_metrics_any_mix_of_faults_gives_the_good_values(
        self, fleet: Fleet, drawn: list[tuple[str, float]]
    ) -> None:
        """Given targets each good, answering an invalid value, undecodable bytes, a
        reply over the message limit, nothing (slow past the budget), a dropped
        connection, UNIMPLEMENTED or INTERNAL, or failing in the client, when /metrics
        and /probe are scraped, then every answer is 200 and arrives (bounded only to
        detect a hang), with exactly the good targets' values as idle series and every
        target's up series."""
        # Arrange
        seen: Counter[str] = Counter()
        addresses, good = [], {}
        for behaviour, value in drawn:
            address = await fleet.address(behaviour, seen[behaviour], value)
            seen[behaviour] += 1
            addresses.append(address)
            if behaviour == "good":
                good[address] = value
        write_targets(fleet.path, addresses)
        await fleet.targets.refresh()
        quick = [a for (b, _), a in zip(drawn, addresses, strict=True) if b != "slow"]
        # Act
        response = await asyncio.wait_for(fleet.client.get("/metrics"), BUDGET + 5)
        text = await response.text()
        probes = await asyncio.wait_for(
            asyncio.gather(*(fleet.client.get("/probe", params={"target": a}) for a in quick)),
            BUDGET + 5,
        )
        probed = [await p.text() for p in probes]
        # Assert
        assert response.status == 200
        assert by_worker(text, "wool_worker_idle_seconds") == good
        assert set(by_worker(text, "wool_worker_up")) == set(addresses)
        assert [p.status for p in probes] == [200] * len(quick)
        for address, body in zip(quick, probed, strict=True):
            expected = {address: good[address]} if address in good else {}
            assert by_worker(body, "wool_worker_idle_seconds") == expected
