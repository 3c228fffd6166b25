"""``POST /-/reload``: what SIGHUP does, over HTTP (as Prometheus and its exporters do)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from wool_idle.exporter.targets import TargetSet


def reload_handler(targets: TargetSet) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler: re-read the targets file (off the event loop); 200 if it
    loaded, else 500 with the reason, the last good targets kept. Register it for
    POST only: any other method is answered 405."""

    async def reload(request: web.Request) -> web.Response:
        if await targets.refresh(force=True):
            return web.Response(text="OK\n")
        raise web.HTTPInternalServerError(text=f"failed to reload: {targets.failure}\n")

    return reload
