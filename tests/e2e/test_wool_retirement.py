"""End to end with real wool 0.15.7 pools: the autoscaler keeps every pool alive,
publishes the drop of the worker it stopped, and wool clients stop routing to it."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
import wool
import yaml
from support.metrics import fetch, samples
from support.processes import run_cli, spawn_cli
from support.wool_namespaces import published
from support.wool_pools import WoolFleet

from wool_idle.demo.routines import whoami

pytestmark = pytest.mark.e2e

WAIT = 15.0
IDLE = "wool_worker_idle_seconds"


def has_tag(tag: str) -> Any:
    return lambda metadata: tag in metadata.tags


async def until(condition: Any) -> bool:
    """Whether ``condition()`` became true within WAIT seconds."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while not condition() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    return bool(condition())


async def until_served(url: str, workers: Any) -> bool:
    """Whether the exporter at ``url`` served an idle value for each of ``workers``
    within WAIT seconds."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while asyncio.get_running_loop().time() < deadline:
        found = samples(await asyncio.to_thread(fetch, url))
        idle = {dict(labels)["worker"] for name, labels in found if name == IDLE}
        if idle >= set(workers):
            return True
        await asyncio.sleep(0.2)
    return False


async def retire_once(url: str, namespace: str, *options: str) -> subprocess.CompletedProcess[str]:
    """One `autoscaler --once` cycle over the exporter at ``url``: idle past 300 ms, a
    floor of 1, drops published on ``namespace``; its completed process."""
    return await asyncio.to_thread(
        run_cli,
        [
            "autoscaler",
            "--once",
            "--metrics-url",
            url,
            "--max-idle",
            "300ms",
            "--min-workers",
            "1",
            "--grace",
            "2s",
            "--wool-discovery",
            f"local:{namespace}",
            *options,
        ],
    )


class TestWoolRetirement:
    async def test_stop_drop_and_clients_route_to_the_rest(self, tmp_path: Path) -> None:
        """Given a held namespace with a hot pool of 2 and a cold pool of 1 (idle since
        start), listed for the exporter with their wool_tags, and a wool client on the
        hot tag with wool's default (notification-only) discovery that has used both
        hot workers, when `autoscaler --once --group-by wool_tags --min-workers 1
        --wool-discovery local:NS` runs, then one hot worker is stopped and its drop
        published: wool no longer lists it, the client drops it from its workers and
        runs every later task on the other hot worker; the cold worker is untouched."""
        async with WoolFleet() as pools:
            # Arrange
            await pools.hold()
            await pools.serve("hot", 2)
            await pools.serve("cold", 1)
            listed = await published(pools.namespace, quiet=2.0)
            groups = [
                {"targets": [address], "labels": {"wool_tags": ",".join(sorted(m.tags))}}
                for address, m in listed.items()
            ]
            (tmp_path / "targets.yml").write_text(yaml.safe_dump(groups))
            exporter = spawn_cli(
                [
                    "exporter",
                    "--listen",
                    "127.0.0.1:0",
                    "--targets-file",
                    str(tmp_path / "targets.yml"),
                ]
            )
            url = exporter.stdout.readline().strip()
            hot = {a for a, m in listed.items() if "hot" in m.tags}
            proxy = wool.WorkerProxy(
                discovery=wool.LocalDiscovery(pools.namespace).subscribe(has_tag("hot")),
                quorum_timeout=10,
            )
            try:
                async with proxy:
                    before = {await whoami() for _ in range(6)}
                    await asyncio.sleep(0.5)
                    # Act
                    result = await retire_once(url, pools.namespace, "--group-by", "wool_tags")
                    stopped = {a for a in listed if f"worker={a} verdict=stop " in result.stderr}
                    routed = await until(
                        lambda: {m.address for m in proxy.workers} == hot - stopped
                    )
                    after = {await whoami() for _ in range(6)}
            finally:
                exporter.terminate()
                exporter.wait(timeout=30)
            remaining = await published(pools.namespace, quiet=2.0)
        # Assert
        assert result.returncode == 0, result.stderr
        assert len(stopped) == 1 and stopped <= hot
        (gone,) = stopped
        (kept,) = hot - stopped
        assert f"worker {gone}: drop published" in result.stderr
        assert set(remaining) == set(listed) - stopped
        assert before == {listed[a].pid for a in hot}
        assert routed
        assert after == {listed[kept].pid}

    async def test_pool_bound_on_every_interface_is_never_retired(self) -> None:
        """Given a held namespace with a pool of 2 idle workers bound on 0.0.0.0 (as
        wool's docs show; wool then publishes 0.0.0.0:P, and gRPC listens on every
        address of both families) and an exporter following the namespace, when
        `autoscaler --once --min-workers 1 --wool-discovery local:NS` runs, then both
        are unresolved and neither is stopped: 0.0.0.0:P names no one worker (any
        local listener on P; a worker bound there answers on every address)."""
        async with WoolFleet() as pools:
            # Arrange
            await pools.hold()
            await pools.serve("cold", 2, host="0.0.0.0")
            listed = await published(pools.namespace, quiet=2.0)
            exporter = spawn_cli(
                [
                    "exporter",
                    "--listen",
                    "127.0.0.1:0",
                    "--wool-discovery",
                    f"local:{pools.namespace}",
                    "--wool-discovery.poll-interval",
                    "250ms",
                ]
            )
            url = exporter.stdout.readline().strip()
            try:
                served = await until_served(url, listed)
                # Act
                result = await retire_once(url, pools.namespace)
            finally:
                exporter.terminate()
                exporter.wait(timeout=30)
            remaining = await published(pools.namespace, quiet=2.0)
        # Assert
        assert len(listed) == 2 and all(a.startswith("0.0.0.0:") for a in listed)
        assert served
        assert result.returncode == 0, result.stderr
        for address in listed:
            assert f"worker={address} verdict=unresolved" in result.stderr, result.stderr
        assert "verdict=stop" not in result.stderr
        assert set(remaining) == set(listed)
