"""The routes every HTTP daemon of wool-idle serves, whatever else it adds:

- ``/``: a landing page with the daemon's links and what it wants to show;
- ``/-/healthy``: 200 while the process serves;
- ``/-/ready``: 200 once the daemon says it is ready, else 503 with the reason.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiohttp import web

Readiness = Callable[[], str | None]
"""Why the daemon is not ready yet, or None once it is."""
HEALTH_LINKS = ("/-/healthy", "/-/ready")


def _nothing() -> str:
    return ""


@dataclass(frozen=True, kw_only=True)
class Landing:
    """The landing page: a title, the daemon's own links, and a body (HTML, escaped
    by whoever builds it) made afresh on every request."""

    title: str
    links: Sequence[str]
    body: Callable[[], str] = field(default=_nothing)

    def render(self) -> str:
        """The page as HTML."""
        title = html.escape(self.title)
        links = " · ".join(
            f'<a href="{html.escape(path, quote=True)}">{html.escape(path)}</a>'
            for path in (*self.links, *HEALTH_LINKS)
        )
        return (
            f"<!doctype html><html><head><title>{title}</title></head><body>"
            f"<h1>{title}</h1><p>{links}</p>{self.body()}</body></html>"
        )


def create_base_app(landing: Landing, readiness: Readiness) -> web.Application:
    """An application serving ``/``, ``/-/healthy`` and ``/-/ready``; add the rest."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=landing.render(), content_type="text/html")

    async def healthy(request: web.Request) -> web.Response:
        return web.Response(text="OK\n")

    async def ready(request: web.Request) -> web.Response:
        reason = readiness()
        if reason is not None:
            raise web.HTTPServiceUnavailable(text=f"{reason}\n")
        return web.Response(text="OK\n")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/-/healthy", healthy)
    app.router.add_get("/-/ready", ready)
    return app
