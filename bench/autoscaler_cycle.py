"""Autoscaler: one decision cycle over N workers' series beside the parse floor.

    python -m bench.autoscaler_cycle [--workers 10000] [--repeats 15] [--quick]

Inputs are made once: the exporter's exposition text for N workers (rendered
by the exporter's own collector) and Prometheus API JSON bodies for the same
fleet. A cycle is: read the input into readings (decoded and parsed on
threads, as the sources do), then plan with the daemon's planner (one per
input kind, kept across repeats as the daemon keeps it across cycles). The
floor is parsing the same input with the same library (prometheus-client's
text parser, every sample taken from it; json.loads). The grouped cycles do
the same with ``--group-by pool`` over a fleet in four pools (the sources keep
the label, the floor holds per pool).
Runs alternate. Ratios last.

Floor and cycle run under the same garbage-collector regime, the daemon's:
what start-up made is frozen (as ``Autoscaler.run`` does before its first
cycle) and the collector runs. The last line repeats the JSON pair with the
collector paused in both, which leaves the Python work alone (no goal).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import time
from collections.abc import Callable

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bench.support import machine, verdict
from wool_idle.autoscaler.planner import PolicyPlanner
from wool_idle.autoscaler.policy import PolicySettings
from wool_idle.autoscaler.sources import parse_exposition, parse_query_responses
from wool_idle.exporter.collector import ProbeCollector
from wool_idle.exporter.probe import ErrorReason, ProbeResult
from wool_idle.exporter.target import Target

GOAL = 1.5
"""Cycle / parse floor, median, for either input, grouped or not."""
RULE = PolicySettings(max_idle=600.0, min_workers=10, max_stops_per_cycle=5)
GROUPED = PolicySettings(max_idle=600.0, min_workers=10, max_stops_per_cycle=5, group_by=("pool",))


def fleet(workers: int, pools: int = 1) -> list[ProbeResult]:
    """``workers`` probe results, every 50th down; ``pools`` > 1 labels them p0, p1, ..."""
    rng = random.Random(7)
    results = []
    for i in range(workers):
        pool = "p" if pools == 1 else f"p{i % pools}"
        target = Target(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:50051", (("pool", pool),))
        if i % 50 == 0:
            results.append(ProbeResult(target, False, False, None, 0.001, ErrorReason.UNAVAILABLE))
        else:
            results.append(ProbeResult(target, True, True, rng.uniform(0, 1200), 0.001))
    return results


def exposition(results: list[ProbeResult]) -> str:
    return generate_latest(ProbeCollector(results)).decode()


def api_bodies(results: list[ProbeResult]) -> tuple[str, str]:
    def vector(items: list[tuple[dict[str, str], float]]) -> str:
        return json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [
                        {"metric": labels, "value": [1.7e9, repr(value)]} for labels, value in items
                    ],
                },
            }
        )

    values, ages = [], []
    for r in results:
        labels = r.target.label_dict()
        if r.idle is not None:
            values.append(({"__name__": "wool_worker_idle_seconds", **labels}, r.idle))
            ages.append((labels, 0.5))
        values.append(({"__name__": "wool_worker_up", **labels}, float(r.up)))
        values.append(({"__name__": "wool_worker_idle_supported", **labels}, float(r.supported)))
    return vector(values), vector(ages)


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def timed_paused(work: Callable[[], object]) -> float:
    """``timed`` with the garbage collector paused."""
    gc.disable()
    try:
        return timed(work)
    finally:
        gc.enable()


def text_floor(text: str) -> None:
    for family in text_string_to_metric_families(text):
        for _ in family.samples:
            pass


LOOP = asyncio.new_event_loop()
"""The daemon's loop: the planner is a coroutine (it resolves the workers' addresses)."""


def text_cycle(planner: PolicyPlanner, text: str) -> None:
    LOOP.run_until_complete(_text_cycle(planner, text))


async def _text_cycle(planner: PolicyPlanner, text: str) -> None:
    """As ``ExporterSource.read`` and the daemon do it: parse on a thread, then plan."""
    group_by = planner.settings.group_by
    readings = await asyncio.to_thread(parse_exposition, text, (), group_by)
    await planner.plan(readings, 0.0)


def json_floor(values: str, ages: str) -> None:
    json.loads(values)
    json.loads(ages)


def json_cycle(planner: PolicyPlanner, values: str, ages: str) -> None:
    LOOP.run_until_complete(_json_cycle(planner, values, ages))


async def _json_cycle(planner: PolicyPlanner, values: str, ages: str) -> None:
    """As ``PrometheusSource.read`` and the daemon do it: decode each body and parse on
    threads, then plan."""
    values_body, ages_body = await asyncio.gather(
        *(asyncio.to_thread(json.loads, b) for b in (values, ages))
    )
    group_by = planner.settings.group_by
    readings = await asyncio.to_thread(parse_query_responses, values_body, ages_body, group_by)
    await planner.plan(readings, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="1,000 workers, 3 repeats")
    args = parser.parse_args()
    workers, repeats = (1000, 3) if args.quick else (args.workers, args.repeats)
    results = fleet(workers)
    text = exposition(results)
    values, ages = api_bodies(results)
    pooled = fleet(workers, pools=4)
    pooled_text = exposition(pooled)
    pooled_values, pooled_ages = api_bodies(pooled)
    print(
        f"machine: {machine()}; {workers} workers; exposition {len(text) / 1e6:.1f} MB, "
        f"API JSON {(len(values) + len(ages)) / 1e6:.1f} MB; {repeats} repeats"
    )
    kinds = ("text_floor", "text", "text_grouped", "json_floor", "json", "json_grouped")
    times: dict[str, list[float]] = {k: [] for k in (*kinds, "json_floor_paused", "json_paused")}
    text_planner, json_planner = PolicyPlanner(RULE), PolicyPlanner(RULE)
    text_grouped, json_grouped = PolicyPlanner(GROUPED), PolicyPlanner(GROUPED)
    gc.collect()
    gc.freeze()  # the daemon's regime (Autoscaler.run), for floors and cycles alike
    for _ in range(repeats):
        times["text_floor"].append(timed(lambda: text_floor(text)))
        times["text"].append(timed(lambda: text_cycle(text_planner, text)))
        times["text_grouped"].append(timed(lambda: text_cycle(text_grouped, pooled_text)))
        times["json_floor"].append(timed(lambda: json_floor(values, ages)))
        times["json"].append(timed(lambda: json_cycle(json_planner, values, ages)))
        times["json_grouped"].append(
            timed(lambda: json_cycle(json_grouped, pooled_values, pooled_ages))
        )
        times["json_floor_paused"].append(timed_paused(lambda: json_floor(values, ages)))
        times["json_paused"].append(timed_paused(lambda: json_cycle(json_planner, values, ages)))
    median = {k: statistics.median(v) for k, v in times.items()}
    for key, seconds in median.items():
        print(f"  {key:>17}: median {seconds * 1e3:8.1f} ms")
    print("ratios (cycle / parse floor, median):")
    for kind, label in (("text", "exposition text"), ("json", "Prometheus API JSON")):
        floor = median[f"{kind}_floor"]
        grouped = median[f"{kind}_grouped"] / floor
        plain = median[kind] / floor
        print(
            f"  {label}: {plain:.2f}x {verdict(plain, GOAL)}; "
            f"grouped by pool: {grouped:.2f}x {verdict(grouped, GOAL)}"
        )
    paused = median["json_paused"] / median["json_floor_paused"]
    print(f"  Prometheus API JSON, the collector paused in floor and cycle: {paused:.2f}x")


if __name__ == "__main__":
    main()
