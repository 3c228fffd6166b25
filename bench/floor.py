"""The gRPC floor: a bare ``grpc.aio`` loop calling idle once per target.

Usage: ``python -m bench.floor --concurrency C ADDRESS...``. Opens one channel
per address, with the exporter's own channel options (so a ratio compares the
same gRPC configuration), warms each, prints ``ready``; then for each line read
from stdin runs one round (every target once, C lanes pulling from one iterator) and
prints ``{"seconds": wall, "cpu": cpu_seconds}``. gRPC reads ``GRPC_EXPERIMENTS``
from the environment, as the exporter does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import grpc

from wool_idle.exporter.connections import CHANNEL_OPTIONS
from wool_idle.proto import IDLE, IdleTime, Void


async def run(addresses: list[str], concurrency: int) -> None:
    channels = [grpc.aio.insecure_channel(a, options=CHANNEL_OPTIONS) for a in addresses]
    calls = [c.unary_unary(IDLE, Void.SerializeToString, IdleTime.FromString) for c in channels]

    async def round_() -> None:
        """Every call once: ``concurrency`` lanes taking the calls in turn from one
        iterator (the cheapest bounded fan-out measured, and the exporter's)."""
        pending = iter(calls)

        async def lane() -> None:
            for call in pending:
                reply = await call(Void(), timeout=10)
                float(reply.seconds)

        await asyncio.gather(*(lane() for _ in range(min(concurrency, len(calls)))))

    await round_()
    print("ready", flush=True)
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        started, cpu = time.perf_counter(), time.process_time()
        await round_()
        print(
            json.dumps(
                {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu}
            ),
            flush=True,
        )
    for channel in channels:
        await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("addresses", nargs="+")
    args = parser.parse_args()
    asyncio.run(run(args.addresses, args.concurrency))


if __name__ == "__main__":
    main()
