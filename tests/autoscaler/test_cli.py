"""``wool-idle autoscaler`` as a real process."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request

import pytest
from support.metrics import samples
from support.processes import run_cli, spawn_cli


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
        metrics = urllib.request.urlopen(url, timeout=5).read().decode()
        decisions = json.loads(
            urllib.request.urlopen(url.replace("/metrics", "/decisions"), timeout=5).read()
        )
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
        assert any("result=stopped" in line["message"] for line in log_lines)


BAD_FLAGS = [
    ([], "--max-idle"),
    (["--max-idle", "0"], "--max-idle"),
    (["--max-idle", "-5m"], "--max-idle"),
    (["--max-idle", "soon"], "--max-idle"),
    (["--max-idle", "1m", "--metrics-url", "ftp://x/metrics"], "--metrics-url"),
    (["--max-idle", "1m", "--metrics-url", "not a url"], "--metrics-url"),
    (["--max-idle", "1m", "--prometheus-url", "http://:9090"], "--prometheus-url"),
    (["--max-idle", "1m", "--prometheus-url", "http://h:99999"], "--prometheus-url"),
    (
        ["--max-idle", "1m", "--metrics-url", "http://h/m", "--prometheus-url", "http://h"],
        "--prometheus-url",
    ),
    (["--max-idle", "1m", "--selector", "pool"], "--selector"),
    (["--max-idle", "1m", "--selector", "__name__=x"], "--selector"),
    (["--max-idle", "1m", "--alert", "WoolWorkerIdle"], "--alert"),
    (["--max-idle", "1m", "--wait-count", "0"], "--wait-count"),
    (["--max-idle", "1m", "--min-workers", "-1"], "--min-workers"),
    (["--max-idle", "1m", "--min-workers", "two"], "--min-workers"),
    (["--max-idle", "1m", "--max-stops-per-cycle", "0"], "--max-stops-per-cycle"),
    (["--max-idle", "1m", "--cooldown", "-1s"], "--cooldown"),
    (["--max-idle", "1m", "--grace", "-1"], "--grace"),
    (["--max-idle", "1m", "--interval", "0"], "--interval"),
    (["--max-idle", "1m", "--source-timeout", "x"], "--source-timeout"),
    (["--max-idle", "1m", "--rpc-timeout", "0ms"], "--rpc-timeout"),
    (["--max-idle", "1m", "--max-staleness", "0"], "--max-staleness"),
    (["--max-idle", "1m", "--listen", "nowhere"], "--listen"),
    (["--max-idle", "1m", "--tls-ca", "/nonexistent"], "--tls-ca"),
    (["--max-idle", "1m", "--log-level", "loud"], "--log-level"),
]


class TestAutoscalerCliBadInput:
    @pytest.mark.parametrize(
        ("args", "flag"), BAD_FLAGS, ids=lambda v: " ".join(v) if isinstance(v, list) else v
    )
    def test_bad_flag_exits_2_naming_it(self, args: list[str], flag: str) -> None:
        """Given a bad flag value, when the autoscaler starts, then it exits 2 with one
        line naming the flag, having stopped no one."""
        # Act
        result = run_cli(["autoscaler", *args], timeout=20)
        # Assert
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1
        assert flag in result.stderr

    def test_bad_environment_value(self) -> None:
        """Given WOOL_IDLE_MAX_IDLE=banana, when started, then exit 2 naming --max-idle."""
        # Act
        result = run_cli(["autoscaler", "--once"], env={"WOOL_IDLE_MAX_IDLE": "banana"})
        # Assert
        assert result.returncode == 2 and "--max-idle" in result.stderr
