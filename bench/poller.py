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

        async def timed(call: grpc.aio.UnaryUnaryMultiCallable, into: list[float]) -> None:
            started = time.perf_counter()
            await call(Void())
            into.append((time.perf_counter() - started) * 1e3)

        while not stop.done():
            # With --compare, alternate which call goes first: the first call after
            # a sleep pays the wake-up, and neither should always pay it.
            pair = [(polled, idle_ms), (empty, empty_ms)] if compare else [(polled, idle_ms)]
            for call, into in pair if polls % 2 == 0 else pair[::-1]:
                await timed(call, into)
            polls += 1
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
