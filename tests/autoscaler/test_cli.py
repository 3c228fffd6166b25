"""``wool-idle autoscaler`` as a real process."""

from __future__ import annotations

import asyncio
import json
import signal

from support import unix_http
from support.metrics import fetch, samples
from support.processes import run_cli, spawn_cli

WAIT = 15.0


async def wait_ready(url: str) -> int:
    """Poll the autoscaler's /-/ready until 200 (or WAIT seconds); the last status."""
    deadline = asyncio.get_running_loop().time() + WAIT
    status = 0
    while status != 200 and asyncio.get_running_loop().time() < deadline:
        status, _ = await unix_http.get(url, "/-/ready")
        await asyncio.sleep(0.1)
    return status


class TestAutoscalerCli:
    async def test_once_stops_idle_worker(self, fleet, exporter_process) -> None:
        """Given an idle worker behind an exporter, when `autoscaler --once` runs past
        max-idle with a floor of 0, then it exits 0 and the worker exits 0."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        await asyncio.sleep(0.3)
        # Act
        result = await asyncio.to_thread(
            run_cli,
            [
                "autoscaler",
                "--max-idle",
                "200ms",
                "--metrics-url",
                exporter.url,
                "--min-workers",
                "0",
                "--grace",
                "2s",
                "--once",
            ],
        )
        # Assert
        assert result.returncode == 0, result.stderr
        assert "result=stopped" in result.stderr
        assert await fleet.wait_exit(address) == 0

    def test_once_source_down_exits_1(self) -> None:
        """Given no exporter at the URL, when `--once` runs, then it exits 1 and says so."""
        # Act
        result = run_cli(
            [
                "autoscaler",
                "--max-idle",
                "1s",
                "--metrics-url",
                "http://127.0.0.1:1/metrics",
                "--once",
            ]
        )
        # Assert
        assert result.returncode == 1
        assert "stopping no one" in result.stderr

    async def test_daemon_serves_metrics_and_decisions_and_exits_on_sigterm(
        self, fleet, exporter_process
    ) -> None:
        """Given the daemon running against an idle worker, when its endpoints are read
        and it gets SIGTERM, then /metrics has its series, /decisions has the stop, and
        it exits 0."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        await asyncio.sleep(0.3)
        process = spawn_cli(
            [
                "autoscaler",
                "--max-idle",
                "0.2s",
                "--metrics-url",
                exporter.url,
                "--min-workers",
                "0",
                "--interval",
                "0.2s",
                "--grace",
                "1s",
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ]
        )
        url = process.stdout.readline().strip()
        # Act
        await fleet.wait_exit(address)
        await asyncio.sleep(0.5)
        metrics = fetch(url)
        decisions = json.loads(fetch(url.replace("/metrics", "/decisions")))
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=30)
        log_lines = [json.loads(line) for line in process.stderr.read().splitlines() if line]
        # Assert
        assert (
            samples(metrics)[("wool_autoscaler_stops_total", frozenset({("result", "stopped")}))]
            == 1
        )
        assert any(d["worker"] == address and d["result"] == "stopped" for d in decisions)
        assert status == 0
        assert any(line.get("result") == "stopped" for line in log_lines)

    async def test_ready_once_a_source_read_succeeded(self, fleet, exporter_process) -> None:
        """Given two daemons on Unix sockets, one reading a dead URL and one a live
        exporter, when /-/ready is asked, then the first says 503 (no read succeeded
        yet) and the second becomes 200; both serve their build info on /metrics."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        common = ["autoscaler", "--max-idle", "1h", "--interval", "0.2s"]
        processes = {
            source: spawn_cli(
                [
                    *common,
                    "--metrics-url",
                    source,
                    "--web.listen-address",
                    f"unix:{unix_http.socket_path('autoscaler')}",
                ]
            )
            for source in ("http://127.0.0.1:1/metrics", exporter.url)
        }
        urls = {source: p.stdout.readline().strip() for source, p in processes.items()}
        # Act
        dead = await unix_http.get(urls["http://127.0.0.1:1/metrics"], "/-/ready")
        live = await wait_ready(urls[exporter.url])
        metrics = await unix_http.get(urls[exporter.url], "/metrics")
        for process in processes.values():
            process.terminate()
        statuses = [p.wait(timeout=30) for p in processes.values()]
        # Assert
        assert dead == (503, "no successful read of the source yet\n")
        assert live == 200
        assert any(name == "wool_idle_build_info" for name, _ in samples(metrics[1]))
        assert statuses == [0, 0]
