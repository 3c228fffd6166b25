"""End to end, ``/probe`` over the exporter's ``/sd`` on one Prometheus: the jobs the
shipped ``prometheus-sd.yml`` gives that mode, a real exporter and worker, and the
shipped alert rules. The exporter being down must be alerted however long it lasts,
including across a Prometheus restart, after which ``/sd`` cannot be read and the
probe job has no target left."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.fleet import ExporterProcess, Fleet
from support.processes import spawn_cli
from support.prometheus import PrometheusServer, shipped_config
from support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "prometheus"
EXPORTER = "127.0.0.1:9478"
NOT_RUN = "wool-idle-autoscaler"
"""The job of prometheus-sd.yml whose target this module does not run."""
LOOKBACK = "3s"
"""Prometheus's lookback (5 minutes by default), short: the samples read before a
restart are gone from queries soon after it."""
FIRING = 'ALERTS{alertname="WoolExporterDown",alertstate="firing"}'


def sd_mode_config(exporter: str) -> dict[str, Any]:
    """The shipped prometheus-sd.yml's jobs, at ``exporter``, every interval one
    second."""
    config = shipped_config(PROMETHEUS_DIR / "prometheus-sd.yml", {EXPORTER: exporter})
    config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    config["scrape_configs"] = [
        job for job in config["scrape_configs"] if job["job_name"] != NOT_RUN
    ]
    for job in config["scrape_configs"]:
        for sd in job.get("http_sd_configs", []):
            sd["refresh_interval"] = "1s"
    return config


def rules_for_test() -> str:
    """The shipped alerts.yml with WoolExporterDown's `for` one second."""
    document = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == "WoolExporterDown":
                rule["for"] = "1s"
    return yaml.safe_dump(document)


def evaluated_after(prometheus: PrometheusServer, moment: float) -> bool:
    """Whether every rule group of ``prometheus`` was last evaluated after ``moment``
    (Unix time; Prometheus answers an RFC 3339 time to the nanosecond)."""
    groups = prometheus.api("rules")["data"]["groups"]
    times = [re.sub(r"(\.\d{6})\d*", r"\1", g["lastEvaluation"]) for g in groups]
    return all(datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() > moment for t in times)


class TestExporterDownInProbeLayout:
    async def test_exporter_down_fires_across_a_prometheus_restart(self, tmp_path: Path) -> None:
        """Given a worker behind the exporter, probed over its /sd by a Prometheus with
        the shipped jobs of that mode and rules, when the exporter stops and Prometheus
        then restarts (it cannot read /sd: its probe job has no target, and the probes'
        last `up 0` leave its queries), then WoolExporterDown still fires once the rules
        are evaluated without them; while the exporter was up it did not."""
        # Arrange
        fleet = Fleet()
        await fleet.start(1)
        exporter = ExporterProcess(fleet.addresses)
        exporter.start()
        prometheus = PrometheusServer(
            tmp_path,
            sd_mode_config(exporter.listen),
            {"alerts.yml": rules_for_test()},
            flags=(f"--query.lookback-delta={LOOKBACK}",),
        )
        probes = 'up{job="wool-idle-sd"}'
        try:
            prometheus.start()
            await until(lambda: prometheus.query(f"{probes} == 1"), bool)
            fired_while_up = []
            for _ in range(12):  # 3 s: `for` is 1s, evaluated every second
                fired_while_up += await asyncio.to_thread(prometheus.query, FIRING)
                await asyncio.sleep(0.25)
            exporter.stop()
            await until(lambda: prometheus.query(FIRING), bool)
            # Act
            prometheus.stop()
            prometheus.start()
            await until(lambda: prometheus.query(probes), lambda found: not found)
            gone = time.time()
            await until(lambda: evaluated_after(prometheus, gone), bool)
            fired = await until(lambda: prometheus.firing("WoolExporterDown"), bool)
        finally:
            prometheus.stop()
            exporter.stop()
            await fleet.close()
        # Assert
        assert fired_while_up == []
        assert fired


class TestStaleSdListInProbeLayout:
    async def test_probe_of_a_worker_gone_from_sd_withholds_idle(self, tmp_path: Path) -> None:
        """Given a worker of pool a in the exporter's targets file, probed over /sd by a
        Prometheus with the shipped jobs of that mode, when the file drops it (its
        record contested or gone, another pool's worker on its port) and Prometheus,
        before its next /sd refresh, probes it again under pool a, then no idle series
        is stored for it: only its up."""
        # Arrange
        fleet = Fleet()
        [worker] = await fleet.start(1)
        path = tmp_path / "targets.json"
        path.write_text(json.dumps([{"targets": [worker], "labels": {"pool": "a"}}]))
        exporter = spawn_cli(["exporter", "--listen", "127.0.0.1:0", "--targets-file", str(path)])
        assert exporter.stdout is not None
        url = exporter.stdout.readline().strip().removesuffix("/metrics")
        config = sd_mode_config(url.removeprefix("http://"))
        for job in config["scrape_configs"]:
            for sd in job.get("http_sd_configs", []):
                sd["refresh_interval"] = "1h"  # never refreshed while the test runs
        prometheus = PrometheusServer(
            tmp_path, config, {}, flags=(f"--query.lookback-delta={LOOKBACK}",)
        )
        idle = f'wool_worker_idle_seconds{{worker="{worker}",pool="a"}}'
        try:
            prometheus.start()
            await until(lambda: prometheus.query(idle), bool)
            # Act
            path.write_text("[]")
            request = urllib.request.Request(f"{url}/-/reload", method="POST")
            await asyncio.to_thread(urllib.request.urlopen, request, timeout=10)
            dropped = time.time()
            probed = f'timestamp(up{{job="wool-idle-sd",instance="{worker}"}}) > {dropped + 0.1}'
            await until(lambda: prometheus.query(probed), bool)
            stored = prometheus.query(idle)
        finally:
            prometheus.stop()
            exporter.terminate()
            exporter.communicate(timeout=30)
            await fleet.close()
        # Assert
        assert stored == []
