"""Leaving: what is not a stop already sent never holds up the daemon's exit.

Once shutdown is asked for (SIGTERM, SIGINT), the daemon sends no more stops, so
what it does only to decide or confirm one is given up at once rather than waited
for: a read of a stalled source (``--source-timeout``), name lookups
(``identity``), the floor's questions (``floor_check``), a planned stop's
confirmation and the write that comes before it (``actuator``). Fail closed: no
stop follows work so cut. Stops already sent still end (``exit_wait``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["cut_short", "unless_leaving"]

log = logging.getLogger("wool_idle.autoscaler")

Result = TypeVar("Result")


async def unless_leaving(leaving: asyncio.Event | None, work: Awaitable[Result]) -> Result | None:
    """What ``work`` comes to (or raises), or None if ``leaving`` is set by the time it
    ended: ``work`` is then cancelled and waited for (set already, a coroutine's body
    never runs), or what it came to dropped (set in the turn of the loop it ended in:
    a stop confirmed then is not sent after the signal). ``work`` is cancelled too
    when this is. Without ``leaving``, ``work`` itself."""
    if leaving is None:
        return await work
    running = asyncio.ensure_future(work)
    left = asyncio.ensure_future(leaving.wait())
    cut = True
    try:
        if not leaving.is_set():  # set already: ``work`` never starts
            await asyncio.wait({running, left}, return_when=asyncio.FIRST_COMPLETED)
            cut = not running.done() or leaving.is_set()
    finally:
        left.cancel()
        if cut:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
    return None if cut else running.result()


def cut_short(what: str) -> bool:
    """Log that leaving cut ``what`` short, so no worker is stopped this cycle; True
    (nothing failed)."""
    log.info("shutting down: %s cut short, no worker stopped this cycle", what)
    return True
