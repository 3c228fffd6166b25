"""Run one real wool LocalWorker on loopback (executed by a wool virtualenv's Python).

Prints "ADDRESS PID" of the wool worker process once it serves, then waits
until that process exits (say, after a stop RPC) or this script gets SIGTERM
(then it stops the worker). Prints "exit CODE" last.
"""

import asyncio
import contextlib
import signal

from wool.runtime.worker.local import LocalWorker


async def main() -> None:
    worker = LocalWorker(host="127.0.0.1", port=0)
    await worker.start()
    process = worker._worker_process
    print(worker.address, process.pid, flush=True)
    done = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set)
    while not done.is_set() and process.is_alive():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 0.1)
    if process.is_alive():
        await worker.stop()
    print("exit", process.exitcode, flush=True)


if __name__ == "__main__":  # wool's worker process is spawned: the guard is required
    asyncio.run(main())
