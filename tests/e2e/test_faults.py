"""Fault tolerance with real processes: killed workers, a Prometheus restart."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from support.fleet import ExporterProcess, Fleet
from support.metrics import by_worker, samples
from support.processes import spawn_cli
from support.prometheus import PrometheusServer, free_port

pytestmark = pytest.mark.e2e


def scrape(url: str, timeout_header: str | None = None) -> tuple[float, str]:
    request = urllib.request.Request(url)
    if timeout_header:
        request.add_header("X-Prometheus-Scrape-Timeout-Seconds", timeout_header)
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read().decode()
    return time.monotonic() - started, body


class TestFaults:
    async def test_worker_sigkilled_mid_scrape(self) -> None:
        """Given a worker frozen in the middle of a scrape, when it is SIGKILLed while
        the exporter waits on it, then the scrape returns within its budget, the worker
        shows up 0 with no idle series, and the exporter keeps serving the others."""
        # Arrange
        fleet = Fleet()
        victim, survivor = await fleet.start(2)
        exporter = ExporterProcess([victim, survivor])
        exporter.start()
        worker = next(w for w in fleet.workers if w.address == victim)
        assert worker.process is not None
        try:
            os.kill(worker.process.pid, signal.SIGSTOP)
            # Act
            scraping = asyncio.ensure_future(asyncio.to_thread(scrape, exporter.url, "3"))
            await asyncio.sleep(0.5)
            os.kill(worker.process.pid, signal.SIGKILL)
            elapsed, body = await scraping
            _, after = await asyncio.to_thread(scrape, exporter.url, "3")
        finally:
            exporter.stop()
            await fleet.close()
        # Assert
        assert elapsed < 3
        assert by_worker(body, "wool_worker_up")[victim] == 0
        assert victim not in by_worker(body, "wool_worker_idle_seconds")
        assert by_worker(after, "wool_worker_up") == {victim: 0, survivor: 1}
        assert set(by_worker(after, "wool_worker_idle_seconds")) == {survivor}

    async def test_prometheus_restart_under_autoscaler(self, tmp_path: Path) -> None:
        """Given the autoscaler in Prometheus mode over two busy workers, when Prometheus
        stops, the workers go idle past max-idle while it is down, and Prometheus comes
        back on the same address and data, then no worker is stopped while data is
        missing or stale, the autoscaler never crashes, and it retires both workers once
        fresh data arrives, without a restart."""
        # Arrange
        fleet = Fleet()
        addresses = await fleet.start(2)
        for index, address in enumerate(addresses):
            await fleet.keep_busy(address, tmp_path / f"gate{index}")
        exporter = ExporterProcess(addresses)
        exporter.start()
        port = free_port()
        prometheus = PrometheusServer(
            tmp_path,
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {"job_name": "wool-idle", "static_configs": [{"targets": [exporter.listen]}]}
                ],
            },
            {},
        )
        prometheus.start()
        autoscaler = spawn_cli(
            [
                "autoscaler",
                "--prometheus-url",
                prometheus.url,
                "--max-idle",
                "1s",
                "--interval",
                "0.3s",
                "--min-workers",
                "0",
                "--grace",
                "2s",
                "--max-staleness",
                "2s",
                "--source-timeout",
                "2s",
                "--listen",
                f"127.0.0.1:{port}",
            ]
        )
        metrics_url = autoscaler.stdout.readline().strip()
        try:
            await asyncio.sleep(2)
            # Act
            prometheus.stop()
            for gate in fleet.gates:
                gate.touch()
            await asyncio.sleep(4)
            _, while_down = await asyncio.to_thread(scrape, metrics_url)
            alive_while_down = [fleet.alive(a) for a in addresses]
            prometheus.start()
            exits = [await fleet.wait_exit(a, timeout=60) for a in addresses]
            autoscaler_alive = autoscaler.poll() is None
        finally:
            autoscaler.terminate()
            autoscaler.wait(timeout=30)
            prometheus.stop()
            exporter.stop()
            await fleet.close()
        # Assert
        assert alive_while_down == [True, True]
        assert samples(while_down)[("wool_autoscaler_source_up", frozenset())] == 0
        assert exits == [0, 0]
        assert autoscaler_alive
