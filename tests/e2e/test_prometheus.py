"""End to end: real workers, the exporter, a real Prometheus with the shipped
alert rules, and the autoscaler retiring through the WoolWorkerIdle alert."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest
import yaml
from support.fleet import ExporterProcess, Fleet
from support.processes import spawn_cli
from support.prometheus import PrometheusServer, free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "dashboards" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "dashboards" / "grafana" / "wool-idle.json"
THRESHOLD = 2.0


def alerts_for_test(threshold: float) -> str:
    """alerts.yml with the idle threshold and `for` made small enough for a test."""
    document = yaml.safe_load(ALERTS.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == "WoolWorkerIdle":
                rule["expr"] = re.sub(r">=\s*\d+(\.\d+)?", f">= {threshold}", rule["expr"])
                assert str(threshold) in rule["expr"]
                rule["for"] = "1s"
    return yaml.safe_dump(document)


def dashboard_queries(threshold: float) -> list[str]:
    """Every PromQL expression in the dashboard, with Grafana's variables filled in."""
    dashboard = json.loads(DASHBOARD.read_text())
    substitutions = {
        "$worker": ".*",
        "$threshold": str(threshold),
        "$__rate_interval": "1m",
        "$__range": "5m",
        "$__interval": "15s",
    }
    exprs = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in substitutions.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, expr
            exprs.append(expr)
    return exprs


@pytest.fixture
async def system(tmp_path: Path):
    """Three workers (one busy), the exporter, Prometheus and the autoscaler."""
    fleet = Fleet()
    addresses = await fleet.start(3)
    busy, idle = addresses[0], addresses[1:]
    await fleet.keep_busy(busy, tmp_path / "gate")
    exporter = ExporterProcess(addresses)
    exporter.start()
    autoscaler_port = free_port()
    prometheus = PrometheusServer(
        tmp_path,
        {
            "global": {
                "scrape_interval": "1s",
                "evaluation_interval": "1s",
                "scrape_timeout": "1s",
            },
            "rule_files": ["alerts.yml"],
            "scrape_configs": [
                {"job_name": "wool-idle", "static_configs": [{"targets": [exporter.listen]}]},
                {
                    "job_name": "wool-idle-autoscaler",
                    "static_configs": [{"targets": [f"127.0.0.1:{autoscaler_port}"]}],
                },
            ],
        },
        {"alerts.yml": alerts_for_test(THRESHOLD)},
    )
    prometheus.start()
    autoscaler = spawn_cli(
        [
            "autoscaler",
            "--prometheus-url",
            prometheus.url,
            "--alert",
            "WoolWorkerIdle",
            "--max-idle",
            f"{THRESHOLD}s",
            "--interval",
            "1s",
            "--min-workers",
            "1",
            "--grace",
            "2s",
            "--listen",
            f"127.0.0.1:{autoscaler_port}",
        ]
    )
    assert autoscaler.stdout is not None and autoscaler.stdout.readline()
    yield fleet, busy, idle, prometheus, autoscaler
    autoscaler.terminate()
    autoscaler.wait(timeout=30)
    prometheus.stop()
    exporter.stop()
    await fleet.close()


class TestEndToEnd:
    async def test_alert_retires_idle_workers_never_busy_one(self, system) -> None:
        """Given two idle workers and one busy worker behind the exporter, Prometheus
        evaluating the shipped alert, and the autoscaler gated on it, when the alert
        fires, then both idle workers are stopped and the busy one never is; the
        dashboard's queries all run and those about workers return series."""
        # Arrange
        fleet, busy, idle, prometheus, _ = system
        saw_firing: set[str] = set()
        # Act
        deadline = time.monotonic() + 90
        while any(fleet.alive(a) for a in idle) and time.monotonic() < deadline:
            saw_firing |= prometheus.firing("WoolWorkerIdle")
            await asyncio.sleep(0.25)
        exits = [await fleet.wait_exit(a, timeout=10) for a in idle]
        await asyncio.sleep(2)  # a few more cycles: the busy worker must survive them
        results = {expr: prometheus.query(expr) for expr in dashboard_queries(THRESHOLD)}
        # Assert
        assert exits == [0, 0]
        assert fleet.alive(busy)
        assert busy not in saw_firing
        assert saw_firing <= set(idle)
        for expr, series in results.items():
            if "wool_worker" in expr:
                assert series, f"no series for {expr}"
        stopped = prometheus.query('wool_autoscaler_stops_total{result="stopped"}')
        assert stopped and float(stopped[0]["value"][1]) == 2
