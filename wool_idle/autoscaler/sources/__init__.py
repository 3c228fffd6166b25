"""Where readings come from: an exporter's ``/metrics`` or a Prometheus server.

Each source's ``read`` returns one reading per worker or raises
``SourceError`` and nothing else (so the daemon stops no one). The parsers are
pure and strict: a body they cannot read is a ``SourceError``; a value that is
not a finite number >= 0 becomes a reading with ``idle=None``; duplicate
series that disagree make the worker's reading conflicting.
"""

from __future__ import annotations

from wool_idle.autoscaler.sources.exposition import ExporterSource, parse_exposition
from wool_idle.autoscaler.sources.instant_vector import parse_alert_response, parse_query_responses
from wool_idle.autoscaler.sources.prometheus import (
    PrometheusSource,
    age_query,
    alert_query,
    series_query,
)
from wool_idle.autoscaler.sources.selector import Selector
from wool_idle.autoscaler.sources.source import Source, SourceError

__all__ = [
    "ExporterSource",
    "PrometheusSource",
    "Selector",
    "Source",
    "SourceError",
    "age_query",
    "alert_query",
    "parse_alert_response",
    "parse_exposition",
    "parse_query_responses",
    "series_query",
]
