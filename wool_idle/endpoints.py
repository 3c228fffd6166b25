"""HTTP plumbing shared by the exporter and the autoscaler: serving an aiohttp
app on ``host:port`` and rendering a collector the way the scraper asks."""

from __future__ import annotations

from typing import Final

from aiohttp import web
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from wool_idle.basicauth import BasicAuth
from wool_idle.webconfig import WebConfig

EXPORTER_PORT: Final = 9478
AUTOSCALER_PORT: Final = 9479
"""Default HTTP ports. They clash with none of Prometheus 9090, Alertmanager 9093,
node_exporter 9100, blackbox_exporter 9115 and OpenTelemetry 9464."""
EXPORTER_METRICS_URL: Final = f"http://127.0.0.1:{EXPORTER_PORT}/metrics"
"""Where the autoscaler reads by default: the exporter's default address."""


def render_metrics(request: web.Request, collector: Collector) -> web.Response:
    """Render ``collector`` as text or OpenMetrics per ``Accept``, gzip per ``Accept-Encoding``."""
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    response = web.Response(body=encoder(collector))
    response.headers["Content-Type"] = content_type
    response.enable_compression()
    return response


async def start_site(
    app: web.Application, listen: str, config: WebConfig | None = None
) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on ``listen`` (``host:port``, port 0 for any) with the TLS and
    basic auth of ``config``; return the runner and the base URL
    (``http(s)://host:port``). Raises ``OSError`` if the address cannot be bound."""
    config = config or WebConfig()
    if config.users:
        app.middlewares.append(BasicAuth(config.users).middleware)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, _, port = listen.rpartition(":")
    site = web.TCPSite(runner, host.strip("[]"), int(port), ssl_context=config.ssl_context)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    scheme = "https" if config.ssl_context else "http"
    return runner, f"{scheme}://{_bound(runner, listen)}"


def _bound(runner: web.AppRunner, requested: str) -> str:
    for address in runner.addresses:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return requested
