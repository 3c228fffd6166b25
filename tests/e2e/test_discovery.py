"""End to end: a real ``wool-idle exporter`` process following real wool 0.15.7 pools
through wool's own discovery (``LocalDiscovery``, and ``LanDiscovery`` on loopback),
with no target list: adds and drops are followed, series carry the pool's labels; a
real Prometheus reads the exporter's ``/sd`` (the shipped prometheus-sd.yml's job) and
scrapes ``/probe`` for each worker."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from support.metrics import fetch, samples
from support.processes import spawn_cli
from support.prometheus import PrometheusServer
from support.wool_pools import WoolFleet

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
SHIPPED = Path(__file__).resolve().parents[2] / "dashboards" / "prometheus" / "prometheus-sd.yml"
SD_JOB = "wool-idle-sd"
SHIPPED_EXPORTER = "127.0.0.1:9478"


class DiscoveringExporter:
    """``wool-idle exporter`` following ``specs`` only."""

    def __init__(self, *specs: str, options: tuple[str, ...] = ()) -> None:
        args = ["exporter", "--listen", "127.0.0.1:0", "--wool-discovery.poll-interval", "250ms"]
        for spec in specs:
            args += ["--wool-discovery", spec]
        self.process = spawn_cli([*args, *options])
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("http://"), self.stop()

    def stop(self) -> str:
        """Stop the exporter; return its stderr (its log; empty once stopped)."""
        if self.process.returncode is not None:
            return ""
        self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return err

    async def scrape(self) -> Samples:
        return samples(await asyncio.to_thread(fetch, self.url))

    async def until(self, condition: Callable[[Samples], bool], seconds: float = 30.0) -> Samples:
        """The first scrape for which ``condition`` holds (fails after ``seconds``)."""
        deadline = time.monotonic() + seconds
        while True:
            found = await self.scrape()
            if condition(found):
                return found
            assert time.monotonic() < deadline, f"never true; last scrape: {sorted(found)}"
            await asyncio.sleep(0.2)


def workers(found: Samples, name: str = "wool_worker_up") -> dict[str, dict[str, str]]:
    """The labels of each worker's ``name`` series, by worker."""
    return {dict(labels)["worker"]: dict(labels) for (n, labels), _ in found.items() if n == name}


def tagged(found: Samples, tags: str) -> set[str]:
    """The workers whose idle series has ``wool_tags == tags``."""
    return {
        w
        for w, labels in workers(found, "wool_worker_idle_seconds").items()
        if labels.get("wool_tags") == tags
    }


def uids(found: Samples) -> set[str]:
    """The uids of the workers on the info series."""
    return {labels["uid"] for labels in workers(found, "wool_worker_info").values()}


def own(found: Samples, name: str, discovery: str, **labels: str) -> float | None:
    key = frozenset({("discovery", discovery), *labels.items()})
    return found.get((name, key))


async def cold_pool_comes_and_goes(
    fleet: WoolFleet, exporter: DiscoveringExporter, *, remaining: int
) -> tuple[Samples, Samples]:
    """Start a cold pool of 1 until the exporter serves it, then stop it until the
    exporter serves ``remaining`` workers: the scrapes during and after."""
    cold = await fleet.serve("cold", 1)
    during = await exporter.until(lambda f: len(tagged(f, "cold")) == 1)
    cold.terminate()
    await cold.wait()
    after = await exporter.until(lambda f: len(workers(f)) == remaining)
    return during, after


@pytest.fixture
def exporters() -> Iterator[list[DiscoveringExporter]]:
    started: list[DiscoveringExporter] = []
    yield started
    for exporter in started:
        exporter.stop()


class TestLocalDiscovery:
    async def test_exporter_follows_adds_and_drops_with_labels(self, exporters) -> None:
        """Given a held LocalDiscovery namespace with a hot pool of 2 and an exporter
        told only the namespace, when a cold pool of 1 starts and then stops, then the
        exporter serves the hot workers, then the cold one too, then the hot ones only;
        every series carries wool_namespace and wool_tags, each worker has one info
        series (uid, pid, version 0.15.7, secure false), and the exporter's own series
        say it follows the namespace with that many workers."""
        async with WoolFleet() as fleet:
            # Arrange
            await fleet.hold()
            await fleet.serve("hot", 2)
            exporter = DiscoveringExporter(f"local:{fleet.namespace}")
            exporters.append(exporter)
            spec = f"local:{fleet.namespace}"
            before = await exporter.until(lambda f: len(tagged(f, "hot")) == 2)
            # Act
            during, after = await cold_pool_comes_and_goes(fleet, exporter, remaining=2)
        log = exporter.stop()
        # Assert
        hot = tagged(before, "hot")
        assert set(workers(before)) == hot
        assert set(workers(during)) == hot | tagged(during, "cold")
        assert set(workers(after)) == hot
        for worker, labels in workers(during, "wool_worker_info").items():
            assert labels["wool_namespace"] == fleet.namespace
            assert labels["version"] == "0.15.7" and labels["secure"] == "false"
            assert labels["uid"] and labels["pid"].isdigit()
            assert workers(during)[worker]["wool_tags"] == labels["wool_tags"]
        assert set(workers(during, "wool_worker_info")) == set(workers(during))
        assert own(during, "wool_exporter_discovery_up", spec) == 1
        assert own(during, "wool_exporter_discovery_workers", spec) == 3
        assert own(after, "wool_exporter_discovery_workers", spec) == 2
        assert "Traceback" not in log and exporter.process.returncode == 0

    async def test_namespace_missing_reported_then_followed(self, exporters) -> None:
        """Given an exporter following a namespace nobody holds yet, then it serves,
        with discovery up 0 and namespace_missing counted; when the namespace and a
        pool appear, then it follows them (up 1, the worker's series)."""
        async with WoolFleet() as fleet:
            # Arrange
            spec = f"local:{fleet.namespace}"
            exporter = DiscoveringExporter(spec)
            exporters.append(exporter)
            missing = await exporter.until(
                lambda f: (
                    (
                        own(
                            f,
                            "wool_exporter_discovery_errors_total",
                            spec,
                            reason="namespace_missing",
                        )
                        or 0
                    )
                    >= 2
                )
            )
            # Act
            await fleet.hold()
            await fleet.serve("hot", 1)
            found = await exporter.until(lambda f: len(tagged(f, "hot")) == 1)
        # Assert
        assert own(missing, "wool_exporter_discovery_up", spec) == 0
        assert workers(missing) == {}
        assert own(found, "wool_exporter_discovery_up", spec) == 1

    async def test_holder_restarted_replacement_counted_and_warned(self, exporters) -> None:
        """Given an exporter following a namespace of a holder and a pool of 2, when the
        holder is restarted while the pool keeps serving (attached to the old, now
        unlisted namespace), then the exporter follows the new, empty namespace (up 1,
        0 workers), counts one replacement and the 2 workers orphaned, and logs one
        warning that names the discovery and says to restart the pools left behind."""
        async with WoolFleet() as fleet:
            # Arrange
            spec = f"local:{fleet.namespace}"
            holder = await fleet.hold()
            pool = await fleet.serve("hot", 2)
            exporter = DiscoveringExporter(spec)
            exporters.append(exporter)
            before = await exporter.until(lambda f: len(tagged(f, "hot")) == 2)
            # Act
            holder.terminate()
            await holder.wait()
            await fleet.hold()
            after = await exporter.until(
                lambda f: (
                    own(f, "wool_exporter_discovery_replacements_total", spec) == 1
                    and own(f, "wool_exporter_discovery_workers", spec) == 0
                    and own(f, "wool_exporter_discovery_up", spec) == 1
                )
            )
            serving = pool.returncode is None
        log = exporter.stop()
        # Assert
        assert own(before, "wool_exporter_discovery_replacements_total", spec) == 0
        assert own(before, "wool_exporter_discovery_orphaned_workers", spec) == 0
        assert own(after, "wool_exporter_discovery_orphaned_workers", spec) == 2
        assert workers(after) == {} and serving
        warned = [line for line in log.splitlines() if "created again" in line]
        assert len(warned) == 1
        assert " WARNING " in warned[0] and spec in warned[0] and "restart" in warned[0]

    async def test_holder_and_pool_restarted_orphan_none(self, exporters) -> None:
        """Given an exporter following a namespace of a holder and a pool of 2, when the
        holder is restarted and then the pool (a planned restart: the pool's workers
        published again, under new uids, on the new namespace), then the exporter counts
        one replacement and no orphaned worker once it lists the pool again."""
        async with WoolFleet() as fleet:
            # Arrange
            spec = f"local:{fleet.namespace}"
            holder = await fleet.hold()
            pool = await fleet.serve("hot", 2)
            exporter = DiscoveringExporter(spec)
            exporters.append(exporter)
            before = await exporter.until(lambda f: len(tagged(f, "hot")) == 2)
            # Act
            for process in (holder, pool):  # the holder first: the pool drops nothing
                process.terminate()
                await process.wait()
            await fleet.hold()
            await fleet.serve("hot", 2)
            after = await exporter.until(
                lambda f: (
                    own(f, "wool_exporter_discovery_replacements_total", spec) == 1
                    and len(tagged(f, "hot")) == 2
                    and not uids(f) & uids(before)
                )
            )
        # Assert
        assert own(after, "wool_exporter_discovery_orphaned_workers", spec) == 0


class TestLanDiscovery:
    async def test_exporter_follows_loopback_lan_pool(self, exporters) -> None:
        """Given a LanDiscovery pool of 1 hot worker on loopback only and an exporter
        told only the namespace and the loopback interface, when a cold pool of 1 starts
        and then stops (saying goodbye), then the exporter follows both changes with
        the pool's labels and info series."""
        async with WoolFleet(lan="127.0.0.1") as fleet:
            # Arrange
            await fleet.serve("hot", 1)
            spec = f"lan:{fleet.namespace}"
            exporter = DiscoveringExporter(
                spec, options=("--wool-discovery.lan-interface", "127.0.0.1")
            )
            exporters.append(exporter)
            before = await exporter.until(lambda f: len(tagged(f, "hot")) == 1)
            # Act
            during, after = await cold_pool_comes_and_goes(fleet, exporter, remaining=1)
        # Assert
        assert set(workers(after)) == tagged(before, "hot")
        info = workers(during, "wool_worker_info")
        assert set(info) == set(workers(during))
        assert all(labels["wool_namespace"] == fleet.namespace for labels in info.values())
        assert all(worker.startswith("127.0.0.1:") for worker in info)
        assert own(during, "wool_exporter_discovery_up", spec) == 1


def sd_job(exporter: str) -> dict[str, object]:
    """The shipped /sd job, pointed at ``exporter`` and refreshing every second."""
    config = yaml.safe_load(SHIPPED.read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == SD_JOB)
    job = yaml.safe_load(yaml.safe_dump(job).replace(SHIPPED_EXPORTER, exporter))
    job["http_sd_configs"][0]["refresh_interval"] = "1s"
    assert job["http_sd_configs"][0]["url"] == f"http://{exporter}/sd"
    return job


async def until_queried(prometheus: PrometheusServer, expr: str, count: int) -> list[dict]:
    """The result of ``expr`` once it has ``count`` series; fails after a minute."""
    deadline = time.monotonic() + 60
    while True:
        series = await asyncio.to_thread(prometheus.query, expr)
        if len(series) == count:
            return series
        assert time.monotonic() < deadline, f"{expr}: {series}"
        await asyncio.sleep(0.5)


class TestHttpSd:
    async def test_prometheus_probes_each_discovered_worker(
        self, exporters, tmp_path: Path
    ) -> None:
        """Given a held namespace with a hot pool of 2 and an exporter following it, when
        a real Prometheus runs the shipped /sd job against the exporter, then it
        discovers both workers and scrapes /probe for each: their idle series carry
        instance = the worker, wool_namespace and wool_tags (not renamed exported_*),
        and their info series is there."""
        async with WoolFleet() as fleet:
            # Arrange
            await fleet.hold()
            await fleet.serve("hot", 2)
            exporter = DiscoveringExporter(f"local:{fleet.namespace}")
            exporters.append(exporter)
            hot = tagged(await exporter.until(lambda f: len(tagged(f, "hot")) == 2), "hot")
            listen = exporter.url.removeprefix("http://").removesuffix("/metrics")
            config = {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [sd_job(listen)],
            }
            prometheus = PrometheusServer(tmp_path, config, {})
            # Act
            await asyncio.to_thread(prometheus.start)
            try:
                idle = await until_queried(
                    prometheus, f'wool_worker_idle_seconds{{job="{SD_JOB}"}}', 2
                )
                info = prometheus.query(f'wool_worker_info{{job="{SD_JOB}"}}')
                targets = prometheus.api("targets")["data"]["activeTargets"]
            finally:
                await asyncio.to_thread(prometheus.stop)
        # Assert
        labels = [series["metric"] for series in idle]
        assert {m["instance"] for m in labels} == hot
        assert {m["worker"] for m in labels} == hot
        assert all(m["wool_namespace"] == fleet.namespace for m in labels)
        assert all(m["wool_tags"] == "hot" for m in labels)
        assert not any(name.startswith("exported_") for m in labels for name in m)
        assert {series["metric"]["worker"] for series in info} == hot
        assert {t["labels"]["instance"] for t in targets if t["health"] == "up"} == hot
