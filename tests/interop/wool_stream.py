"""A wool client holding a stream open (executed by a wool 0.15 virtualenv's Python).

Starts an ephemeral pool of one wool worker, calls an async-generator routine
on it and pulls its first item, then prints "ADDRESS" and leaves the stream
suspended (the generator waits for the next pull) until a line arrives on
stdin; then pulls the rest and prints {"items": [...]} or {"error": "..."} as
JSON, and leaves.
"""

import asyncio
import json
import sys

import wool


@wool.routine
async def count(n: int):
    for i in range(n):
        yield i


async def main() -> None:
    async with wool.WorkerPool(spawn=1, quorum=1, lazy=False):
        (worker,) = wool.__proxy__.get().workers
        stream = count(3)
        items = [await anext(stream)]
        print(worker.address, flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        try:
            items += [item async for item in stream]
        except BaseException as error:  # a cancelled stream is the outcome asked about
            print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
            return
        print(json.dumps({"items": items}), flush=True)


if __name__ == "__main__":  # wool's worker process is spawned: the guard is required
    asyncio.run(main())
