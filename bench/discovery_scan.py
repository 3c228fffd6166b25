"""Following a wool namespace: the event loop's worst lag, wool's subscriber beside ours.

    python -m bench.discovery_scan [--sizes 1024,4096] [--polls 10] [--rounds 2] [--quick]

For each N: this process holds a real wool ``LocalDiscovery`` namespace of capacity N
and publishes N worker records through wool's own publisher (no worker runs: only
records are read). Then, in alternating rounds, a ``Follower`` follows it at the
default poll interval, through wool's own polling subscriber (which reads the
namespace on the event loop: the code before the fix) or through ``LocalAttachment``
(which reads it on a daemon thread), while a heartbeat task on the same loop sleeps
1 ms at a time and records how late it wakes. Reported per N and way: the worst lag
while the subscription takes every worker in (from subscribing until all N are
records), and the worst and 99th-percentile lag over the next ``--polls`` polls
(steady state: what every scrape waits behind). Ratios (ours / wool's) last.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from bench.support import machine, verdict
from wool_idle.demo.fleet import remove_namespace_files
from wool_idle.discovery.follow import DEFAULT_POLL_INTERVAL, Follower
from wool_idle.discovery.local import LocalAttachment
from wool_idle.discovery.spec import DiscoverySpec

GOAL = 0.10
"""Ours / wool's, worst heartbeat lag over the steady polls, at every N."""
BEAT = 0.001


class OnLoop(LocalAttachment):
    """wool's own polling subscriber, as wool-idle used it before: read on the loop."""

    def subscribe(self) -> AsyncIterator[Any]:
        from wool import LocalDiscovery

        subscriber: AsyncIterator[Any] = aiter(
            LocalDiscovery(self.namespace).subscribe(poll_interval=self.poll_interval)
        )
        return subscriber

    def announced(self) -> bool:
        return True


class Heartbeat:
    """A task on the loop that sleeps ``BEAT`` at a time; ``lags`` how late each woke."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(BEAT)
            self.lags.append(time.perf_counter() - started - BEAT)

    def take(self) -> list[float]:
        lags, self.lags = self.lags, []
        return lags

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def follow(
    namespace: str, n: int, way: type[LocalAttachment], polls: int
) -> dict[str, float]:
    """Follow ``namespace`` through ``way``; the heartbeat's lags, taking in and steady."""
    spec = DiscoverySpec.parse(f"local:{namespace}")
    attachment = way(namespace, poll_interval=DEFAULT_POLL_INTERVAL)
    follower = Follower(spec, attachment, retry_interval=DEFAULT_POLL_INTERVAL)
    heartbeat = Heartbeat()
    task = asyncio.ensure_future(follower.run())
    try:
        while not (follower.up and len(follower.records) == n):
            await asyncio.sleep(0.01)
        taking_in = heartbeat.take()
        await asyncio.sleep(polls * DEFAULT_POLL_INTERVAL)
        steady = heartbeat.take()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await heartbeat.stop()
    return {
        "in": max(taking_in),
        "max": max(steady),
        "p99": statistics.quantiles(steady, n=100)[98],
    }


async def measure(n: int, polls: int, rounds: int) -> dict[str, Any]:
    from wool import LocalDiscovery, WorkerMetadata

    namespace = f"bench-scan-{uuid.uuid4().hex[:10]}"
    results: dict[str, list[dict[str, float]]] = {"wool": [], "ours": []}
    try:
        with LocalDiscovery(namespace, capacity=n):
            async with LocalDiscovery.Publisher(namespace) as publisher:
                for i in range(n):
                    metadata = WorkerMetadata(
                        uid=uuid.uuid4(),
                        address=f"127.0.0.1:{20000 + i}",
                        pid=4242,
                        version="0.15.7",
                        tags=frozenset({"bench"}),
                    )
                    await publisher.publish("worker-added", metadata)
                for _ in range(rounds):
                    results["wool"].append(await follow(namespace, n, OnLoop, polls))
                    results["ours"].append(await follow(namespace, n, LocalAttachment, polls))
    finally:
        remove_namespace_files(namespace)
    return {"n": n, **{way: _worst(runs) for way, runs in results.items()}}


def _worst(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: max(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,4096")
    parser.add_argument("--polls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="size 256; 4 polls, 1 round")
    args = parser.parse_args()
    sizes = [256] if args.quick else [int(s) for s in args.sizes.split(",")]
    polls, rounds = (4, 1) if args.quick else (args.polls, args.rounds)
    print(
        f"machine: {machine()}; poll interval {DEFAULT_POLL_INTERVAL:g} s; "
        f"{polls} polls, {rounds} rounds per way (worst of the rounds)"
    )
    rows = [asyncio.run(measure(n, polls, rounds)) for n in sizes]
    print(
        f"{'N':>6} {'way':>5} {'taking in max ms':>17} {'steady max ms':>14} {'steady p99 ms':>14}"
    )
    for r in rows:
        for way in ("wool", "ours"):
            lag = r[way]
            print(
                f"{r['n']:>6} {way:>5} {lag['in'] * 1e3:>17.1f} {lag['max'] * 1e3:>14.1f} "
                f"{lag['p99'] * 1e3:>14.1f}"
            )
    print("ratios (ours / wool's subscriber on the loop, heartbeat lag):")
    for r in rows:
        steady = r["ours"]["max"] / r["wool"]["max"]
        print(
            f"  N={r['n']}: steady worst {steady:.2f}x {verdict(steady, GOAL)}, "
            f"taking in worst {r['ours']['in'] / r['wool']['in']:.2f}x, "
            f"steady p99 {r['ours']['p99'] / r['wool']['p99']:.2f}x"
        )


if __name__ == "__main__":
    main()
