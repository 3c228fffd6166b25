"""End to end, scaled out on Prometheus: real worker processes, one exporter, two
shard Prometheus servers that scrape the workers in ``/probe`` mode over the
exporter's ``/sd`` and split them with ``hashmod`` (the shipped
``dashboards/prometheus/sharded`` configs), a global Prometheus federating both and
evaluating the shipped alert rules, and the autoscaler reading the global one."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import tasks
from support.fleet import ExporterProcess, Fleet
from support.metrics import fetch, samples
from support.processes import spawn_cli
from support.prometheus import PrometheusServer, free_port, hashmod, shipped_config
from support.waiting import until

from wool_idle.worker import WorkerConnection

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "dashboards" / "prometheus"
SHARDED = PROMETHEUS_DIR / "sharded"
SHARDS = 2
EXPORTER = "wool-idle-exporter:9478"
SHARD_SERVERS = tuple(f"prometheus-shard-{index}:9090" for index in range(SHARDS))
AUTOSCALER = "wool-idle-autoscaler:9479"
THRESHOLD = 2.0
FAST = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}


def rules_for_test() -> str:
    """The shipped alerts.yml with WoolWorkerIdle's threshold at ``THRESHOLD`` seconds
    (the number in its expression, nothing else) and the `for` of WoolWorkerIdle,
    WoolWorkerDown and WoolExporterDown shortened; every other part of every
    expression as shipped."""
    document = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())
    rules = {rule["alert"]: rule for group in document["groups"] for rule in group["rules"]}
    idle = rules["WoolWorkerIdle"]
    idle["expr"], replaced = re.subn(r">=\s*\d+(\.\d+)?", f">= {THRESHOLD}", idle["expr"])
    assert replaced == 1, idle["expr"]
    idle["for"], rules["WoolWorkerDown"]["for"] = "1s", "2s"
    rules["WoolExporterDown"]["for"] = rules["WoolFederationDown"]["for"] = "2s"
    return yaml.safe_dump(document)


def fast(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` scraping, evaluating and refreshing its service discovery every second."""
    config["global"].update(FAST)
    for job in config["scrape_configs"]:
        for sd in job.get("http_sd_configs", []):
            sd["refresh_interval"] = "1s"
    return config


def predicted_split(addresses: list[str]) -> list[set[str]]:
    """The workers each shard keeps, as the shards' hashmod relabelling will decide."""
    split: list[set[str]] = [set() for _ in range(SHARDS)]
    for address in addresses:
        split[hashmod(address, SHARDS)].add(address)
    return split


def by_worker(prometheus: PrometheusServer, expr: str) -> dict[str, dict[str, str]]:
    """The labels of each series of ``expr``, by its ``worker`` label."""
    return {s["metric"]["worker"]: s["metric"] for s in prometheus.query(expr)}


def halves(shards: list[PrometheusServer]) -> list[set[str]]:
    """The workers each shard has scraped (its ``wool_worker_up`` series)."""
    return [set(by_worker(shard, "wool_worker_up")) for shard in shards]


@pytest.fixture
async def cleanup() -> AsyncIterator[contextlib.AsyncExitStack]:
    async with contextlib.AsyncExitStack() as stack:
        yield stack


async def start_fleet(cleanup: contextlib.AsyncExitStack, per_shard: int = 2) -> Fleet:
    """Worker processes, as many as it takes for each shard to get at least
    ``per_shard`` (two: one to keep busy, the others idle): three per shard to begin
    with, one more at a time."""
    fleet = Fleet()
    cleanup.push_async_callback(fleet.close)
    await fleet.start(3 * per_shard)
    while min(len(shard) for shard in predicted_split(fleet.addresses)) < per_shard:
        assert len(fleet.addresses) < 12 * per_shard, "hashmod keeps putting workers on one shard"
        await fleet.start(1)
    return fleet


async def start_shards(
    cleanup: contextlib.AsyncExitStack, tmp_path: Path, exporter: str
) -> list[PrometheusServer]:
    """The two shard servers of the shipped configs, reading ``exporter``'s /sd."""
    shards = []
    for index in range(SHARDS):
        directory = tmp_path / f"shard-{index}"
        directory.mkdir()
        config = shipped_config(SHARDED / f"shard-{index}.yml", {EXPORTER: exporter})
        shards.append(PrometheusServer(directory, fast(config), {}))
        cleanup.callback(shards[-1].stop)
    await asyncio.gather(*(asyncio.to_thread(shard.start) for shard in shards))
    return shards


async def start_global(
    cleanup: contextlib.AsyncExitStack,
    tmp_path: Path,
    shards: list[PrometheusServer],
    port: int,
    exporter: str,
) -> PrometheusServer:
    """The global server of the shipped config: federating ``shards``, scraping the
    autoscaler at ``port`` and the ``exporter``'s own series, evaluating
    ``rules_for_test``."""
    addresses = dict(zip(SHARD_SERVERS, (f"127.0.0.1:{s.port}" for s in shards), strict=True))
    own = {AUTOSCALER: f"127.0.0.1:{port}", EXPORTER: exporter}
    config = shipped_config(SHARDED / "global.yml", {**addresses, **own})
    assert config["rule_files"] == ["../alerts.yml"]
    config["rule_files"] = ["alerts.yml"]
    directory = tmp_path / "global"
    directory.mkdir()
    server = PrometheusServer(directory, fast(config), {"alerts.yml": rules_for_test()})
    cleanup.callback(server.stop)
    await asyncio.to_thread(server.start)
    return server


def start_autoscaler(
    cleanup: contextlib.AsyncExitStack, prometheus: PrometheusServer, port: int
) -> None:
    """``wool-idle autoscaler`` reading the global server, gated on WoolWorkerIdle."""
    args = ["autoscaler", "--prometheus-url", prometheus.url, "--alert", "WoolWorkerIdle"]
    args += ["--max-idle", f"{THRESHOLD}s", "--interval", "1s", "--min-workers", "1"]
    args += ["--grace", "2s", "--listen", f"127.0.0.1:{port}"]
    process = spawn_cli(args)

    def stop() -> None:
        process.terminate()
        process.communicate(timeout=30)

    cleanup.callback(stop)
    assert process.stdout is not None and process.stdout.readline(), "the autoscaler did not start"


class TestShardedFleet:
    async def test_global_alert_retires_idle_workers_of_both_shards_never_busy_ones(
        self, tmp_path: Path, cleanup: contextlib.AsyncExitStack
    ) -> None:
        """Given worker processes behind one exporter, two shard Prometheus servers
        splitting them by hashmod over the exporter's /sd (one busy worker on each
        shard, the others idle), and a global Prometheus federating both with the
        shipped alert rules, when the autoscaler reads the global server gated on
        WoolWorkerIdle, then the idle workers of both shards are stopped and exit, the
        busy ones keep serving and finish their tasks, the shards' halves are both
        non-empty, disjoint and cover the fleet, the global server labels each worker
        with its shard, WoolWorkerIdle resolves there for the retired workers and
        WoolWorkerDown never fires for them."""
        # Arrange
        fleet = await start_fleet(cleanup)
        exporter = ExporterProcess(fleet.addresses)
        exporter.start()
        cleanup.callback(exporter.stop)
        shards = await start_shards(cleanup, tmp_path, exporter.listen)
        all_workers = set(fleet.addresses)
        split = await until(lambda: halves(shards), lambda h: set().union(*h) == all_workers)
        busy = [min(half) for half in split]
        for index, address in enumerate(busy):
            await fleet.keep_busy(address, tmp_path / f"gate-{index}")
        busy_now = " or ".join(f'wool_worker_idle_seconds{{worker="{a}"}} == 0' for a in busy)
        await until(lambda: [by_worker(s, busy_now) for s in shards], lambda f: all(f))
        idle = set(fleet.addresses) - set(busy)
        autoscaler_port = free_port()
        prometheus = await start_global(cleanup, tmp_path, shards, autoscaler_port, exporter.listen)
        start_autoscaler(cleanup, prometheus, autoscaler_port)
        fired: set[str] = set()
        down: set[str] = set()

        def watch() -> set[str]:
            """The workers for which WoolWorkerIdle fires now (noting every firing)."""
            firing = prometheus.firing("WoolWorkerIdle")
            fired.update(firing)
            down.update(prometheus.firing("WoolWorkerDown"))
            return firing

        # Act
        deadline = time.monotonic() + 90
        while any(fleet.alive(a) for a in idle) and time.monotonic() < deadline:
            await asyncio.to_thread(watch)
            await asyncio.sleep(0.25)
        exits = {a: await fleet.wait_exit(a, timeout=10) for a in idle}
        still_firing = await until(watch, lambda firing: not firing, seconds=30)
        for _ in range(12):  # 3 s more: WoolWorkerDown (`for` 2s) must not fire for them
            await asyncio.to_thread(watch)
            await asyncio.sleep(0.25)
        shard_of = {w: m["shard"] for w, m in by_worker(prometheus, "wool_worker_up").items()}
        retired = by_worker(prometheus, "wool_autoscaler_retired_timestamp_seconds")
        alive = {a: fleet.alive(a) for a in busy}
        for gate in fleet.gates:
            gate.touch()
        outcomes = await asyncio.wait_for(asyncio.gather(*fleet.running), 30)
        echoes = []
        for address in busy:
            async with WorkerConnection(address) as connection:
                echoes.append(await connection.dispatch(tasks.echo, address))
        autoscaler = samples(fetch(f"http://127.0.0.1:{autoscaler_port}/metrics"))
        # Assert
        assert all(split) and not set.intersection(*split)
        assert split == predicted_split(fleet.addresses)
        assert all(half & idle for half in split)
        assert exits == dict.fromkeys(idle, 0)
        assert alive == dict.fromkeys(busy, True)
        assert outcomes == ["ok"] * SHARDS and echoes == busy
        assert fired <= idle and still_firing == set()
        assert down == set()
        assert set(retired) == idle
        assert shard_of == {w: str(i) for i, half in enumerate(split) for w in half}
        stopped = autoscaler[("wool_autoscaler_stops_total", frozenset({("result", "stopped")}))]
        assert stopped == len(idle)

    async def test_exporter_or_shard_down_fires_a_down_worker_does_not(
        self, tmp_path: Path, cleanup: contextlib.AsyncExitStack
    ) -> None:
        """Given worker processes behind one exporter, the two shard servers probing
        them over its /sd and the global server federating both with the shipped
        rules, when one worker is killed, then WoolExporterDown does not fire (that
        worker's probe still answers); when the exporter then stops, then it fires on
        the global server once for each shard, naming the shard and the probe job, and
        once for the exporter's own series (job wool-idle-exporter);
        when shard 0 then stops, then WoolFederationDown fires for it alone."""
        # Arrange
        fleet = await start_fleet(cleanup, per_shard=1)
        exporter = ExporterProcess(fleet.addresses)
        exporter.start()
        cleanup.callback(exporter.stop)
        shards = await start_shards(cleanup, tmp_path, exporter.listen)
        prometheus = await start_global(cleanup, tmp_path, shards, free_port(), exporter.listen)
        victim = fleet.addresses[0]
        await fleet.workers[0].kill()
        down = f'wool_worker_up{{worker="{victim}"}} == 0'
        await until(lambda: by_worker(prometheus, down), lambda found: victim in found)
        firing = 'ALERTS{alertname="WoolExporterDown",alertstate="firing"}'
        fired_early = []
        for _ in range(16):  # 4 s: `for` is 2s, evaluated every second
            fired_early += await asyncio.to_thread(prometheus.query, firing)
            await asyncio.sleep(0.25)
        # Act
        exporter.stop()
        fired = await until(lambda: prometheus.query(firing), lambda alerts: len(alerts) > SHARDS)
        shards[0].stop()
        federation = 'ALERTS{alertname="WoolFederationDown",alertstate="firing"}'
        lost = await until(lambda: prometheus.query(federation), bool)
        # Assert
        assert fired_early == []
        assert sorted((a["metric"].get("shard", ""), a["metric"]["job"]) for a in fired) == [
            ("", "wool-idle-exporter"),
            *((str(index), "wool-idle-sd") for index in range(SHARDS)),
        ]
        assert [a["metric"]["instance"] for a in lost] == [f"127.0.0.1:{shards[0].port}"]
