"""Serve until a signal: the one run loop of the worker, the exporter and the autoscaler."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Final

EXIT_OK: Final = 0
EXIT_CANNOT_LISTEN: Final = 1


def ignore_hangup() -> None:
    """Ignore SIGHUP until ``serve_until_signal`` handles it. ``main`` calls this for
    the daemons before they read their files, so that a reload asked for while
    one starts (logrotate, ``systemctl reload``) does not end it: starting reads
    everything anyway."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


async def serve_until_signal(
    name: str,
    serving: contextlib.AbstractAsyncContextManager[str],
    wait: Callable[[], Awaitable[object]],
    *,
    stop: Callable[[], object],
    reload: Callable[[], object] | None = None,
) -> int:
    """Run daemon ``name`` until ``wait()`` returns.

    The signal handlers are installed first and stay until ``serving`` has
    closed, so that no signal during start or shutdown has its default effect
    (ending the process, with the tasks in flight): SIGTERM and SIGINT call
    ``stop``, which must make ``wait()`` return (at once if it comes before);
    SIGHUP calls ``reload``, or, without one, is logged and ignored. Entering
    ``serving`` binds and gives the address clients should use; once bound,
    that address is printed on one line of stdout (the ready line) and logged;
    a stdout nobody reads any more (a closed pipe) is logged (``print_ready``).
    Returns ``EXIT_OK``, or ``EXIT_CANNOT_LISTEN`` (logged) if ``serving``
    could not bind. The handlers of before are restored on return.
    """
    log = logging.getLogger(f"wool_idle.{name}")
    loop = asyncio.get_running_loop()

    def nothing_to_reload() -> None:
        log.info("%s: SIGHUP ignored, nothing to reload", name)

    handlers = {
        signal.SIGTERM: stop,
        signal.SIGINT: stop,
        signal.SIGHUP: reload if reload is not None else nothing_to_reload,
    }
    async with contextlib.AsyncExitStack() as stack:
        for signum, handler in handlers.items():
            before = signal.getsignal(signum)
            stack.callback(signal.signal, signum, signal.SIG_DFL if before is None else before)
            loop.add_signal_handler(signum, handler)
            stack.callback(loop.remove_signal_handler, signum)
        try:
            address = await stack.enter_async_context(serving)
        except (OSError, RuntimeError) as error:
            log.error("%s cannot listen: %s", name, error)
            return EXIT_CANNOT_LISTEN
        log.info("%s serving on %s", name, address)
        print_ready(address, log)
        await wait()
    log.info("%s stopped", name)
    return EXIT_OK


def print_ready(address: str, log: logging.Logger) -> None:
    """Print the ready line. A stdout that cannot take it (a pipe whose reader
    exited) is logged and pointed at ``/dev/null`` from then on: never the end
    of the daemon, at once or when the interpreter flushes stdout as it exits."""
    try:
        print(address, flush=True)
    except OSError as error:
        log.warning("ready line not printed (stdout: %s)", error)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
