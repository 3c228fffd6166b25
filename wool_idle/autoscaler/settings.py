"""How the autoscaler process reads its source and runs its cycles. (The rule
is ``policy.PolicySettings``; how a stop is made, ``actuator.ActionSettings``.)
The command line reads its defaults from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from wool_idle.autoscaler.sources import ExporterSource, PrometheusSource, Selector, Source
from wool_idle.autoscaler.sources.source import DEFAULT_MAX_BYTES
from wool_idle.discovery.spec import DiscoverySpec
from wool_idle.web.site import AUTOSCALER_LISTEN, EXPORTER_METRICS_URL

if TYPE_CHECKING:
    import aiohttp


@dataclass(frozen=True, kw_only=True)
class SourceSettings:
    """Where the idle readings come from. Durations in seconds."""

    metrics_url: str = EXPORTER_METRICS_URL
    """An exporter's ``/metrics`` (read unless ``prometheus_url`` is set)."""
    prometheus_url: str | None = None
    """A Prometheus server's base URL, queried through its HTTP API."""
    selector: tuple[Selector, ...] = ()
    """Only workers whose series match every selector (``=``, ``!=``, ``=~``, ``!~``)."""
    alert: str | None = None
    """With ``prometheus_url``: only workers for which this alert fires."""
    source_timeout: float = 10.0
    """Deadline of one read of the source."""
    source_max_bytes: int = DEFAULT_MAX_BYTES
    """The largest body a read takes (after decompression); a larger one is a failed
    read."""

    def reader(
        self, session: aiohttp.ClientSession, group_by: tuple[str, ...], max_staleness: float
    ) -> Source:
        """The source these settings describe, read through ``session``; each reading
        keeps its ``group_by`` labels; ``max_staleness`` bounds the age of a Prometheus
        answer and of an ``alert`` sample."""
        limit = self.source_max_bytes
        if self.prometheus_url:
            return PrometheusSource(
                session,
                self.prometheus_url,
                self.selector,
                self.alert,
                self.source_timeout,
                group_by,
                alert_max_age=max_staleness,
                max_bytes=limit,
            )
        return ExporterSource(
            session, self.metrics_url, self.selector, self.source_timeout, group_by, max_bytes=limit
        )


@dataclass(frozen=True, kw_only=True)
class DaemonSettings:
    """The autoscaler process. Durations in seconds."""

    interval: float = 30.0
    """Time between cycles."""
    once: bool = False
    """Run one cycle and exit."""
    web_listen_address: str = AUTOSCALER_LISTEN
    """``host:port`` or ``unix:/path`` of ``/metrics`` and ``/decisions``."""
    state_file: str | None = None
    """Where the planner's marks of stops are kept across restarts (``state_file``);
    None keeps them in memory only."""
    wool_discovery: tuple[DiscoverySpec, ...] = ()
    """wool namespaces the stopped workers are published in: for ``local:`` ones a
    ``worker-dropped`` is published after each accepted stop (``lan:`` has no drop)."""
