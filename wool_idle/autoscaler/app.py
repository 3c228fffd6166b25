"""The autoscaler's HTTP endpoints: ``/metrics``, ``/decisions``, ``POST /-/reload``
(every followed file read again now, as SIGHUP does), and the scaffold's ``/``,
``/-/healthy`` and ``/-/ready`` (ready once a read of the source has succeeded)."""

from __future__ import annotations

import html

from aiohttp import web
from prometheus_client import CollectorRegistry

from wool_idle.autoscaler.daemon import Autoscaler
from wool_idle.web.app import Landing, Readiness, create_base_app
from wool_idle.web.metrics import render_metrics
from wool_idle.web.reload import Reloads, reload_handler


def create_app(
    autoscaler: Autoscaler, registry: CollectorRegistry, readiness: Readiness, reloads: Reloads
) -> web.Application:
    """Serve ``registry`` and ``autoscaler``'s decision log; ``readiness`` answers
    ``/-/ready``; ``reloads`` are the re-reads ``POST /-/reload`` shares with SIGHUP."""

    async def metrics(request: web.Request) -> web.Response:
        return render_metrics(request, registry)

    async def decisions(request: web.Request) -> web.Response:
        """The decision log, newest last, as JSON."""
        return web.json_response([record.fields() for record in autoscaler.records])

    landing = Landing(
        title="wool-idle autoscaler",
        links=("/metrics", "/decisions"),
        body=lambda: f"<p>source: {html.escape(autoscaler.source.description)}</p>",
    )
    app = create_base_app(landing, readiness)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/decisions", decisions)
    app.router.add_post("/-/reload", reload_handler(reloads, "autoscaler"))
    return app
