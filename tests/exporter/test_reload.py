"""``POST /-/reload``: re-read the targets file over HTTP, as SIGHUP does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler
from support.waiting import eventually_async
from support.web_reload import BOB, HASHES, NEVER, ask, web_config

from wool_idle.exporter.app import ExporterSettings, create_app
from wool_idle.exporter.connections import ConnectionCache
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.reload import targets_reloads
from wool_idle.exporter.targets import TargetSet
from wool_idle.web.followed_files import followed_files
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.metrics import process_registry
from wool_idle.web.site import serve_app


def write_targets(path: Path, addresses: list[str]) -> None:
    """Replace the targets file at once, as an operator's tool should: a re-read in
    flight sees the old file or the new one, never a half-written one."""
    staged = path.with_suffix(".new")
    staged.write_text(json.dumps([{"targets": addresses}]))
    staged.replace(path)


class TestReloadHandler:
    async def test_reload_picks_up_the_file(self, exporter, tmp_path: Path) -> None:
        """Given a targets file changed after start, when POST /-/reload, then 200 and
        the new targets are scraped."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        client = await exporter(path=str(path))
        write_targets(path, ["127.0.0.1:1", "127.0.0.1:2"])
        # Act
        response = await client.post("/-/reload")
        # Assert
        assert response.status == 200
        assert [t.address for t in client.targets.all()] == ["127.0.0.1:1", "127.0.0.1:2"]

    async def test_reload_bad_file_500_keeps_targets(self, exporter, tmp_path: Path) -> None:
        """Given a targets file broken after start, when POST /-/reload, then 500 with
        the reason, and the last good targets stay."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        client = await exporter(path=str(path))
        path.write_text('[{"targets": ["no port"]}]')
        # Act
        response = await client.post("/-/reload")
        text = await response.text()
        # Assert
        assert response.status == 500
        assert text.startswith("failed to reload: ") and "no port" in text
        assert [t.address for t in client.targets.all()] == ["127.0.0.1:1"]

    async def test_reload_only_post(self, exporter, tmp_path: Path) -> None:
        """Given the exporter, when GET /-/reload, then 405 and nothing is re-read."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        client = await exporter(path=str(path))
        write_targets(path, ["127.0.0.1:2"])
        # Act
        response = await client.get("/-/reload")
        # Assert
        assert response.status == 405
        assert [t.address for t in client.targets.all()] == ["127.0.0.1:1"]

    async def test_reload_burst_of_posts_costs_at_most_two_reads(
        self, exporter, tmp_path: Path, caplog
    ) -> None:
        """Given a targets file, when 20 POST /-/reload ask for a re-read at once (held
        until all have arrived: one that arrived after a re-read ended would ask for
        another), then all get 200 and the file is parsed at most twice (one re-read
        running, one pending shared by the rest), the last one seeing the file as it
        was when they arrived."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        arrived: list[str] = []
        let_go = asyncio.Event()

        @web.middleware
        async def held(request: web.Request, handler: Handler) -> web.StreamResponse:
            arrived.append(request.path)
            await let_go.wait()
            return await handler(request)

        client = await exporter(path=str(path), middlewares=[held])
        write_targets(path, ["127.0.0.1:3"])
        caplog.set_level(logging.INFO, logger="wool_idle.exporter.targets")
        # Act
        burst = asyncio.gather(*(client.post("/-/reload") for _ in range(20)))
        assert await eventually_async(lambda: len(arrived) == 20, 60)
        let_go.set()
        responses = await burst
        # Assert
        assert [r.status for r in responses] == [200] * 20
        loads = [r for r in caplog.records if "loaded" in r.getMessage()]
        assert 1 <= len(loads) <= 2
        assert [t.address for t in client.targets.all()] == ["127.0.0.1:3"]


@dataclass
class Served:
    """An exporter over HTTPS behind a followed web config: its URL, targets and files."""

    url: str
    targets: TargetSet
    targets_path: Path
    web_path: Path


@contextlib.asynccontextmanager
async def served(tmp_path: Path, tls_material) -> AsyncIterator[Served]:
    """An exporter whose targets file (one target) and web config (user alice) are
    followed, looked at again only in an hour: what changes, ``POST /-/reload`` changed."""
    targets_path, web_path = tmp_path / "targets.json", web_config(tmp_path, tls_material, "alice")
    write_targets(targets_path, ["127.0.0.1:1"])
    targets = TargetSet(path=str(targets_path))
    targets.reload(force=True)
    web = LiveWebConfig.load(str(web_path), interval=NEVER)
    prober = Prober(tls=None, timeout=1.0, concurrency=4, connections=ConnectionCache())
    reloads = targets_reloads(targets, followed_files(web, None, None))
    app = create_app(targets, prober, process_registry(), ExporterSettings(), reloads)
    try:
        async with serve_app(app, "127.0.0.1:0", web) as url:
            yield Served(url, targets, targets_path, web_path)
    finally:
        await reloads.close()


class TestReloadFollowedFiles:
    async def test_post_takes_the_targets_and_a_new_web_config_user_at_once(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given an exporter over HTTPS whose targets file gains a target and whose web
        config gains user bob, when alice POSTs /-/reload, then 200, the new target is
        scraped and bob is let in (the reload read the targets file only: bob waited
        for the next look)."""
        # Arrange
        async with served(tmp_path, tls_material) as exporter:
            write_targets(exporter.targets_path, ["127.0.0.1:1", "127.0.0.1:2"])
            web_config(tmp_path, tls_material, "alice", "bob")
            before, _ = await ask(f"{exporter.url}/-/healthy", tls_material, auth=BOB)
            # Act
            reloaded = await ask(f"{exporter.url}/-/reload", tls_material, "POST")
            after, _ = await ask(f"{exporter.url}/-/healthy", tls_material, auth=BOB)
        # Assert
        assert (before, reloaded, after) == (401, (200, "OK\n"), 200)
        assert [t.address for t in exporter.targets.all()] == ["127.0.0.1:1", "127.0.0.1:2"]

    async def test_post_broken_web_config_names_it_and_still_takes_the_targets(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given an exporter whose targets file changed and whose web config broke,
        when POST /-/reload, then 500 naming the web config, the new targets taken and
        the web config in force kept (alice still served)."""
        # Arrange
        async with served(tmp_path, tls_material) as exporter:
            write_targets(exporter.targets_path, ["127.0.0.1:2"])
            text = exporter.web_path.read_text()
            exporter.web_path.write_text(text.replace(HASHES["alice"], "not-a-hash"))
            # Act
            status, answer = await ask(f"{exporter.url}/-/reload", tls_material, "POST")
            kept, _ = await ask(f"{exporter.url}/-/healthy", tls_material)
        # Assert
        assert status == 500
        assert answer.startswith(f"failed to reload: web config {exporter.web_path}: ")
        assert kept == 200
        assert [t.address for t in exporter.targets.all()] == ["127.0.0.1:2"]


class TestTargetsReloads:
    async def test_request_while_one_runs_shares_one_pending(self, tmp_path: Path, caplog) -> None:
        """Given a forced re-read requested, when 50 more are requested right after
        (a SIGHUP storm) and the file changes meanwhile, then exactly two re-reads run,
        every request's answer is that it loaded, and the targets are the file's latest."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        targets = TargetSet(path=str(path))
        targets.reload(force=True)
        reloads = targets_reloads(targets)
        caplog.set_level(logging.INFO, logger="wool_idle.exporter.targets")
        caplog.clear()  # the load above is logged too when an earlier test left INFO on
        # Act
        first = reloads.request()
        await asyncio.sleep(0)
        write_targets(path, ["127.0.0.1:2"])
        storm = [reloads.request() for _ in range(50)]
        answers = await asyncio.gather(first, *storm)
        # Assert
        loads = [r for r in caplog.records if "loaded" in r.getMessage()]
        assert len(loads) == 2
        assert answers == [""] * 51
        assert [t.address for t in targets.all()] == ["127.0.0.1:2"]

    async def test_close_cancels_running_and_pending(self, tmp_path: Path) -> None:
        """Given a re-read running and one pending, when closed (shutdown), then both
        requests end cancelled, and so does a new request at once: none starts (a
        POST /-/reload after it would start a re-read that may stall, holding the
        server's close)."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        targets = TargetSet(path=str(path))
        reloads = targets_reloads(targets)
        running = reloads.request()
        await asyncio.sleep(0)
        pending = reloads.request()
        # Act
        await reloads.close()
        after = reloads.request()
        # Assert
        assert (running.cancelled(), pending.cancelled(), after.cancelled()) == (True, True, True)
