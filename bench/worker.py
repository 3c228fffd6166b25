"""Worker: dispatch throughput with and without idle polling, and idle latency.

    python -m bench.worker [--seconds 5] [--rounds 4] [--concurrency 32] [--hz 100]
                           [--no-pin] [--quick]

A real worker service (bench.worker_server) runs no-op tasks dispatched by
this process as fast as it can (``--concurrency`` calls in flight). The
worker process is pinned to one core and this process and the pollers to
another (``--no-pin`` to share), so what polling costs the worker is not
hidden by the pollers competing with it for a core. Rounds
alternate: unpolled, then polled at ``--hz`` by another process
(bench.poller). A last round measures the idle RPC's latency under the same
dispatch load beside an empty unary handler on the same server. Ratios last.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys

from bench.support import Child, cpu_seconds, machine, verdict_at_least
from wool_idle.worker import WorkerConnection

GOAL = 0.97
"""Throughput polled at 100 Hz / unpolled."""


async def noop() -> None:
    """The task: nothing at all."""


def measured(pid: int, address: str, seconds: float, concurrency: int) -> tuple[float, float]:
    """(tasks per second, tasks per CPU-second of the worker process) for one round."""
    cpu = cpu_seconds(pid)
    rate = asyncio.run(throughput(address, seconds, concurrency))
    return rate, rate * seconds / max(1e-9, cpu_seconds(pid) - cpu)


async def throughput(address: str, seconds: float, concurrency: int) -> float:
    """Completed no-op tasks per second."""
    loop = asyncio.get_running_loop()
    end, done = loop.time() + seconds, 0

    async def lane(connection: WorkerConnection) -> None:
        nonlocal done
        while loop.time() < end:
            await connection.dispatch(noop)
            done += 1

    async with WorkerConnection(address) as connection:
        await connection.dispatch(noop)
        started = loop.time()
        await asyncio.gather(*(lane(connection) for _ in range(concurrency)))
        return done / (loop.time() - started)


def percentile(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] if len(samples) > 1 else samples[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--hz", type=float, default=100.0)
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin the worker to CPU 0 and the rest to CPU 1"
    )
    parser.add_argument("--quick", action="store_true", help="1 round of 1 s")
    args = parser.parse_args()
    seconds, rounds = (1.0, 1) if args.quick else (args.seconds, args.rounds)
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.worker_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    address = server.stdout.readline().strip()
    pinned = not args.no_pin and len(os.sched_getaffinity(0)) >= 2
    if pinned:  # the worker alone on one core; this process and the pollers on another
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(server.pid, {cores[0]})
        os.sched_setaffinity(0, {cores[1]})
    print(
        f"machine: {machine()}; {rounds} rounds of {seconds:g} s, concurrency "
        f"{args.concurrency}, polling at {args.hz:g} Hz, "
        f"{'worker pinned to its own core' if pinned else 'unpinned'}"
    )
    try:
        unpolled, polled, empty_polled, rates = [], [], [], []
        for _ in range(rounds):
            unpolled.append(measured(server.pid, address, seconds, args.concurrency))
            poller = Child(["-m", "bench.poller", address, "--hz", str(args.hz)])
            polled.append(measured(server.pid, address, seconds, args.concurrency))
            rates.append(poller.finish()["polls"] / seconds)
            poller = Child(
                ["-m", "bench.poller", address, "--hz", str(args.hz), "--method", "empty"]
            )
            empty_polled.append(measured(server.pid, address, seconds, args.concurrency))
            poller.finish()
        latency = Child(["-m", "bench.poller", address, "--hz", str(args.hz), "--compare"])
        asyncio.run(throughput(address, seconds, args.concurrency))
        result = latency.finish()
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    idle_ms, empty_ms = result["idle_ms"], result["empty_ms"]

    def rate(rounds: list[tuple[float, float]]) -> float:
        return statistics.median(t for t, _ in rounds)

    def efficiency(rounds: list[tuple[float, float]]) -> float:
        return statistics.median(e for _, e in rounds)

    print(
        f"throughput unpolled: {', '.join(f'{t:.0f}' for t, _ in unpolled)} tasks/s; "
        f"{', '.join(f'{e:.0f}' for _, e in unpolled)} tasks per worker CPU-second"
    )
    print(
        f"throughput polled:   {', '.join(f'{t:.0f}' for t, _ in polled)} tasks/s; "
        f"{', '.join(f'{e:.0f}' for _, e in polled)} tasks per worker CPU-second "
        f"(achieved poll rate {statistics.median(rates):.0f} Hz)"
    )
    print(
        f"throughput polled (empty RPC instead): "
        f"{', '.join(f'{t:.0f}' for t, _ in empty_polled)} tasks/s"
    )
    print(
        f"idle RPC under load:  p50 {percentile(idle_ms, 50):.2f} ms, "
        f"p99 {percentile(idle_ms, 99):.2f} ms ({len(idle_ms)} calls)"
    )
    print(
        f"empty RPC under load: p50 {percentile(empty_ms, 50):.2f} ms, "
        f"p99 {percentile(empty_ms, 99):.2f} ms"
    )
    print("ratios:")
    kept = rate(polled) / rate(unpolled)
    print(f"  throughput polled/unpolled: {kept:.3f} {verdict_at_least(kept, GOAL)}")
    print(
        f"  tasks per worker CPU-second polled/unpolled: "
        f"{efficiency(polled) / efficiency(unpolled):.3f}"
    )
    print(
        f"  throughput polling idle / polling the empty RPC: "
        f"{rate(polled) / rate(empty_polled):.3f}"
    )
    print(
        f"  idle/empty latency: p50 {percentile(idle_ms, 50) / percentile(empty_ms, 50):.2f}x, "
        f"p99 {percentile(idle_ms, 99) / percentile(empty_ms, 99):.2f}x"
    )


if __name__ == "__main__":
    main()
