"""Exporter CPU beside blackbox_exporter's, per round over the same fleet.

    python -m bench.blackbox [--workers 1000] [--rounds 9] [--rate 250]
                             [--concurrency 8] [--adhoc]
                             [--grpc-experiments EXPERIMENTS] [--quick]

One simulated fleet (bench.fleet, which also serves grpc.health.v1) and
three modes of covering it, each a round of work for the same HTTP client
(aiohttp, Prometheus's scrape headers, keep-alive). Requests start at
``--rate`` per second with at most ``--concurrency`` in flight, because
Prometheus spreads its scrapes of many targets over the interval: each
request then meets an exporter that has gone quiet, as in production
(``--rate 0`` sends them back to back, which flatters both exporters'
per-request costs and changes the ratios; see docs/benchmarks.md):

- ``blackbox /probe``: Debian's blackbox_exporter, grpc prober (a new
  connection per probe, as it does), one ``/probe?target=`` per worker;
- ``wool /probe``: wool-idle's exporter with the fleet in its targets file
  (connections kept), one ``/probe?target=`` per worker;
- ``wool /metrics``: the same exporter, one ``/metrics`` (its fan-out);
- with ``--adhoc``, ``wool /probe adhoc``: a second wool-idle exporter with no
  targets file, so every target is ad hoc (what a Prometheus that discovers
  the workers itself makes of it);
- with ``--grpc-experiments``, ``wool /probe (exp)`` and ``wool /metrics (exp)``:
  one more wool-idle exporter, with the fleet in its targets file, run with
  ``GRPC_EXPERIMENTS`` set to that value (an operator's tuning of gRPC, e.g.
  ``-event_engine_client,-event_engine_for_all_other_endpoints``: docs/scaling.md);
  blackbox_exporter is Go and has no such setting.

A mode's cost is the exporter process's CPU over the round (utime + stime of
all its threads, from ``/proc/<pid>/stat``). Rounds alternate the modes
(rotating which goes first); each ratio is taken within a round, and the
median over rounds is printed last with its goal. Every request must succeed
(HTTP 200 and the worker reported): a round that did not cover the whole
fleet measured something else, so the bench then exits 1 after its report.

An exporter with a targets file keeps a connection per configured target from
start-up on, whether or not ``/metrics`` is ever scraped; two warm-up rounds
open them before anything is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.services import PROMETHEUS_HEADERS, Blackbox, Exporter, Fleet, grpc_environment
from bench.support import cpu_seconds, machine, rss_mib, verdict

PROBE_GOAL = 0.33
METRICS_GOAL = 0.15
GOALS = (
    ("wool /probe", PROBE_GOAL),
    ("wool /metrics", METRICS_GOAL),
    ("wool /probe (exp)", PROBE_GOAL),
    ("wool /metrics (exp)", METRICS_GOAL),
)


@dataclass(frozen=True)
class Mode:
    """One way of covering the fleet: the process that pays, and the requests."""

    name: str
    pid: int
    urls: list[str]
    answered: Callable[[bytes], int]
    """How many workers one response body reports as answered."""


def probe_answered(marker: bytes) -> Callable[[bytes], int]:
    return lambda body: int(marker in body)


def idle_series(body: bytes) -> int:
    return body.count(b"\nwool_worker_idle_seconds{")


def wool_probe(name: str, exporter: Exporter, addresses: list[str]) -> Mode:
    """One wool-idle ``/probe`` per worker of ``addresses`` on ``exporter``."""
    urls = [exporter.probe_url(a) for a in addresses]
    return Mode(name, exporter.pid, urls, probe_answered(b"\nwool_worker_idle_seconds{"))


async def run_round(
    session: aiohttp.ClientSession, mode: Mode, lanes: int, rate: float | None
) -> int:
    """Issue every request of ``mode`` with up to ``lanes`` in flight, starting at
    most ``rate`` per second (None: back to back); workers answered."""
    pending: Iterator[str] = iter(mode.urls)
    answered = 0
    loop = asyncio.get_running_loop()
    next_start = loop.time()

    async def lane() -> None:
        nonlocal answered, next_start
        for url in pending:
            if rate is not None:
                now = loop.time()
                start, next_start = max(now, next_start), max(now, next_start) + 1 / rate
                await asyncio.sleep(start - now)
            async with session.get(url, headers=PROMETHEUS_HEADERS) as response:
                body = await response.read()
                if response.status == 200:
                    answered += mode.answered(body)

    await asyncio.gather(*(lane() for _ in range(min(lanes, len(mode.urls)))))
    return answered


async def measure(
    modes: list[Mode], rounds: int, warmups: int, lanes: int, rate: float | None
) -> dict[str, list[tuple[float, int]]]:
    """Per mode, (CPU seconds, workers answered) for each measured round."""
    results: dict[str, list[tuple[float, int]]] = {mode.name: [] for mode in modes}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for index in range(warmups + rounds):
            shift = index % len(modes)
            for mode in modes[shift:] + modes[:shift]:
                before = cpu_seconds(mode.pid)
                answered = await run_round(session, mode, lanes, rate)
                await asyncio.sleep(0.05)  # let the process finish what the round left
                if index >= warmups:
                    results[mode.name].append((cpu_seconds(mode.pid) - before, answered))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument(
        "--rate",
        type=float,
        default=250.0,
        help="requests started per second, spread as Prometheus spreads its scrapes "
        "(0: back to back)",
    )
    parser.add_argument("--adhoc", action="store_true", help="add the no-targets-file mode")
    parser.add_argument(
        "--grpc-experiments",
        help="add an exporter run with this GRPC_EXPERIMENTS (its /probe and /metrics modes)",
    )
    parser.add_argument("--quick", action="store_true", help="100 workers, 2 rounds")
    args = parser.parse_args()
    workers, rounds, warmups = (100, 2, 1) if args.quick else (args.workers, args.rounds, 2)
    fleet = Fleet(workers)
    try:
        with tempfile.TemporaryDirectory() as directory:
            blackbox = Blackbox(Path(directory))
            exporter = Exporter(fleet.addresses, Path(directory))
            adhoc = Exporter(None, Path(directory)) if args.adhoc else None
            tuned = (
                Exporter(
                    fleet.addresses, Path(directory), env=grpc_environment(args.grpc_experiments)
                )
                if args.grpc_experiments
                else None
            )
            try:
                print(
                    f"machine: {machine()}; {blackbox.version()}; {workers} workers, "
                    f"{rounds} rounds (+{warmups} warm-up), at most {args.concurrency} "
                    f"requests in flight, "
                    + (f"{args.rate:g} started per second" if args.rate else "back to back")
                    + (f"; (exp): GRPC_EXPERIMENTS={args.grpc_experiments}" if tuned else "")
                )
                modes = [
                    Mode(
                        "blackbox /probe",
                        blackbox.pid,
                        [blackbox.probe_url(a) for a in fleet.addresses],
                        probe_answered(b"\nprobe_success 1"),
                    ),
                    wool_probe("wool /probe", exporter, fleet.addresses),
                    Mode("wool /metrics", exporter.pid, [exporter.metrics_url], idle_series),
                ]
                if adhoc is not None:
                    modes.append(wool_probe("wool /probe adhoc", adhoc, fleet.addresses))
                if tuned is not None:
                    modes += [
                        wool_probe("wool /probe (exp)", tuned, fleet.addresses),
                        Mode("wool /metrics (exp)", tuned.pid, [tuned.metrics_url], idle_series),
                    ]
                started = time.monotonic()
                rate = args.rate or None
                results = asyncio.run(measure(modes, rounds, warmups, args.concurrency, rate))
                elapsed = time.monotonic() - started
                rss = {m.name: rss_mib(m.pid) for m in modes}
            finally:
                for process in (blackbox, exporter, adhoc, tuned):
                    if process is not None:
                        process.close()
    finally:
        fleet.close()
    if not report(results, rss, workers, elapsed):
        raise SystemExit("some rounds did not cover the whole fleet: the ratios are not valid")


def report(
    results: dict[str, list[tuple[float, int]]],
    rss: dict[str, float],
    workers: int,
    elapsed: float,
) -> bool:
    """Print the table and the ratios; whether every round covered the fleet."""
    complete = True
    print(f"{'mode':>19} {'CPU ms per round (each round)':<48} {'median':>7} {'RSS MiB':>8}")
    for name, rounds in results.items():
        cpus = " ".join(f"{cpu * 1e3:.0f}" for cpu, _ in rounds)
        median = statistics.median(cpu for cpu, _ in rounds)
        print(f"{name:>19} {cpus:<48} {median * 1e3:>7.0f} {rss[name]:>8.0f}")
        short = [answered for _, answered in rounds if answered != workers]
        if short:
            complete = False
            print(f"{'':>19} rounds with fewer than {workers} answered: {short}")
    print(f"({elapsed:.0f} s in all)")
    base = [cpu for cpu, _ in results["blackbox /probe"]]

    def ratio(name: str) -> float:
        cpus = [cpu for cpu, _ in results[name]]
        return statistics.median(cpu / b for cpu, b in zip(cpus, base, strict=True))

    print("ratios (exporter CPU / blackbox_exporter CPU in the same round, median):")
    for name, goal in GOALS:
        if name in results:
            print(f"  {name}: {ratio(name):.2f}x {verdict(ratio(name), goal)}")
    if "wool /probe adhoc" in results:
        print(f"  wool /probe adhoc (no targets file): {ratio('wool /probe adhoc'):.2f}x (no goal)")
    return complete


if __name__ == "__main__":
    main()
