"""A real worker draining one task for a stop another caller sent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from support.tasks import gated
from support.waiting import eventually_async
from wool_idle.worker import WorkerConnection


async def draining(
    start_server: Callable[[], Awaitable[Any]], gate: Path
) -> tuple[Any, WorkerConnection, asyncio.Future[Any], asyncio.Future[None]]:
    """A worker draining one task held until ``gate`` exists (a stop with a 30 s grace
    sent): the server, a connection to it, and the task's and the stop's calls. The
    caller touches ``gate`` and awaits both calls when done."""
    server = await start_server()
    connection = WorkerConnection(server.address)
    running = asyncio.ensure_future(connection.dispatch(gated, str(gate)))
    assert await eventually_async(lambda: len(server.service.in_flight) == 1)
    first_stop = asyncio.ensure_future(connection.stop(30.0))
    assert await eventually_async(server.service.stopping.is_set)
    return server, connection, running, first_stop
