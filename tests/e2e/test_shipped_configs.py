"""End to end, each shipped Prometheus config loaded as is: a real worker, a real
exporter listing it and a real Prometheus with the file's jobs (its addresses
ours, every interval one second). Each file is one mode, so each worker is read
once: two jobs reading the same worker would make it ``conflicting`` for the
autoscaler, which then stops no one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support.fleet import ExporterProcess, Fleet
from support.prometheus import SHIPPED_WORKER_JOBS, PrometheusServer, shipped_config
from support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "prometheus"
EXPORTER = "127.0.0.1:9478"


def scraped_everywhere(prometheus: PrometheusServer) -> bool:
    """Whether every active target of ``prometheus`` has been scraped at least once
    (the autoscaler's target too: nothing listens there, its scrape fails)."""
    targets = prometheus.api("targets")["data"]["activeTargets"]
    return bool(targets) and all(t["lastScrape"] > "0001-01-01T00:00:00Z" for t in targets)


def one_second_intervals(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with every scrape, evaluation and discovery refresh each second."""
    config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    for job in config["scrape_configs"]:
        job.pop("scrape_timeout", None)
        for sd in job.get("http_sd_configs", []) + job.get("file_sd_configs", []):
            sd["refresh_interval"] = "1s"
    return config


class TestShippedConfigs:
    @pytest.mark.parametrize("name", sorted(SHIPPED_WORKER_JOBS))
    async def test_shipped_config_reads_each_worker_once(self, name: str, tmp_path: Path) -> None:
        """Given a worker, an exporter listing it, and a Prometheus loading the shipped
        config ``name`` as is (its file_sd file listing the worker), when every target
        has been scraped, then exactly one idle series names the worker, from the
        file's worker job."""
        # Arrange
        fleet = Fleet()
        [worker] = await fleet.start(1)
        exporter = ExporterProcess([worker])
        exporter.start()
        config = one_second_intervals(
            shipped_config(PROMETHEUS_DIR / name, {EXPORTER: exporter.listen})
        )
        workers_file = yaml.safe_dump([{"targets": [worker], "labels": {"pool": "default"}}])
        rules = (PROMETHEUS_DIR / "alerts.yml").read_text()
        files = {"alerts.yml": rules, "wool-workers.yml": workers_file}
        prometheus = PrometheusServer(tmp_path, config, files)
        try:
            prometheus.start()
            # Act
            await until(lambda: scraped_everywhere(prometheus), bool)
            await until(lambda: prometheus.query("wool_worker_idle_seconds"), bool)
            series = prometheus.query(f'wool_worker_idle_seconds{{worker="{worker}"}}')
        finally:
            prometheus.stop()
            exporter.stop()
            await fleet.close()
        # Assert
        assert [s["metric"]["job"] for s in series] == [SHIPPED_WORKER_JOBS[name]]
