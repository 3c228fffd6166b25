"""End to end: real workers, the exporter, a real Prometheus with the shipped
alert rules, and the autoscaler retiring through the WoolWorkerIdle alert."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import aiohttp
import pytest
import yaml
from support.fleet import ExporterProcess, Fleet
from support.processes import spawn_cli
from support.prometheus import PrometheusServer, free_port
from support.waiting import eventually_async

from wool_idle.autoscaler.policy import PolicySettings, PolicyState, plan
from wool_idle.autoscaler.sources import PrometheusSource, Selector, parse_exposition
from wool_idle.autoscaler.verdicts import Verdict

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


def rules_with_short_for(alert: str, duration: str) -> tuple[str, str]:
    """alerts.yml with ``alert``'s `for` shortened for a test, and its (shipped) expr."""
    document = yaml.safe_load(ALERTS.read_text())
    rule = next(r for g in document["groups"] for r in g["rules"] if r["alert"] == alert)
    rule["for"] = duration
    return yaml.safe_dump(document), rule["expr"]


def panel_query(title: str) -> str:
    """The dashboard panel's first query, for every worker."""
    panel = next(p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"] == title)
    return str(panel["targets"][0]["expr"]).replace("$worker", ".*")


def scrape_config(**jobs: str) -> dict:
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": ["alerts.yml"],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [target]}]}
            for job, target in jobs.items()
        ],
    }


class TestRetiredIsNotDown:
    async def test_retired_worker_shown_retired_and_not_alerted(self, tmp_path: Path) -> None:
        """Given two idle workers behind the exporter (static targets: both stay
        listed), Prometheus with the shipped rules (WoolWorkerDown's `for` shortened,
        its expression as shipped) scraping the exporter and the autoscaler, when the
        autoscaler retires one worker and the other is killed without retirement, then
        WoolWorkerDown fires for the killed worker and never for the retired one, and
        the dashboard's status shows them down (0) and retired (2)."""
        # Arrange
        fleet = Fleet()
        retiring, killed = await fleet.start(2)
        exporter = ExporterProcess([retiring, killed])
        exporter.start()
        autoscaler_port = free_port()
        rules, expr = rules_with_short_for("WoolWorkerDown", "5s")
        prometheus = PrometheusServer(
            tmp_path,
            scrape_config(
                **{"wool-idle": exporter.listen, "autoscaler": f"127.0.0.1:{autoscaler_port}"}
            ),
            {"alerts.yml": rules},
        )
        prometheus.start()
        autoscaler = spawn_cli(
            [
                "autoscaler",
                "--metrics-url",
                exporter.url,
                "--selector",
                f"worker={retiring}",
                "--max-idle",
                "1s",
                "--min-workers",
                "0",
                "--interval",
                "1s",
                "--grace",
                "1s",
                "--listen",
                f"127.0.0.1:{autoscaler_port}",
            ]
        )
        fired: set[str] = set()
        try:
            assert autoscaler.stdout is not None and autoscaler.stdout.readline()
            await fleet.workers[1].kill()
            # Act
            deadline = time.monotonic() + 90
            while killed not in fired and time.monotonic() < deadline:
                fired |= prometheus.firing("WoolWorkerDown")
                await asyncio.sleep(0.25)
            for _ in range(20):  # 5 s more: the retired worker must never fire
                fired |= prometheus.firing("WoolWorkerDown")
                await asyncio.sleep(0.25)
            status = {
                s["metric"]["worker"]: float(s["value"][1])
                for s in prometheus.query(panel_query("Worker status"))
            }
            up = {
                s["metric"]["worker"]: float(s["value"][1])
                for s in prometheus.query("wool_worker_up")
            }
            exit_code = await fleet.wait_exit(retiring, timeout=10)
        finally:
            autoscaler.terminate()
            autoscaler.wait(timeout=30)
            prometheus.stop()
            exporter.stop()
            await fleet.close()
        # Assert
        assert exit_code == 0
        assert up == {retiring: 0.0, killed: 0.0}
        assert fired == {killed}
        assert status == {retiring: 2.0, killed: 0.0}
        assert "wool_autoscaler_retired_timestamp_seconds" in expr  # the shipped rule


class TestSelectorsAndGroupsInPrometheus:
    async def test_prometheus_selects_and_groups_as_the_exporter_text(self, tmp_path: Path) -> None:
        """Given workers labelled hot, cold or not at all by a targets file, scraped by
        a real Prometheus, when each kind of selector and a group-by are applied by the
        Prometheus source (PromQL matchers) and to the exporter's own text (Python
        matching), then both select the same workers in the same groups."""
        # Arrange
        fleet = Fleet()
        hot, cold, bare = await fleet.start(3)
        targets = [
            {"targets": [hot], "labels": {"wool_tags": "hot", "zone": "eu"}},
            {"targets": [cold], "labels": {"wool_tags": "cold,gpu"}},
            {"targets": [bare], "labels": {}},
        ]
        (tmp_path / "targets.yml").write_text(yaml.safe_dump(targets))
        exporter = spawn_cli(
            ["exporter", "--listen", "127.0.0.1:0", "--targets-file", str(tmp_path / "targets.yml")]
        )
        url = exporter.stdout.readline().strip()
        listen = url.removeprefix("http://").removesuffix("/metrics")
        config = {**scrape_config(**{"wool-idle": listen}), "rule_files": []}
        prometheus = PrometheusServer(tmp_path, config, {})
        selectors = [
            [],
            ["wool_tags=hot"],
            ["wool_tags="],
            ["wool_tags!=hot"],
            ["wool_tags=~h.t|cold"],
            ["wool_tags!~.*o.*"],
            ["wool_tags=~.+", "zone!=eu"],
            ["zone=~(?i)EU"],
            ["wool_tags=~cold\\x2cgpu"],
        ]
        group_by = ("wool_tags", "zone")
        try:
            prometheus.start()
            await eventually_async(lambda: len(prometheus.query("wool_worker_up")) >= 3, 60)
            async with aiohttp.ClientSession() as session:
                # Act
                seen = []
                for texts in selectors:
                    chosen = [Selector.parse(t) for t in texts]
                    source = PrometheusSource(
                        session, prometheus.url, chosen, None, 5.0, group_by, alert_max_age=60.0
                    )
                    from_prometheus = await source.read()
                    async with session.get(url) as response:
                        text = await response.text()
                    from_text = parse_exposition(text, chosen, group_by)
                    seen.append((texts, groups_of(from_prometheus), groups_of(from_text)))
        finally:
            prometheus.stop()
            exporter.terminate()
            exporter.wait(timeout=30)
            await fleet.close()
        # Assert
        for texts, via_promql, via_python in seen:
            assert via_promql == via_python, texts
        assert seen[0][1] == {hot: ("hot", "eu"), cold: ("cold,gpu", ""), bare: ("", "")}
        assert set(seen[4][1]) == {hot} and set(seen[5][1]) == {bare}
        assert set(seen[8][1]) == {cold}

    async def test_prometheus_worker_of_two_pools_selected_in_one_conflicts(
        self, tmp_path: Path
    ) -> None:
        """Given a worker listed in pool a by one exporter and in pool b by another
        (pool b's only worker), beside a worker only in pool a, both exporters scraped
        by a real Prometheus, when the autoscaler of pool a reads with --selector
        pool=a and group-by pool and plans with a floor of 1, then the shared worker
        is conflicting and the other held by the floor (the selector hid pool b's
        series: the shared worker held pool a's floor, and one of the two was
        stopped, the shared one when longer idle, emptying pool b)."""
        # Arrange
        fleet = Fleet()
        shared, own = await fleet.start(2)
        exporters = []
        for pool, workers in (("a", [shared, own]), ("b", [shared])):
            (tmp_path / f"{pool}.yml").write_text(
                yaml.safe_dump([{"targets": workers, "labels": {"pool": pool}}])
            )
            targets_file = str(tmp_path / f"{pool}.yml")
            exporters.append(
                spawn_cli(["exporter", "--listen", "127.0.0.1:0", "--targets-file", targets_file])
            )
        listens = [e.stdout.readline().strip().removeprefix("http://") for e in exporters]
        jobs = {p: listen.removesuffix("/metrics") for p, listen in zip("ab", listens, strict=True)}
        prometheus = PrometheusServer(tmp_path, {**scrape_config(**jobs), "rule_files": []}, {})
        settings = PolicySettings(max_idle=0.001, min_workers=1, group_by=("pool",))
        try:
            prometheus.start()
            # each worker probed up by its exporters in their latest scrapes (a probe past
            # the 0.5 s budget of a 1 s scrape_timeout reads it down: no floor held)
            assert await eventually_async(
                lambda: len(prometheus.query("wool_worker_up == 1")) >= 3, 60
            )
            async with aiohttp.ClientSession() as session:
                source = PrometheusSource(
                    session,
                    prometheus.url,
                    [Selector.parse("pool=a")],
                    None,
                    5.0,
                    settings.group_by,
                    alert_max_age=60.0,
                )
                # Act
                readings = await source.read()
        finally:
            prometheus.stop()
            for exporter in exporters:
                exporter.terminate()
                exporter.wait(timeout=30)
            await fleet.close()
        decided = plan(readings, PolicyState(), settings, time.monotonic())
        # Assert
        assert {d.worker: d.verdict for d in decided.decisions} == {
            shared: Verdict.CONFLICTING,
            own: Verdict.MIN_WORKERS,
        }

    async def test_prometheus_unsupported_worker_read_fresh(self, tmp_path: Path, scripted) -> None:
        """Given a worker that predates the idle RPC (it answers UNIMPLEMENTED) beside
        an idle one, both scraped through the exporter by a real Prometheus, when the
        Prometheus source reads them, then the old worker's reading carries the
        fresh age of its `idle_supported` sample, so the plan knows it `unsupported`
        (alive) rather than `stale` (unknown): an old answer never holds the floor."""
        # Arrange
        fleet = Fleet()
        (idle,) = await fleet.start(1)
        old = await scripted(with_idle=False)
        targets = [{"targets": [idle, old.address], "labels": {}}]
        (tmp_path / "targets.yml").write_text(yaml.safe_dump(targets))
        exporter = spawn_cli(
            ["exporter", "--listen", "127.0.0.1:0", "--targets-file", str(tmp_path / "targets.yml")]
        )
        url = exporter.stdout.readline().strip()
        listen = url.removeprefix("http://").removesuffix("/metrics")
        prometheus = PrometheusServer(
            tmp_path, {**scrape_config(**{"wool-idle": listen}), "rule_files": []}, {}
        )
        try:
            prometheus.start()
            await eventually_async(lambda: len(prometheus.query("wool_worker_up")) >= 2, 60)
            async with aiohttp.ClientSession() as session:
                # Act
                source = PrometheusSource(
                    session, prometheus.url, [], None, 5.0, alert_max_age=60.0
                )
                readings = {r.worker: r for r in await source.read()}
        finally:
            prometheus.stop()
            exporter.terminate()
            exporter.wait(timeout=30)
            await fleet.close()
        rule = PolicySettings(max_idle=3600.0, min_workers=0)
        decisions = plan(list(readings.values()), PolicyState(), rule, 0.0).decisions
        # Assert
        assert not readings[old.address].supported
        assert 0 <= readings[old.address].age <= rule.max_staleness
        assert {d.worker: d.verdict for d in decisions} == {
            idle: Verdict.BUSY,
            old.address: Verdict.UNSUPPORTED,
        }


def groups_of(readings: list) -> dict[str, tuple[str, ...]]:
    return {r.worker: r.group for r in readings}
