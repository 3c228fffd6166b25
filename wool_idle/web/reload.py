"""Forced re-reads (SIGHUP, ``POST /-/reload``), coalesced, and the route serving them.

Each request for a re-read is answered by one that starts after it, but at
most one re-read runs and one waits: requests arriving while one waits share
it, so a burst of signals or POSTs costs two re-reads, not one per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

log = logging.getLogger(__name__)

Reread = Callable[[], Awaitable[str]]
"""One forced re-read of a daemon's files: why one did not load, in one line naming
it (each keeps its last good version), or ``""`` when all did."""


class Reloads:
    """The forced re-reads of ``reread``: at most one running and one pending."""

    def __init__(self, reread: Reread) -> None:
        self.reread = reread
        self._pending: asyncio.Future[str] | None = None
        self._running: asyncio.Task[None] | None = None
        self._closed = False

    def request(self) -> asyncio.Future[str]:
        """A re-read that starts after this call (shared with the requests that join
        it); its result is what ``reread`` answered (``""``: all loaded). Once
        closed, a future cancelled already: no re-read starts."""
        if self._closed:
            refused = asyncio.get_running_loop().create_future()
            refused.cancel()
            return refused
        if self._pending is None:
            self._pending = asyncio.get_running_loop().create_future()
            if self._running is None:
                self._running = asyncio.ensure_future(self._drain())
        return self._pending

    async def close(self) -> None:
        """Cancel a re-read in progress and the requests waiting for it, and start no
        more (at shutdown)."""
        self._closed = True
        if self._running is not None:
            self._running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._running

    async def _drain(self) -> None:
        try:
            while self._pending is not None:
                waiting, self._pending = self._pending, None
                try:
                    failure = await self.reread()
                except asyncio.CancelledError:
                    waiting.cancel()
                    raise
                except Exception as error:  # a fault, not a bad file: each keeps its last
                    log.exception("a forced re-read failed")
                    failure = f"{type(error).__name__}: {error}"
                waiting.set_result(failure)
        finally:
            self._running = None
            if self._pending is not None:  # cancelled with a request waiting
                self._pending.cancel()
                self._pending = None


def reload_handler(reloads: Reloads, name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of daemon ``name``: a forced re-read (off the event loop); 200 if
    all loaded, else 500 with the one line saying what did not, the last good
    versions kept; 503 if the daemon shuts down first (a re-read stalled in the file
    system must not hold the server's close). Register it for POST only: any other
    method is answered 405."""

    async def reload(request: web.Request) -> web.Response:
        try:
            failure = await asyncio.shield(reloads.request())
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the request itself
                raise
            raise web.HTTPServiceUnavailable(text=f"{name} shutting down\n") from None
        if not failure:
            return web.Response(text="OK\n")
        raise web.HTTPInternalServerError(text=f"failed to reload: {failure}\n")

    return reload
