"""The gRPC floor: a bare ``grpc.aio`` loop calling idle once per target.

Usage: ``python -m bench.floor --concurrency C ADDRESS...``. Opens one channel
per address, warms each, prints ``ready``; then for each line read from stdin
runs one round (every target once, at most C calls in flight) and prints
``{"seconds": wall, "cpu": cpu_seconds}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import grpc

from wool_idle.proto import IDLE, IdleTime, Void


async def run(addresses: list[str], concurrency: int) -> None:
    channels = [grpc.aio.insecure_channel(a) for a in addresses]
    calls = [c.unary_unary(IDLE, Void.SerializeToString, IdleTime.FromString) for c in channels]
    semaphore = asyncio.Semaphore(concurrency)

    async def one(call: grpc.aio.UnaryUnaryMultiCallable) -> float:
        async with semaphore:
            reply = await call(Void(), timeout=10)
            return float(reply.seconds)

    await asyncio.gather(*(one(c) for c in calls))
    print("ready", flush=True)
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(c) for c in calls))
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
