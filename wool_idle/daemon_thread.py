"""A blocking call awaited from the event loop, run on a daemon thread of its own.

``asyncio.to_thread`` runs on the loop's default executor, whose threads
``asyncio.run`` waits for at exit: one call that takes days (bcrypt at cost 31,
a web config of thousands of users) would hold up SIGTERM. Nothing waits for a
daemon thread; its result, if the loop is gone by then, is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

Result = TypeVar("Result")


async def on_daemon_thread(name: str, call: Callable[[], Result]) -> Result:
    """``call()`` on a daemon thread named ``name``: its result, or what it raised."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Result] = loop.create_future()

    def settle(result: Result | None, error: BaseException | None) -> None:
        if outcome.done():  # the awaiting task was cancelled
            return
        if error is not None:
            outcome.set_exception(error)
        else:
            outcome.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        result: Result | None = None
        error: BaseException | None = None
        try:
            result = call()
        except StopIteration as raised:  # a future refuses it: it would never settle
            error = RuntimeError(f"{name} raised StopIteration")
            error.__cause__ = raised
        except BaseException as raised:  # delivered to the awaiting task, never lost
            error = raised
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await outcome
