"""End to end: a worker that crashed between the autoscaler's value query and its
age query, as Prometheus saw it: one real Prometheus committing a slow scrape
(stamped when it began) between the two, or two replicas behind one URL (a
Kubernetes Service over an HA pair), the value query answered by the one that has
not scraped the crash yet. The crashed worker must hold no floor."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from support.fleet import Fleet
from support.instant_vector import healthy, vector
from support.processes import run_cli
from support.prometheus import PrometheusServer
from support.waiting import eventually_async

pytestmark = pytest.mark.e2e

DEAD = "127.0.0.1:9"
"""A worker that crashed: nothing answers at its address."""
ONCE_FLOOR_OF_ONE = (
    *("autoscaler", "--once", "--max-idle", "1s", "--min-workers", "1"),
    *("--log.level", "debug"),
)
"""One cycle, keeping at least one worker alive, every decision logged."""


def exposition(live: str, dead_up: str, dead_supported: str) -> str:
    """An exporter's answer: the worker at ``live`` idle 800 s, the dead one with
    ``dead_up`` and ``dead_supported`` and no idle sample."""
    return (
        f'wool_worker_idle_seconds{{worker="{live}"}} 800\n'
        f'wool_worker_up{{worker="{live}"}} 1\n'
        f'wool_worker_idle_supported{{worker="{live}"}} 1\n'
        f'wool_worker_up{{worker="{DEAD}"}} {dead_up}\n'
        f'wool_worker_idle_supported{{worker="{DEAD}"}} {dead_supported}\n'
    )


class Replicas:
    """One URL over two replicas: the unpinned value query is answered by a replica
    that has not yet scraped the crash (scripted: ``lagging``), every pinned query by
    a real Prometheus that has (``current``)."""

    def __init__(self, current: str, lagging: list[tuple[dict, object]]) -> None:
        self.current, self.lagging = current, lagging

    async def answer(self, request: web.Request) -> web.Response:
        if "time" not in request.query:
            return web.json_response(vector(*self.lagging))
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{self.current}{request.path}", params=request.query) as response,
        ):
            return web.Response(body=await response.read(), content_type="application/json")


async def serve(aiohttp_server, handler) -> str:
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def autoscale_once(url: str) -> subprocess.CompletedProcess[str]:
    """``ONCE_FLOOR_OF_ONE`` reading the Prometheus API at ``url``."""
    return await asyncio.to_thread(run_cli, [*ONCE_FLOOR_OF_ONE, "--prometheus-url", url])


def assert_floor_kept(done: subprocess.CompletedProcess[str], fleet: Fleet, live: str) -> None:
    """The cycle ended well, and the live worker, the last one, was held by the floor."""
    assert done.returncode == 0, done.stderr
    assert fleet.alive(live), done.stderr
    assert f"worker={live} verdict=min_workers" in done.stderr


class TestPrometheusReplicas:
    @pytest.mark.parametrize(
        ("lagging_idle", "lagging_supported"), [("700", "1"), (None, "0")], ids=["idle", "old"]
    )
    async def test_autoscaler_crash_seen_by_one_replica_holds_no_floor(
        self, aiohttp_server, tmp_path: Path, lagging_idle: str | None, lagging_supported: str
    ) -> None:
        """Given a group of two workers and --min-workers 1, one worker idle and one
        just crashed (the replica answering the age query scraped it down: up 0,
        idle_supported 0, no idle sample; the one answering the value query still
        has it up, idle or predating the idle RPC), when the autoscaler runs once,
        then the crashed worker holds no floor: the live worker is not stopped."""
        # Arrange
        fleet = Fleet()
        (live,) = await fleet.start(1)

        async def exporter(request: web.Request) -> web.Response:
            return web.Response(text=exposition(live, "0", "0"))

        target = (await serve(aiohttp_server, exporter)).removeprefix("http://")
        prometheus = PrometheusServer(
            tmp_path,
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [{"job_name": "e", "static_configs": [{"targets": [target]}]}],
            },
            {},
        )
        prometheus.start()
        lagging = [
            *healthy(live, "800", job="e", instance=target),
            ({"__name__": "wool_worker_up", "worker": DEAD, "job": "e", "instance": target}, "1"),
            (
                {
                    "__name__": "wool_worker_idle_supported",
                    "worker": DEAD,
                    "job": "e",
                    "instance": target,
                },
                lagging_supported,
            ),
        ]
        if lagging_idle is not None:
            labels = {"worker": DEAD, "job": "e", "instance": target}
            lagging.append(({"__name__": "wool_worker_idle_seconds", **labels}, lagging_idle))
        try:
            assert await eventually_async(
                lambda: len(prometheus.query("wool_worker_up")) == 2, timeout=30
            )
            url = await serve(aiohttp_server, Replicas(prometheus.url, lagging).answer)
            # Act
            done = await autoscale_once(url)
            # Assert
            assert_floor_kept(done, fleet, live)
        finally:
            prometheus.stop()
            await fleet.close()


class SlowCrashScrape:
    """An exporter that reports ``DEAD`` idle and up until ``crashed``; then each scrape
    of it answers ``DEAD`` with ``after`` (its ``up`` and ``idle_supported``, no idle
    sample) only after ``SCRAPE_DELAY`` (its probe timing out), so Prometheus commits
    that scrape (stamped when it began) well after it began."""

    SCRAPE_DELAY = 1.5

    def __init__(self, live: str, after: tuple[str, str]) -> None:
        self.live, self.after = live, after
        self.crashed = False
        self.scrape_began = asyncio.Event()
        self.scrape_answered = asyncio.Event()

    async def metrics(self, request: web.Request) -> web.Response:
        if not self.crashed:
            alive = f'wool_worker_idle_seconds{{worker="{DEAD}"}} 700\n'
            return web.Response(text=exposition(self.live, "1", "1") + alive)
        self.scrape_began.set()
        await asyncio.sleep(self.SCRAPE_DELAY)
        self.scrape_answered.set()
        return web.Response(text=exposition(self.live, *self.after))


class InBetween:
    """A proxy to one Prometheus that lets the value query through while the crash's
    scrape is under way, and the pinned queries once Prometheus shows that scrape
    (``DEAD``'s idle series ended)."""

    def __init__(self, prometheus: str, exporter: SlowCrashScrape) -> None:
        self.prometheus, self.exporter = prometheus, exporter

    async def answer(self, request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as session:
            if "time" not in request.query:
                await self.exporter.scrape_began.wait()
            else:
                await self.exporter.scrape_answered.wait()
                await self._committed(session)
            url = f"{self.prometheus}{request.path}"
            async with session.get(url, params=request.query) as response:
                body = await response.read()
        return web.Response(body=body, content_type="application/json")

    async def _committed(self, session: aiohttp.ClientSession) -> None:
        query = {"query": f'wool_worker_idle_seconds{{worker="{DEAD}"}}'}
        while True:
            async with session.get(f"{self.prometheus}/api/v1/query", params=query) as response:
                if not (await response.json())["data"]["result"]:
                    return
            await asyncio.sleep(0.05)


class TestOnePrometheus:
    @pytest.mark.parametrize("after", [("0", "0"), ("1", "1")], ids=["down", "no_idle_value"])
    async def test_autoscaler_crash_committed_between_queries_holds_no_floor(
        self, aiohttp_server, tmp_path: Path, after: tuple[str, str]
    ) -> None:
        """Given a group of two workers and --min-workers 1, one idle and one whose
        crash (down, or up with no valid idle value: its idle series ends) is in a
        scrape Prometheus commits after answering the value query but before the age
        query (a scrape is stamped when it begins: a slow one is committed seconds
        later, and the pinned age query then sees it), when the autoscaler runs once,
        then the crashed worker holds no floor: the live worker is not stopped."""
        # Arrange
        fleet = Fleet()
        (live,) = await fleet.start(1)
        exporter = SlowCrashScrape(live, after)
        target = (await serve(aiohttp_server, exporter.metrics)).removeprefix("http://")
        scrape = {"scrape_interval": "3s", "scrape_timeout": "2s"}
        prometheus = PrometheusServer(
            tmp_path,
            {
                "global": scrape,
                "scrape_configs": [{"job_name": "e", "static_configs": [{"targets": [target]}]}],
            },
            {},
        )
        prometheus.start()
        try:
            assert await eventually_async(
                lambda: len(prometheus.query("wool_worker_idle_seconds")) == 2, timeout=30
            )
            exporter.crashed = True
            url = await serve(aiohttp_server, InBetween(prometheus.url, exporter).answer)
            # Act
            done = await autoscale_once(url)
            # Assert
            assert_floor_kept(done, fleet, live)
        finally:
            prometheus.stop()
            await fleet.close()
