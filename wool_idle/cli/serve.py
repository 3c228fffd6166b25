"""Serve until a signal: the one run loop of the worker, the exporter and the autoscaler."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Final

EXIT_OK: Final = 0
EXIT_CANNOT_LISTEN: Final = 1


async def serve_until_signal(
    name: str,
    serving: contextlib.AbstractAsyncContextManager[str],
    wait: Callable[[], Awaitable[object]],
    *,
    stop: Callable[[], object],
    reload: Callable[[], object] | None = None,
) -> int:
    """Run daemon ``name`` until ``wait()`` returns.

    Entering ``serving`` binds and gives the address clients should use; once
    bound, that address is printed on one line of stdout (the ready line) and
    logged. While ``wait()`` runs, SIGTERM and SIGINT call ``stop``, which must
    make ``wait()`` return; SIGHUP calls ``reload`` when given. Leaving
    ``serving`` closes. Returns ``EXIT_OK``, or ``EXIT_CANNOT_LISTEN`` (logged)
    if ``serving`` could not bind.
    """
    log = logging.getLogger(f"wool_idle.{name}")
    loop = asyncio.get_running_loop()
    handlers = {signal.SIGTERM: stop, signal.SIGINT: stop}
    if reload is not None:
        handlers[signal.SIGHUP] = reload
    async with contextlib.AsyncExitStack() as stack:
        try:
            address = await stack.enter_async_context(serving)
        except (OSError, RuntimeError) as error:
            log.error("%s cannot listen: %s", name, error)
            return EXIT_CANNOT_LISTEN
        for signum, handler in handlers.items():
            loop.add_signal_handler(signum, handler)
            stack.callback(loop.remove_signal_handler, signum)
        log.info("%s serving on %s", name, address)
        print(address, flush=True)
        await wait()
    log.info("%s stopped", name)
    return EXIT_OK
