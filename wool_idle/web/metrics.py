"""Rendering metrics the way the scraper asks, and the build info series."""

from __future__ import annotations

import functools
import platform
from collections.abc import Callable
from typing import Final

import grpc
from aiohttp import web
from prometheus_client import CollectorRegistry, Info, PlatformCollector, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder, generate_latest
from prometheus_client.registry import Collector

from wool_idle import __version__
from wool_idle.contract import BUILD_INFO

GZIP_MIN_BYTES: Final = 4096
"""Bodies shorter than this are sent uncompressed: gzip saves a few hundred bytes on
them and costs more CPU than rendering them (one ``/probe`` answer is ~800 bytes)."""

Encoder = Callable[[Collector], bytes]

_TEXT_0_0_4_RANGES: Final = frozenset({"text/plain", "text/*", "*/*"})


def render_metrics(request: web.Request, collector: Collector) -> web.Response:
    """Render ``collector`` as ``encoder_for`` the request's ``Accept`` says, gzipped
    when its ``Accept-Encoding`` admits gzip (``accepts_gzip``) and the body is at
    least ``GZIP_MIN_BYTES``. The answer says that it varies with both headers
    (``Vary``), so a cache between scraper and daemon never serves one client's
    format or coding to another."""
    encoder, content_type = encoder_for(request.headers.get("Accept", ""))
    body = encoder(collector)
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    response.headers["Vary"] = "Accept, Accept-Encoding"
    if len(body) >= GZIP_MIN_BYTES and accepts_gzip(request.headers.get("Accept-Encoding", "")):
        response.enable_compression(web.ContentCoding.gzip)
    return response


@functools.lru_cache(maxsize=256)  # a scraper sends the same header every time
def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header admits gzip (RFC 9110, 12.5.3): named
    (``gzip`` or ``x-gzip``), or through ``*`` when gzip is not named, with a ``q``
    above 0. An empty header asks for no coding."""
    named: float | None = None
    wildcard: float | None = None
    for entry in accept_encoding.split(","):
        coding, *parameters = (part.strip() for part in entry.split(";"))
        weight = _weight(dict(_parameter(p) for p in parameters).get("q"))
        if coding.lower() in ("gzip", "x-gzip"):
            named = weight if named is None else max(named, weight)
        elif coding == "*":
            wildcard = weight
    chosen = named if named is not None else wildcard
    return chosen is not None and chosen > 0


def encoder_for(accept: str) -> tuple[Encoder, str]:
    """prometheus-client's text format 0.0.4 whenever ``accept`` allows it (it renders
    at half the cost of OpenMetrics, and Prometheus accepts it); otherwise what
    prometheus-client's ``choose_encoder`` picks (OpenMetrics for a client that
    asks for nothing else), unless it cannot read the version asked for (it raised)
    or would echo a version that is not printable ASCII in ``Content-Type``: then
    the text format 0.0.4, as Prometheus's Go libraries answer what they cannot.
    Names come out as ``escaping`` asks, as Prometheus's Go libraries write them."""
    if _allows_text_0_0_4(accept):
        return generate_latest, CONTENT_TYPE_PLAIN_0_0_4
    try:
        encoder, content_type = choose_encoder(accept)
    except (TypeError, ValueError):  # version=abc: it compares a str with an int
        return generate_latest, CONTENT_TYPE_PLAIN_0_0_4
    if not (content_type.isascii() and content_type.isprintable()):
        return generate_latest, CONTENT_TYPE_PLAIN_0_0_4
    if content_type.endswith("; escaping=values") and isinstance(encoder, functools.partial):
        # prometheus-client writes each OpenMetrics sample name values-escaped even when
        # it is legal (U__ prefixed; its TYPE line not: no sample in its family). Values
        # escaping leaves a legal name as it is, as underscores escaping does, and every
        # name of the daemons' is legal.
        encoder = functools.partial(encoder, escaping="underscores")
    return encoder, content_type


@functools.lru_cache(maxsize=256)  # a scraper sends the same header every time
def _allows_text_0_0_4(accept: str) -> bool:
    """Whether an ``Accept`` header (empty: anything) admits ``text/plain; version=0.0.4``."""
    if not accept.strip():
        return True
    for entry in accept.split(","):
        media_range, *parameters = (part.strip() for part in entry.split(";"))
        if media_range.lower() not in _TEXT_0_0_4_RANGES:
            continue
        values = dict(_parameter(p) for p in parameters)
        if values.get("version", "0.0.4") == "0.0.4" and _weight(values.get("q")) > 0:
            return True
    return False


def _parameter(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    return name.strip().lower(), value.strip().strip('"')


def _weight(text: str | None) -> float:
    """A ``q`` value; absent or unreadable counts as 1 (acceptable)."""
    if text is None:
        return 1.0
    try:
        return float(text)
    except ValueError:
        return 1.0


def process_registry() -> CollectorRegistry:
    """A new registry for a daemon's ``/metrics``, holding this process's process and
    platform collectors (``process_*``, ``python_info``)."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


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
