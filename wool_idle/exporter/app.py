"""The exporter's HTTP endpoints (aiohttp).

``/metrics`` fans out over every target; ``/probe?target=`` asks one worker
(blackbox_exporter's multi-target pattern; ``&debug=true`` shows its steps);
``/metrics/exporter`` has the exporter's own series only and asks no worker (what a
``/probe``-only Prometheus scrapes to know the exporter is up, as blackbox_exporter's
``/metrics``);
``/sd`` lists the targets for Prometheus's HTTP service discovery;
``POST /-/reload`` re-reads the targets file; ``/`` is a landing page;
``/-/healthy`` and ``/-/ready`` are for orchestrators.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Final
from urllib.parse import quote

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from wool_idle.exporter.collector import ExporterCollector, ProbeCollector
from wool_idle.exporter.probe import AdhocProbesBusy, Prober, ProbeResult
from wool_idle.exporter.probe_debug import debug_probe
from wool_idle.exporter.reload import targets_reloads
from wool_idle.exporter.sd import POOL_PARAM, add_sd_route
from wool_idle.exporter.target import Target
from wool_idle.exporter.targets import TargetSet
from wool_idle.web.app import Landing, create_base_app
from wool_idle.web.metrics import render_metrics
from wool_idle.web.reload import Reloads, reload_handler
from wool_idle.worker.address import parse_address

SCRAPE_TIMEOUT_HEADER: Final = "X-Prometheus-Scrape-Timeout-Seconds"


@dataclass(frozen=True, kw_only=True)
class ExporterSettings:
    """How the endpoints budget their fan-out."""

    timeout: float = 5.0
    """Upper bound of one worker's idle RPC, and of a scrape without the header."""
    timeout_offset: float = 0.5
    """Subtracted from Prometheus's scrape timeout so the response arrives in time;
    never more than half of that timeout (``scrape_budget``)."""


class _CollectorChain(Collector):
    """Collects from several collectors in order (one rendering, fresh families)."""

    def __init__(self, *collectors: Collector) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


def scrape_budget(request: web.Request, settings: ExporterSettings) -> float:
    """Seconds this scrape may spend: ``timeout``, or less if Prometheus says so.

    Prometheus's announced scrape timeout less ``timeout_offset``, where the offset
    takes at most half of the announced timeout: a short ``scrape_timeout`` (at or
    below the offset) still leaves the workers half of it, never nothing. A header
    that is no plain ASCII number (Python's ``float`` also reads ``1_0`` and other
    scripts' digits) counts as absent.
    """
    header = request.headers.get(SCRAPE_TIMEOUT_HEADER, "")
    try:
        announced = float(header) if header.isascii() and "_" not in header else math.inf
    except ValueError:
        announced = math.inf
    if not math.isfinite(announced) or announced <= 0:
        return settings.timeout
    offset = min(settings.timeout_offset, announced / 2)
    return min(settings.timeout, announced - offset)


def create_app(
    targets: TargetSet,
    prober: Prober,
    registry: CollectorRegistry,
    settings: ExporterSettings,
    reloads: Reloads | None = None,
) -> web.Application:
    """The exporter application; ``registry`` holds the process-wide collectors
    (process, platform) and gets the exporter's own collector added. ``reloads``
    are the re-reads ``POST /-/reload`` shares with SIGHUP (new ones if None)."""
    registry.register(ExporterCollector(prober, targets))
    prober.configure(targets.all())
    landing = Landing(
        title="wool-idle exporter",
        links=("/metrics", "/metrics/exporter", "/sd"),
        body=lambda: targets_table(targets.all(), prober.last),
    )
    app = create_base_app(landing, readiness=lambda: _not_ready(targets))

    async def metrics(request: web.Request) -> web.Response:
        results = await prober.fan_out(targets.all(), scrape_budget(request, settings))
        return render_metrics(request, _CollectorChain(ProbeCollector(results), registry))

    async def own_metrics(request: web.Request) -> web.Response:
        return render_metrics(request, registry)

    async def probe(request: web.Request) -> web.Response:
        raw = request.query.get("target")
        if not raw:
            raise web.HTTPBadRequest(text="missing 'target' parameter (host:port or unix:/path)\n")
        try:
            address = parse_address(raw)
        except ValueError as error:
            raise web.HTTPBadRequest(text=f"{error}\n") from None
        prober.configure(targets.all())  # the same list until the targets change
        configured = targets.get(address)
        target = configured or Target(address)
        held = request.query.get(POOL_PARAM)
        if held is not None and (configured is None or configured.pool_digest() != held):
            target = replace(target, regrouped=True)  # Prometheus's labels are outdated
        budget = scrape_budget(request, settings)
        try:
            if request.query.get("debug") == "true":
                return await debug_probe(prober, target, budget, configured=configured is not None)
            result = await prober.probe_adhoc(target, time.monotonic() + budget)
        except AdhocProbesBusy as error:
            raise web.HTTPServiceUnavailable(
                text=f"too many probes of unconfigured targets in flight ({error})\n"
            ) from None
        return render_metrics(request, ProbeCollector([result]))

    app.router.add_get("/metrics", metrics)
    app.router.add_get("/metrics/exporter", own_metrics)
    app.router.add_get("/probe", probe)
    add_sd_route(app, targets)
    reloads = reloads or targets_reloads(targets)
    app.router.add_post("/-/reload", reload_handler(reloads, "exporter"))
    return app


def _not_ready(targets: TargetSet) -> str | None:
    return targets.unloaded


def targets_table(targets: list[Target], last: dict[str, ProbeResult]) -> str:
    """The landing page's table: each target with its last known state."""
    rows = []
    for target in targets:
        result = last.get(target.address)
        state = _state(result)
        link = html.escape(f"/probe?target={quote(target.address, safe=':/')}", quote=True)
        rows.append(
            f'<tr><td><a href="{link}">{html.escape(target.address)}</a></td>'
            f"<td>{html.escape(state)}</td></tr>"
        )
    return f"<table><tr><th>worker</th><th>last state</th></tr>{''.join(rows)}</table>"


def _state(result: ProbeResult | None) -> str:
    if result is None:
        return "not scraped yet"
    if result.idle is not None:
        return "busy" if result.idle == 0 else f"idle {result.idle:.1f}s"
    return f"no idle value ({result.error.value if result.error else 'unknown'})"
