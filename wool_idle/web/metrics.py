"""Rendering metrics the way the scraper asks, and the build info series."""

from __future__ import annotations

import platform

import grpc
from aiohttp import web
from prometheus_client import CollectorRegistry, Info
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from wool_idle import __version__
from wool_idle.contract import BUILD_INFO


def render_metrics(request: web.Request, collector: Collector) -> web.Response:
    """Render ``collector`` as text or OpenMetrics per ``Accept``, gzip per ``Accept-Encoding``."""
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    response = web.Response(body=encoder(collector))
    response.headers["Content-Type"] = content_type
    response.enable_compression()
    return response


def register_build_info(registry: CollectorRegistry) -> None:
    """Add ``wool_idle_build_info{version,python,grpc} 1`` to ``registry``."""
    info = Info(
        BUILD_INFO.removesuffix("_info"),
        "wool-idle's version and the Python and gRPC it runs on.",
        registry=registry,
    )
    info.info(
        {"version": __version__, "python": platform.python_version(), "grpc": grpc.__version__}
    )
