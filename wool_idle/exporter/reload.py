"""Forced re-reads of the targets file (SIGHUP, ``POST /-/reload``), coalesced.

Each request for a re-read is answered by one that starts after it, but at
most one re-read runs and one waits: requests arriving while one waits share
it, so a burst of signals or POSTs costs two parses, not one per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from wool_idle.exporter.targets import TargetSet

log = logging.getLogger(__name__)


class Reloads:
    """The forced re-reads of ``targets``: at most one running and one pending."""

    def __init__(self, targets: TargetSet) -> None:
        self.targets = targets
        self._pending: asyncio.Future[bool] | None = None
        self._running: asyncio.Task[None] | None = None
        self._closed = False

    def request(self) -> asyncio.Future[bool]:
        """A re-read that starts after this call (shared with the requests that join
        it); its result is whether the targets are good (``TargetSet.refresh``).
        Once closed, a future cancelled already: no re-read starts."""
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
                    good = await self.targets.refresh(force=True)
                except asyncio.CancelledError:
                    waiting.cancel()
                    raise
                except Exception:  # a fault, not a bad file: the set stays as it was
                    log.exception("re-reading the targets file failed")
                    good = False
                waiting.set_result(good)
        finally:
            self._running = None
            if self._pending is not None:  # cancelled with a request waiting
                self._pending.cancel()
                self._pending = None


def reload_handler(reloads: Reloads) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler: re-read the targets file (off the event loop); 200 if it
    loaded, else 500 with the reason, the last good targets kept; 503 if the
    exporter shuts down first (a re-read stalled in the file system must not
    hold the server's close). Register it for POST only: any other method is
    answered 405."""

    async def reload(request: web.Request) -> web.Response:
        try:
            good = await asyncio.shield(reloads.request())
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the request itself
                raise
            raise web.HTTPServiceUnavailable(text="exporter shutting down\n") from None
        if good:
            return web.Response(text="OK\n")
        raise web.HTTPInternalServerError(text=f"failed to reload: {reloads.targets.failure}\n")

    return reload
