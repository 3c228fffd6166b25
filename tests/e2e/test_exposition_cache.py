"""End to end: the autoscaler reading a real exporter's ``/metrics`` through a caching
proxy (``--metrics-url``) that serves an answer it has held since before a worker
crashed. The text carries no timestamps; the proxy says how long it has held it in
``Age`` (RFC 9111). The crashed worker must hold no floor."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web
from support.fleet import ExporterProcess, Fleet
from support.processes import run_cli
from support.waiting import eventually_async

from wool_idle.autoscaler.sources import parse_exposition

pytestmark = pytest.mark.e2e

HELD = 120
"""Seconds the proxy says it has held its answer (``Age``)."""


class Cache:
    """A caching proxy to one exporter: the first answer it takes, with the headers it
    came with (``Date`` among them), served on every request with ``Age: HELD``."""

    def __init__(self, exporter: str) -> None:
        self.exporter = exporter
        self.held: tuple[bytes, dict[str, str]] | None = None

    async def take(self) -> list[float]:
        """Take the exporter's answer now; the idle values in it."""
        async with aiohttp.ClientSession() as session, session.get(self.exporter) as response:
            body = await response.read()
            self.held = (body, {k: v for k, v in response.headers.items() if k == "Date"})
        return [r.idle for r in parse_exposition(body.decode()) if r.idle is not None]

    async def answer(self, request: web.Request) -> web.Response:
        assert self.held is not None
        body, headers = self.held
        return web.Response(
            body=body, headers={**headers, "Age": str(HELD)}, content_type="text/plain"
        )


class TestCachedExposition:
    async def test_autoscaler_cached_answer_from_before_a_crash_holds_no_floor(
        self, aiohttp_server
    ) -> None:
        """Given two idle workers (real processes) behind a real exporter, a caching
        proxy holding the exporter's answer from before one of them crashed (Age 120 s,
        more than --max-staleness), and --min-workers 1, when the autoscaler reads the
        proxy once, then nothing it read is fresh: the crashed worker holds no floor and
        the live worker (the longer idle) is not stopped but read stale."""
        # Arrange
        fleet = Fleet()
        (live,) = await fleet.start(1)
        (doomed,) = await fleet.start(1)
        exporter = ExporterProcess([live, doomed])
        cache = Cache(await asyncio.to_thread(exporter.start))
        app = web.Application()
        app.router.add_get("/metrics", cache.answer)
        server = await aiohttp_server(app)
        try:
            while sum(v >= 1.0 for v in await cache.take()) < 2:
                await asyncio.sleep(0.2)
            await next(w for w in fleet.workers if w.address == doomed).kill()
            assert await eventually_async(lambda: not fleet.alive(doomed))
            # Act
            done = await asyncio.to_thread(
                run_cli,
                [
                    *("autoscaler", "--once", "--max-idle", "1s", "--min-workers", "1"),
                    *("--metrics-url", str(server.make_url("/metrics")), "--log.level", "debug"),
                ],
            )
            # Assert
            assert done.returncode == 0, done.stderr
            assert fleet.alive(live), done.stderr
            assert f"worker={live} verdict=stale" in done.stderr
            assert "verdict=stop" not in done.stderr
            assert "answered 120 s old by its Age or Date header" in done.stderr
        finally:
            exporter.stop()
            await fleet.close()
