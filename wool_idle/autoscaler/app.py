"""The autoscaler's HTTP endpoints: ``/metrics``, ``/decisions``, ``/-/healthy``."""

from __future__ import annotations

import html

from aiohttp import web
from prometheus_client import CollectorRegistry

from wool_idle.autoscaler.daemon import Autoscaler
from wool_idle.endpoints import render_metrics


def create_app(autoscaler: Autoscaler, registry: CollectorRegistry) -> web.Application:
    """Serve ``registry`` and ``autoscaler``'s decision log."""

    async def metrics(request: web.Request) -> web.Response:
        return render_metrics(request, registry)

    async def decisions(request: web.Request) -> web.Response:
        """The decision log, newest last, as JSON."""
        return web.json_response([record.fields() for record in autoscaler.records])

    async def healthy(request: web.Request) -> web.Response:
        return web.Response(text="OK\n")

    async def landing(request: web.Request) -> web.Response:
        return web.Response(
            content_type="text/html",
            text="<!doctype html><title>wool-idle autoscaler</title><h1>wool-idle autoscaler</h1>"
            f"<p>source: {html.escape(autoscaler.source.description)}</p>"
            '<p><a href="/metrics">/metrics</a> · <a href="/decisions">/decisions</a> · '
            '<a href="/-/healthy">/-/healthy</a></p>',
        )

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/decisions", decisions)
    app.router.add_get("/-/healthy", healthy)
    app.router.add_get("/", landing)
    return app
