"""wool's own client against a worker (executed by the wool 0.15 virtualenv's Python).

Usage: wool_client.py TARGET GRACE. Polls idle twice, stops the worker with
GRACE, and prints {"first": s, "second": s} as JSON.
"""

import asyncio
import json
import sys

from wool.runtime.worker.connection import WorkerConnection


async def main(target: str, grace: float) -> None:
    connection = WorkerConnection(target)
    first = await connection.idle(timeout=5)
    await asyncio.sleep(0.2)
    second = await connection.idle(timeout=5)
    await connection.stop(grace=grace, timeout=grace + 10)
    print(json.dumps({"first": first, "second": second}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
