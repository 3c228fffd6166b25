"""Exporter fan-out: /metrics latency and CPU beside the gRPC floor, per fleet size.

    python -m bench.exporter_fanout [--sizes 10,100,1000,3000] [--scrapes 15]
                                    [--concurrency 256] [--grpc-experiments EXPERIMENTS]
                                    [--quick]

For each N: a simulated fleet of N workers (bench.fleet), the real exporter
process over it, and the floor (bench.floor: a bare grpc.aio loop, one idle
call per target over open channels with the exporter's channel options, the
same concurrency). Scrapes and floor rounds alternate so both see the same
machine. ``--grpc-experiments`` sets ``GRPC_EXPERIMENTS`` for both the
exporter and the floor (e.g.
``-event_engine_client,-event_engine_for_all_other_endpoints``: docs/scaling.md).
Prints a table, then the ratios exporter/floor last.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.services import Exporter, Fleet, grpc_environment
from bench.support import Child, cpu_seconds, machine, peak_rss_mib, summary, verdict

GOAL = 1.15
"""Exporter / floor, median latency, at the sizes in ``GOAL_SIZES``."""
GOAL_SIZES = (1000, 3000)


def scrape(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
    elapsed = time.perf_counter() - started
    assert b"wool_worker_idle_seconds" in body
    return elapsed


def measure(size: int, scrapes: int, concurrency: int, experiments: str | None) -> dict[str, float]:
    fleet = Fleet(size)
    addresses = fleet.addresses
    env = grpc_environment(experiments)
    floor = Child(["-m", "bench.floor", "--concurrency", str(concurrency), *addresses], env=env)
    with tempfile.TemporaryDirectory() as directory:
        exporter = Exporter(addresses, Path(directory), concurrency=concurrency, env=env)
        url = exporter.metrics_url
        try:
            for _ in range(2):  # warm up: channels open, code paths hot
                scrape(url)
                floor.ask()
            cpu_before = cpu_seconds(exporter.pid)
            latencies, floor_latencies, floor_cpu = [], [], 0.0
            for _ in range(scrapes):
                latencies.append(scrape(url))
                round_ = floor.ask()
                floor_latencies.append(round_["seconds"])
                floor_cpu += round_["cpu"]
            cpu = (cpu_seconds(exporter.pid) - cpu_before) / scrapes
            rss = peak_rss_mib(exporter.pid)
        finally:
            exporter.close()
            floor.close()
            fleet.close()
    median, worst = summary(latencies)
    floor_median, floor_worst = summary(floor_latencies)
    return {
        "n": size,
        "median": median,
        "max": worst,
        "floor_median": floor_median,
        "floor_max": floor_worst,
        "cpu": cpu,
        "floor_cpu": floor_cpu / scrapes,
        "rss": rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,3000")
    parser.add_argument("--scrapes", type=int, default=15)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument(
        "--grpc-experiments", help="GRPC_EXPERIMENTS for the exporter and the floor alike"
    )
    parser.add_argument("--quick", action="store_true", help="sizes 10,100; 3 scrapes")
    args = parser.parse_args()
    sizes = [10, 100] if args.quick else [int(s) for s in args.sizes.split(",")]
    scrapes = 3 if args.quick else args.scrapes
    experiments = f"; GRPC_EXPERIMENTS={args.grpc_experiments}" if args.grpc_experiments else ""
    print(
        f"machine: {machine()}; concurrency {args.concurrency}; {scrapes} scrapes per size"
        f"{experiments}"
    )
    rows = [measure(size, scrapes, args.concurrency, args.grpc_experiments) for size in sizes]
    print(
        f"{'N':>6} {'median ms':>10} {'max ms':>8} {'floor med ms':>13} {'floor max ms':>13} "
        f"{'cpu ms/scrape':>14} {'floor cpu ms':>13} {'peak RSS MiB':>13}"
    )
    for r in rows:
        print(
            f"{r['n']:>6} {r['median'] * 1e3:>10.1f} {r['max'] * 1e3:>8.1f} "
            f"{r['floor_median'] * 1e3:>13.1f} {r['floor_max'] * 1e3:>13.1f} "
            f"{r['cpu'] * 1e3:>14.1f} {r['floor_cpu'] * 1e3:>13.1f} {r['rss']:>13.0f}"
        )
    print("ratios (exporter / floor, median latency; cpu):")
    for r in rows:
        latency = r["median"] / r["floor_median"]
        goal = f" {verdict(latency, GOAL)}" if r["n"] in GOAL_SIZES else ""
        print(
            f"  N={r['n']}: latency {latency:.2f}x{goal}, "
            f"cpu {r['cpu'] / r['floor_cpu']:.2f}x, "
            f"latency per target {r['median'] / r['n'] * 1e6:.0f} us"
        )


if __name__ == "__main__":
    main()
