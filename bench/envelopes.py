"""Resource envelopes: each daemon's peak memory, descriptors and threads at the
largest fleet the docs give, in its worst realistic shapes, against the limits of
the Kubernetes manifests (deploy/kubernetes).

    python -m bench.envelopes [--workers 10000] [--rounds 4] [--scrapers 4] [--quick]

Exporter: a simulated fleet (bench.fleet, plaintext or TLS), the real exporter
(``--timeout 10s``) scraped as Prometheus does (10 s timeout) by 1 or ``--scrapers``
at once, ``--rounds`` times (the first opens every connection); ``/probe``: every
worker probed ad hoc (no targets file), 64 at once. Long labels: a 44-character
``wool_namespace`` and 300 characters of ``wool_tags`` per worker, 100 workers a
pool. Meanwhile ``/-/healthy`` is asked every 0.25 s, as a liveness probe would.
Autoscaler: the real daemon, ``--once --group-by wool_tags``, reading that fleet's
answer (with labels) from a plain HTTP server: exposition text, Prometheus API JSON
(with ``--alert``), and exposition text just under ``--source-max-bytes``.
Peaks are VmHWM (the exporter's, read while it runs; the autoscaler's through a
small parent, so the bench's own size does not count). Ratios last: peak / limit.
The TLS certificates come from the tests' throw-away authority (tests/support/tls.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import yaml

from bench.envelope_autoscaler import labelled, measure_autoscaler
from bench.services import PROMETHEUS_HEADERS, Exporter, Fleet
from bench.support import cpu_seconds, machine
from tests.support.tls import make_tls_material
from wool_idle.autoscaler.sources.source import DEFAULT_MAX_BYTES

ROOT = Path(__file__).resolve().parents[1]
ROW = "{:>32} {:>8} {:>7} {:>9} {:>6} {:>7} {:>8}"
"""One exporter shape: name, answered, CPU s per round, slowest /-/healthy s, fds,
threads, peak MiB."""
HEADERS = {**PROMETHEUS_HEADERS, "X-Prometheus-Scrape-Timeout-Seconds": "10"}


@dataclass(frozen=True)
class Shape:
    """One load on the exporter: TLS or not, label characters per worker, scrapers
    at once, or ``/probe`` of every worker ad hoc."""

    name: str
    tls: bool = False
    label_chars: int = 0
    scrapers: int = 1
    probe: bool = False


def shapes(scrapers: int) -> tuple[Shape, ...]:
    """The loads measured, those with labels scraped by ``scrapers`` at once."""
    return (
        Shape("fan-out plaintext"),
        Shape(f"fan-out, labels, {scrapers} scrapers", label_chars=300, scrapers=scrapers),
        Shape("fan-out TLS", tls=True),
        Shape(f"fan-out TLS, labels, {scrapers} scrapers", True, 300, scrapers),
        Shape("/probe ad hoc, 64 at once", probe=True),
    )


def limit_mib(component: str) -> float:
    """The memory limit of the manifest's ``component`` container, in MiB."""
    text = (ROOT / "deploy" / "kubernetes" / f"{component}.yaml").read_text()
    deployment = next(yaml.safe_load_all(text))
    quantity = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    number, unit = quantity["memory"][:-2], quantity["memory"][-2:]
    return int(number) * {"Mi": 1, "Gi": 1024}[unit]


def status(pid: int) -> tuple[float, int, int]:
    """(VmHWM MiB, open descriptors, threads) of ``pid``."""
    fields = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/status").read_text().split("\n")
        if ":" in line
    )
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return int(fields["VmHWM"].split()[0]) / 1024, fds, int(fields["Threads"])


async def exporter_rounds(
    exporter: Exporter, shape: Shape, addresses: list[str], rounds: int
) -> tuple[list[float], float, int]:
    """Scrape (or probe) ``rounds`` times; (CPU s per round, slowest /-/healthy s,
    workers answered in the last round)."""
    worst, cpu, answered = 0.0, [], 0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(60)
    ) as session:

        async def health() -> None:
            nonlocal worst
            while True:
                started = time.perf_counter()
                async with session.get(f"{exporter.base}/-/healthy") as response:
                    await response.read()
                worst = max(worst, time.perf_counter() - started)
                await asyncio.sleep(0.25)

        async def get(url: str) -> int:
            async with session.get(url, headers=HEADERS) as response:
                return (await response.read()).count(b"wool_worker_idle_seconds{")

        async def probes() -> int:
            lanes = asyncio.Semaphore(64)

            async def one(address: str) -> int:
                async with lanes:
                    return await get(exporter.probe_url(address))

            return sum(await asyncio.gather(*(one(a) for a in addresses)))

        poller = asyncio.ensure_future(health())
        for _ in range(rounds):
            before = cpu_seconds(exporter.pid)
            if shape.probe:
                answered = await probes()
            else:
                answered = min(
                    await asyncio.gather(
                        *(get(exporter.metrics_url) for _ in range(shape.scrapers))
                    )
                )
            cpu.append(cpu_seconds(exporter.pid) - before)
        poller.cancel()
    return cpu, worst, answered


def measure_exporter(shape: Shape, n: int, rounds: int, directory: Path) -> str:
    """The ``ROW`` of ``shape`` over ``n`` workers (CPU: the median round after the
    first, which opens every connection)."""
    material = make_tls_material(directory, ()) if shape.tls else None
    fleet = Fleet(n, (material.server.cert, material.server.key) if material else None)
    try:
        flags = ["--tls-ca", material.ca, "--tls-server-name", "localhost"] if material else []
        if not shape.probe:
            groups = [
                {"targets": [a], "labels": labels}
                for a, labels in labelled(fleet.addresses, shape.label_chars)
            ]
            targets = directory / "targets.json"
            targets.write_text(json.dumps(groups))
            flags += ["--targets-file", str(targets)]
        exporter = Exporter(None, directory, flags=flags)
        try:
            cpu, worst, answered = asyncio.run(
                exporter_rounds(exporter, shape, fleet.addresses, rounds)
            )
            peak, fds, threads = status(exporter.pid)
        finally:
            exporter.close()
    finally:
        fleet.close()
    steady = statistics.median(cpu[1:] or cpu)
    return ROW.format(
        shape.name, answered, f"{steady:.2f}", f"{worst:.2f}", fds, threads, round(peak)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4, help="scrape rounds per shape")
    parser.add_argument("--scrapers", type=int, default=4, help="at once, in the labelled shapes")
    parser.add_argument(
        "--quick", action="store_true", help="300 workers, 2 rounds, --source-max-bytes 4 MiB"
    )
    args = parser.parse_args()
    n, rounds = (300, 2) if args.quick else (args.workers, args.rounds)
    max_bytes = 4 * 1024 * 1024 if args.quick else DEFAULT_MAX_BYTES
    exporter_limit, autoscaler_limit = limit_mib("exporter"), limit_mib("autoscaler")
    print(
        f"machine: {machine()}; {n} workers, {rounds} rounds; limits: exporter "
        f"{exporter_limit:.0f} MiB, autoscaler {autoscaler_limit:.0f} MiB"
    )
    print(
        ROW.format("exporter shape", "answered", "cpu s", "healthy s", "fds", "threads", "peak MiB")
    )
    peaks = []
    for shape in shapes(args.scrapers):
        with tempfile.TemporaryDirectory() as directory:
            row = measure_exporter(shape, n, rounds, Path(directory))
        print(row, flush=True)
        peaks.append((shape.name, float(row.split()[-1])))
    print(f"{'autoscaler input':>32} {'body MB':>8} {'peak MiB':>8}")
    for name, size, peak in measure_autoscaler(n, max_bytes):
        print(f"{name:>32} {size:>8.1f} {peak:>8.0f}", flush=True)
        peaks.append((f"autoscaler {name}", peak))
    print("ratios (peak / the manifest's memory limit; goal <= 1.00x):")
    for name, peak in peaks:
        limit = autoscaler_limit if name.startswith("autoscaler") else exporter_limit
        print(f"  {name}: {peak / limit:.2f}x ({'met' if peak <= limit else 'not met'})")


if __name__ == "__main__":
    main()
