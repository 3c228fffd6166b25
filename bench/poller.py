"""Polls a worker from its own process: idle at a fixed rate, optionally
timing the idle RPC against the empty handler.

Usage: ``python -m bench.poller ADDRESS --hz 100 [--method empty] [--compare]``. Prints
``ready``, polls until stdin closes, then prints ``{"polls": n, "idle_ms":
[...], "empty_ms": [...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import grpc

from bench.worker_server import EMPTY
from wool_idle.proto import IDLE, IdleTime, Void


async def poll(address: str, hz: float, compare: bool, method: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        idle = channel.unary_unary(IDLE, Void.SerializeToString, IdleTime.FromString)
        empty = channel.unary_unary(EMPTY, Void.SerializeToString, Void.FromString)
        await idle(Void())
        await empty(Void())
        print("ready", flush=True)
        stop = asyncio.ensure_future(asyncio.to_thread(sys.stdin.read))
        idle_ms: list[float] = []
        empty_ms: list[float] = []
        polls = 0
        period = 1.0 / hz
        next_at = time.perf_counter()
        polled = idle if method == "idle" else empty
        while not stop.done():
            started = time.perf_counter()
            await polled(Void())
            idle_ms.append((time.perf_counter() - started) * 1e3)
            polls += 1
            if compare:
                started = time.perf_counter()
                await empty(Void())
                empty_ms.append((time.perf_counter() - started) * 1e3)
            next_at += period
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        print(json.dumps({"polls": polls, "idle_ms": idle_ms, "empty_ms": empty_ms}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("--hz", type=float, default=100.0)
    parser.add_argument("--compare", action="store_true")
    parser.add_argument(
        "--method",
        choices=["idle", "empty"],
        default="idle",
        help="what to poll (empty: the floor of any unary RPC)",
    )
    args = parser.parse_args()
    asyncio.run(poll(args.address, args.hz, args.compare, args.method))


if __name__ == "__main__":
    main()
