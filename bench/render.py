"""Exporter: rendering the per-worker series, directly beside prometheus-client.

    python -m bench.render [--sizes 1,1000,10000] [--repeats 7] [--quick]

For each size, the results of one fan-out over that many workers (every 50th
down, as in bench.autoscaler_cycle) are rendered in the text format 0.0.4 two
ways, alternately in one process: by prometheus-client's ``generate_latest``
over the exporter's collector (what the exporter did before it rendered
directly), and by ``exposition.render_workers`` (what ``/metrics`` and
``/probe`` do now). Size 1 is one ``/probe`` answer. The two outputs are
checked equal before anything is timed. Ratios last (direct / generic, median).
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from bench.autoscaler_cycle import fleet
from bench.support import machine
from wool_idle.exporter.collector import ProbeCollector
from wool_idle.exporter.exposition import render_workers
from wool_idle.exporter.outcome import ProbeResult


class _Generic(Collector):
    """The exporter's collector without its own rendering: prometheus-client renders it."""

    def __init__(self, results: list[ProbeResult]) -> None:
        self.collector = ProbeCollector(results)

    def collect(self) -> Iterator[Metric]:
        return self.collector.collect()


def measure(size: int, repeats: int) -> tuple[float, float]:
    """Median seconds per rendering of ``size`` workers' results: generic, direct."""
    results = fleet(size)
    generic = _Generic(results)
    if render_workers(results) != generate_latest(generic):
        raise SystemExit(f"N={size}: the two renderings differ")
    calls = max(1, 20000 // size)
    times: dict[str, list[float]] = {"generic": [], "direct": []}
    for _ in range(repeats):
        times["generic"].append(timeit.timeit(lambda: generate_latest(generic), number=calls))
        times["direct"].append(timeit.timeit(lambda: render_workers(results), number=calls))
    return statistics.median(times["generic"]) / calls, statistics.median(times["direct"]) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,1000,10000")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="sizes 1 and 100, 3 repeats")
    args = parser.parse_args()
    sizes = [1, 100] if args.quick else [int(n) for n in args.sizes.split(",")]
    repeats = 3 if args.quick else args.repeats
    print(f"machine: {machine()}; {repeats} repeats per size, alternated")
    print(f"{'N':>6}  {'generate_latest ms':>18}  {'render_workers ms':>17}  {'us/worker':>9}")
    ratios = []
    for size in sizes:
        generic_s, direct_s = measure(size, repeats)
        print(
            f"{size:>6}  {generic_s * 1e3:>18.3f}  {direct_s * 1e3:>17.3f}  "
            f"{direct_s / size * 1e6:>9.2f}"
        )
        ratios.append((size, direct_s / generic_s))
    print("ratios (render_workers / generate_latest, median; no goal):")
    for size, ratio in ratios:
        print(f"  N={size}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
