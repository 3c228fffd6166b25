"""End to end, issue 13's emptied pool: real wool 0.15.7 pools (hot x3, cold x1) on
a held LocalDiscovery namespace, every worker idle from the start, the exporter
following the namespace by discovery, the autoscaler retiring idle workers, and a
wool client on the hot tag that starts only once the autoscaler retired what it
could. With ``--group-by wool_tags`` every tag keeps a worker and the client loses
no task; without it the fleet-wide floor keeps the cold worker and empties the hot
pool, and the client's tasks fail."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from support.metrics import fetch, samples
from support.wool_pools import WoolFleet

from wool_idle.worker.process import ReadyProcess, kill_and_reap, spawn_ready

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
SETTLE_CYCLES = 4
"""Autoscaler cycles in a row without a new stop after which it retired what it could."""
SETTLE_DEADLINE = 60.0


@dataclass(frozen=True)
class Outcome:
    """What the scenario left: up workers by tags (the exporter's view), the
    autoscaler's accepted stops, and the wool client's counts."""

    left: Counter[str]
    stopped: int
    counts: dict[str, int]


async def scrape(url: str) -> Samples:
    return samples(await asyncio.to_thread(fetch, url))


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def settled(autoscaler_url: str) -> int:
    """Wait until the autoscaler stopped someone and then ran ``SETTLE_CYCLES``
    cycles without another stop; its accepted stops."""
    deadline = asyncio.get_running_loop().time() + SETTLE_DEADLINE
    stops, cycles, last_cycle = 0.0, 0, 0.0
    while asyncio.get_running_loop().time() < deadline:
        found = await scrape(autoscaler_url)
        now_stops = value(found, "wool_autoscaler_stops_total", result="stopped")
        cycle = value(found, "wool_autoscaler_last_cycle_timestamp_seconds")
        if now_stops != stops:
            stops, cycles = now_stops, 0
        elif cycle != last_cycle and stops:
            cycles += 1
        last_cycle = cycle
        if cycles >= SETTLE_CYCLES:
            return int(stops)
        await asyncio.sleep(0.1)
    raise AssertionError(f"the autoscaler did not settle: {stops:g} stops, {cycles} quiet cycles")


@contextlib.asynccontextmanager
async def daemon(args: list[str]) -> AsyncIterator[ReadyProcess]:
    """A ``wool-idle`` daemon, stopped (SIGTERM, then SIGKILL) on exit."""
    ready = await spawn_ready(args)
    try:
        yield ready
    finally:
        ready.process.terminate()
        try:
            await asyncio.wait_for(ready.process.wait(), 30)
        except TimeoutError:
            await kill_and_reap(ready.process)


async def emptied_pool_scenario(*policy: str) -> Outcome:
    """The scenario with the autoscaler's ``policy`` flags."""
    async with WoolFleet() as fleet:
        await fleet.hold()
        await fleet.serve("hot", 3)
        await fleet.serve("cold", 1)  # the last started: the least idle worker
        local = f"local:{fleet.namespace}"
        exporter_args = ["exporter", "--web.listen-address", "127.0.0.1:0"]
        exporter_args += ["--wool-discovery", local, "--wool-discovery.poll-interval", "250ms"]
        async with daemon(exporter_args) as exporter:
            scaler_args = ["autoscaler", "--metrics-url", exporter.line, "--max-idle", "2s"]
            scaler_args += ["--interval", "500ms", "--min-workers", "1", "--grace", "2s"]
            scaler_args += ["--wool-discovery", local, "--web.listen-address", "127.0.0.1:0"]
            async with daemon([*scaler_args, *policy]) as autoscaler:
                stopped = await settled(autoscaler.line)
                client = await fleet.client("hot", seconds=3.0, interval=0.1)
                counts = await fleet.counts(client)
                found = await scrape(exporter.line)
    left = Counter(
        dict(labels).get("wool_tags", "")
        for (name, labels), up in found.items()
        if name == "wool_worker_up" and up == 1.0
    )
    return Outcome(left, stopped, counts)


class TestEmptiedPool:
    async def test_group_by_tags_keeps_every_pool_and_the_client_loses_nothing(self) -> None:
        """Given hot x3 and cold x1 wool workers, all idle from the start, followed by the
        exporter through discovery, when the autoscaler with --group-by wool_tags
        --min-workers 1 has retired what it could and a wool client on the hot tag
        starts, then one worker of each tag is left (two hot ones retired) and the
        client's submitted tasks all completed, none failed."""
        # Act
        outcome = await emptied_pool_scenario("--group-by", "wool_tags")
        # Assert
        assert outcome.left == Counter({"hot": 1, "cold": 1})
        assert outcome.stopped == 2
        assert outcome.counts["failed"] == 0
        assert outcome.counts["submitted"] == outcome.counts["completed"] > 0

    async def test_without_group_by_the_hot_pool_is_emptied(self) -> None:
        """Given the same fleet, when the autoscaler holds --min-workers 1 for the whole
        fleet only, then it keeps the least idle worker (cold) and retires every hot
        one, and the hot client's tasks fail: what --group-by prevents."""
        # Act
        outcome = await emptied_pool_scenario()
        # Assert
        assert outcome.left == Counter({"cold": 1})
        assert outcome.stopped == 3
        assert outcome.counts["failed"] > 0
        assert outcome.counts["completed"] == 0
