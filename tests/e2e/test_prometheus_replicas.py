"""End to end: the autoscaler reading two Prometheus replicas behind one URL (a
Kubernetes Service over an HA pair), whose data differ by up to a scrape: the
value query answered by one, the age query by the other."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from support.fleet import Fleet
from support.instant_vector import vector
from support.processes import run_cli
from support.prometheus import PrometheusServer
from support.waiting import eventually_async

pytestmark = pytest.mark.e2e

DEAD = "127.0.0.1:9"
"""A worker that crashed: nothing answers at its address."""


def exposition(idle: str, dead_up: str, dead_supported: str) -> str:
    """An exporter's answer: the live worker ``idle`` (idle 800 s), the dead one with
    ``dead_up`` and ``dead_supported`` and no idle sample."""
    return (
        f'wool_worker_idle_seconds{{worker="{idle}"}} 800\n'
        f'wool_worker_up{{worker="{idle}"}} 1\n'
        f'wool_worker_idle_supported{{worker="{idle}"}} 1\n'
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
        (idle,) = await fleet.start(1)

        async def exporter(request: web.Request) -> web.Response:
            return web.Response(text=exposition(idle, "0", "0"))

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
        dead = {"worker": DEAD, "job": "e", "instance": target}
        live = {"worker": idle, "job": "e", "instance": target}
        lagging = [
            ({"__name__": "wool_worker_up", **dead}, "1"),
            ({"__name__": "wool_worker_idle_supported", **dead}, lagging_supported),
            *(
                [({"__name__": "wool_worker_idle_seconds", **dead}, lagging_idle)]
                * bool(lagging_idle)
            ),
            ({"__name__": "wool_worker_idle_seconds", **live}, "800"),
            ({"__name__": "wool_worker_up", **live}, "1"),
            ({"__name__": "wool_worker_idle_supported", **live}, "1"),
        ]
        try:
            assert await eventually_async(
                lambda: len(prometheus.query("wool_worker_up")) == 2, timeout=30
            )
            url = await serve(aiohttp_server, Replicas(prometheus.url, lagging).answer)
            # Act
            done = await asyncio.to_thread(
                run_cli,
                [
                    "autoscaler",
                    "--prometheus-url",
                    url,
                    "--max-idle",
                    "1s",
                    "--min-workers",
                    "1",
                    "--once",
                    "--log.level",
                    "debug",
                ],
            )
            # Assert
            assert done.returncode == 0, done.stderr
            assert fleet.alive(idle), done.stderr
            assert f"worker={idle} verdict=min_workers" in done.stderr
        finally:
            prometheus.stop()
            await fleet.close()
