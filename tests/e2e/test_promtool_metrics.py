"""Both daemons' live ``/metrics`` pass ``promtool check metrics`` (names, help,
units, types: Prometheus's own lint), with every kind of series present."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request

import pytest
from support.https import wait_ready
from support.processes import spawn_cli

from wool_idle.worker import LocalWorker

pytestmark = pytest.mark.e2e


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def promtool_check_metrics(text: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "Debian's promtool is required (scripts/ensure-prometheus)"
    return subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )


class TestPromtoolCheckMetrics:
    async def test_live_metrics_pass_promtool(self) -> None:
        """Given an exporter over an idle worker and a dead address, and an autoscaler
        (dry run) that has decided on them, when their /metrics are piped into
        promtool check metrics, then it exits 0 and says nothing."""
        # Arrange
        worker = LocalWorker()
        address = await worker.start()
        exporter = spawn_cli(
            ["exporter", "--listen", "127.0.0.1:0", "--target", address, "--target", "127.0.0.1:1"]
        )
        exporter_url = exporter.stdout.readline().strip()
        autoscaler = spawn_cli(
            [
                "autoscaler",
                *("--max-idle", "0.1s", "--metrics-url", exporter_url, "--dry-run"),
                *("--interval", "0.5s", "--listen", "127.0.0.1:0", "--min-workers", "0"),
            ]
        )
        autoscaler_url = autoscaler.stdout.readline().strip()
        try:
            assert wait_ready(autoscaler_url.removesuffix("/metrics"))
            time.sleep(1.5)  # a few cycles: decisions, dry-run stops, blocked workers
            texts = {"exporter": fetch(exporter_url), "autoscaler": fetch(autoscaler_url)}
            # Act
            checks = {name: promtool_check_metrics(text) for name, text in texts.items()}
        finally:
            for process in (exporter, autoscaler):
                process.terminate()
                process.communicate(timeout=30)
            await worker.kill()
        # Assert
        assert "wool_worker_idle_seconds{" in texts["exporter"]
        assert 'wool_autoscaler_stops_total{result="dry_run"}' in texts["autoscaler"]
        for name, check in checks.items():
            assert (name, check.returncode, check.stdout + check.stderr) == (name, 0, "")
