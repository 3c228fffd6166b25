"""Concurrent scrapers: 4 Prometheus-like scrapers at 1 Hz against one exporter.

    python -m bench.scrapers [--workers 1000] [--scrapers 4] [--seconds 60] [--quick]

Two runs over a simulated fleet: scrapers arriving together (as HA replicas
with the same offset; coalescing applies) and spread evenly over the second
(nothing in flight to share). Reports idle RPCs per worker per second,
errors, and the exporter's CPU, then the ratios last.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import aiohttp

from bench.services import Exporter, Fleet
from bench.support import cpu_seconds, machine

TOGETHER_GOAL = 1.05
"""Idle RPCs per worker per second with the scrapers arriving together (1.00 = one
fan-out shared by all), with no scrape or probe error."""


async def scraper(
    session: aiohttp.ClientSession, url: str, offset: float, seconds: float, errors: list[str]
) -> int:
    await asyncio.sleep(offset)
    loop = asyncio.get_running_loop()
    end, count = loop.time() + seconds, 0
    while loop.time() < end:
        started = loop.time()
        try:
            async with session.get(url, headers={"X-Prometheus-Scrape-Timeout-Seconds": "10"}) as r:
                body = await r.text()
                if r.status != 200 or "wool_worker_idle_seconds" not in body:
                    errors.append(f"HTTP {r.status}")
        except aiohttp.ClientError as error:
            errors.append(repr(error))
        count += 1
        await asyncio.sleep(max(0.0, 1.0 - (loop.time() - started)))
    return count


def probe_errors(url: str) -> float:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url, timeout=60).read().decode()
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "wool_exporter_probe_errors_total"
    )


def run(workers: int, scrapers: int, seconds: float, spread: bool) -> dict[str, float]:
    fleet = Fleet(workers)
    with tempfile.TemporaryDirectory() as directory:
        exporter = Exporter(fleet.addresses, Path(directory))
        url = exporter.metrics_url
        try:
            errors: list[str] = []

            async def all_scrapers() -> list[int]:
                async with aiohttp.ClientSession() as session:
                    await session.get(url)  # warm up
                    fleet.calls()  # reset the counts
                    offsets = [i / scrapers if spread else 0.0 for i in range(scrapers)]
                    return await asyncio.gather(
                        *(scraper(session, url, o, seconds, errors) for o in offsets)
                    )

            cpu_before, started = cpu_seconds(exporter.pid), time.monotonic()
            counts = asyncio.run(all_scrapers())
            elapsed = time.monotonic() - started
            cpu = cpu_seconds(exporter.pid) - cpu_before
            calls = fleet.calls()
            errors_total = probe_errors(url)
        finally:
            exporter.close()
            fleet.close()
    per_peer = list(calls["peers"].values())
    return {
        "rpcs_per_worker_s": calls["calls"] / workers / elapsed,
        "scrapes": sum(counts),
        "scrape_errors": len(errors),
        "probe_errors": errors_total,
        "cpu_share": cpu / elapsed,
        "max_per_worker": max(per_peer) if per_peer else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--scrapers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--quick", action="store_true", help="100 workers for 5 s")
    args = parser.parse_args()
    workers, seconds = (100, 5.0) if args.quick else (args.workers, args.seconds)
    print(
        f"machine: {machine()}; {workers} workers, {args.scrapers} scrapers at 1 Hz "
        f"for {seconds:g} s"
    )
    results = {
        name: run(workers, args.scrapers, seconds, spread)
        for name, spread in (("together", False), ("spread", True))
    }
    for name, r in results.items():
        print(
            f"{name:>9}: {r['scrapes']} scrapes, idle RPCs/worker/s {r['rpcs_per_worker_s']:.2f}, "
            f"scrape errors {r['scrape_errors']}, probe errors {r['probe_errors']:.0f}, "
            f"exporter CPU {r['cpu_share'] * 100:.0f}% of a core"
        )
    print("ratios (idle RPCs per worker per second / scrapes per second per scraper):")
    for name, r in results.items():
        ratio = r["rpcs_per_worker_s"]
        goal = ""
        if name == "together":
            met = ratio <= TOGETHER_GOAL and r["scrape_errors"] == r["probe_errors"] == 0
            goal = f" (goal <= {TOGETHER_GOAL:.2f} and no error: {'met' if met else 'not met'})"
        print(f"  {name}: {ratio:.2f} (1.00 = fully coalesced, {args.scrapers}.00 = none){goal}")


if __name__ == "__main__":
    main()
