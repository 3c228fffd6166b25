"""Exporter at scale: one /metrics over 1,000 to 10,000 workers inside a 10 s budget.

    python -m bench.exporter_scale [--sizes 1000,3000,10000] [--scrapes 3] [--quick]

For each N: a simulated fleet of N workers (bench.fleet, in shards), the
real exporter with its default flags except ``--timeout 10s`` (the default
5 s would cap the scrape's budget below Prometheus's), scraped the way
Prometheus scrapes it with a 10 s scrape timeout (so the exporter's budget
is 9.5 s). The first scrape opens every connection (cold); the next
``--scrapes`` are the steady state. Reports, per N: workers answered, wall
time, exporter CPU per scrape and memory, and the same per target, so
linearity shows; then the goals last.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.services import PROMETHEUS_HEADERS, Exporter, Fleet
from bench.support import cpu_seconds, machine, peak_rss_mib, rss_mib

BUDGET = 10.0
"""Prometheus's scrape timeout the scrapes announce."""


@dataclass(frozen=True)
class Scrape:
    seconds: float
    cpu: float
    answered: int


@dataclass(frozen=True)
class Size:
    n: int
    cold: Scrape
    steady: list[Scrape]
    rss_before: float
    rss_after: float
    peak_rss: float

    def median(self, field: str) -> float:
        return float(statistics.median(getattr(s, field) for s in self.steady))

    @property
    def complete(self) -> bool:
        return all(s.answered == self.n and s.seconds <= BUDGET for s in self.steady)


async def scrape(url: str, pid: int) -> Scrape:
    headers = {**PROMETHEUS_HEADERS, "X-Prometheus-Scrape-Timeout-Seconds": f"{BUDGET:g}"}
    timeout = aiohttp.ClientTimeout(total=BUDGET * 3)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        cpu, started = cpu_seconds(pid), time.perf_counter()
        async with session.get(url, headers=headers) as response:
            body = await response.read()
        seconds = time.perf_counter() - started
    return Scrape(seconds, cpu_seconds(pid) - cpu, body.count(b"\nwool_worker_idle_seconds{"))


def measure(n: int, scrapes: int, directory: Path) -> Size:
    fleet = Fleet(n)
    try:
        exporter = Exporter(fleet.addresses, directory)
        try:
            time.sleep(0.5)  # let start-up settle before the baseline
            rss_before = rss_mib(exporter.pid)
            url, pid = exporter.metrics_url, exporter.pid
            cold = asyncio.run(scrape(url, pid))
            steady = [asyncio.run(scrape(url, pid)) for _ in range(scrapes)]
            return Size(
                n, cold, steady, rss_before, rss_mib(exporter.pid), peak_rss_mib(exporter.pid)
            )
        finally:
            exporter.close()
    finally:
        fleet.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000")
    parser.add_argument("--scrapes", type=int, default=3, help="steady-state scrapes per size")
    parser.add_argument("--quick", action="store_true", help="sizes 100,300; 2 scrapes")
    args = parser.parse_args()
    sizes = [100, 300] if args.quick else [int(s) for s in args.sizes.split(",")]
    scrapes = 2 if args.quick else args.scrapes
    print(
        f"machine: {machine()}; exporter --timeout 10s, scrape timeout {BUDGET:g} s; "
        f"{scrapes} steady scrapes per size after a cold one"
    )
    with tempfile.TemporaryDirectory() as directory:
        rows = [measure(n, scrapes, Path(directory)) for n in sizes]
    print(
        f"{'N':>6} {'answered':>9} {'cold s':>7} {'steady s':>9} {'cpu s':>6} "
        f"{'RSS MiB':>8} {'peak MiB':>9} {'us/target':>10} {'cpu us/target':>14} "
        f"{'KiB/target':>11}"
    )
    for r in rows:
        answered = min(s.answered for s in r.steady)
        print(
            f"{r.n:>6} {answered:>9} {r.cold.seconds:>7.2f} {r.median('seconds'):>9.2f} "
            f"{r.median('cpu'):>6.2f} {r.rss_after:>8.0f} {r.peak_rss:>9.0f} "
            f"{r.median('seconds') / r.n * 1e6:>10.0f} {r.median('cpu') / r.n * 1e6:>14.0f} "
            f"{(r.rss_after - r.rss_before) * 1024 / r.n:>11.1f}"
        )
    print("ratios (per-target cost at each N / at the smallest N; 1.00 = linear):")
    first = rows[0]
    for r in rows[1:]:
        cpu = (r.median("cpu") / r.n) / (first.median("cpu") / first.n)
        wall = (r.median("seconds") / r.n) / (first.median("seconds") / first.n)
        memory = ((r.rss_after - r.rss_before) / r.n) / (
            max(1e-9, first.rss_after - first.rss_before) / first.n
        )
        print(f"  N={r.n}: cpu {cpu:.2f}x, wall {wall:.2f}x, memory {memory:.2f}x")
    largest = rows[-1]
    print(
        f"  N={largest.n}: slowest steady scrape "
        f"{max(s.seconds for s in largest.steady):.2f} s, fewest answered "
        f"{min(s.answered for s in largest.steady)}/{largest.n} "
        f"(goal: every worker inside {BUDGET:g} s: {'met' if largest.complete else 'not met'})"
    )


if __name__ == "__main__":
    main()
