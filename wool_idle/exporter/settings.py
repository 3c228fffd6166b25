"""How the exporter process runs: where it serves, where its targets come from,
how many idle RPCs it has in flight. (How one scrape budgets its time is
``app.ExporterSettings``.) The command line reads its defaults from here."""

from __future__ import annotations

from dataclasses import dataclass

from wool_idle.discovery.follow import DEFAULT_POLL_INTERVAL
from wool_idle.discovery.spec import DiscoverySpec
from wool_idle.exporter.connections import ADHOC_LIMIT
from wool_idle.web.site import EXPORTER_LISTEN


@dataclass(frozen=True, kw_only=True)
class DaemonSettings:
    """The exporter process. Durations in seconds."""

    web_listen_address: str = EXPORTER_LISTEN
    """``host:port`` or ``unix:/path`` of the HTTP endpoints."""
    target: tuple[str, ...] = ()
    """Workers to scrape, besides those of the targets file."""
    targets_file: str | None = None
    """A Prometheus file_sd JSON or YAML file of workers."""
    targets_refresh: float = 5.0
    """How often the targets file is checked for changes."""
    wool_discovery: tuple[DiscoverySpec, ...] = ()
    """wool discoveries whose workers are targets too (``local:NS``, ``lan:NS``)."""
    wool_discovery_poll_interval: float = DEFAULT_POLL_INTERVAL
    """How often a ``local`` namespace is read, and a failed discovery retried."""
    wool_discovery_lan_interface: tuple[str, ...] = ()
    """IP addresses of the interfaces ``lan`` discoveries use (default: all)."""
    concurrency: int = 256
    """Idle RPCs in flight at once in a fan-out."""
    probe_adhoc_limit: int = ADHOC_LIMIT
    """Targets outside the configured set that ``/probe`` keeps a connection to, and
    probes of such targets in flight at once (beyond it ``/probe`` answers 503)."""
