"""The exporter's own series about the wool discoveries it follows.

Per discovery (label ``discovery="local:NS"``): ``wool_exporter_discovery_up``,
``wool_exporter_discovery_workers``, ``wool_exporter_discovery_errors_total{reason}``
(the reasons are ``FollowProblem``), ``wool_exporter_discovery_replacements_total``
(a ``local`` namespace created again by a new owner; always 0 for ``lan``) and
``wool_exporter_discovery_orphaned_workers`` (the workers listed right before the last
replacement not listed again since, for an hour at most: ``discovery.orphans``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from wool_idle.contract import (
    DISCOVERY_ERRORS,
    DISCOVERY_LABEL,
    DISCOVERY_ORPHANED,
    DISCOVERY_REPLACEMENTS,
    DISCOVERY_UP,
    DISCOVERY_WORKERS,
)
from wool_idle.discovery.attachment import FollowProblem
from wool_idle.discovery.follow import Follower


class DiscoveryCollector(Collector):
    """The exporter's series about the discoveries it follows."""

    def __init__(self, followers: Sequence[Follower]) -> None:
        self.followers = followers

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            DISCOVERY_UP,
            "1 while the exporter follows the wool discovery, 0 while it cannot.",
            labels=[DISCOVERY_LABEL],
        )
        workers = GaugeMetricFamily(
            DISCOVERY_WORKERS,
            "Workers the exporter takes from the wool discovery.",
            labels=[DISCOVERY_LABEL],
        )
        errors = CounterMetricFamily(
            DISCOVERY_ERRORS,
            "Failed attempts to follow the wool discovery, and records skipped, by reason.",
            labels=[DISCOVERY_LABEL, "reason"],
        )
        replacements = CounterMetricFamily(
            DISCOVERY_REPLACEMENTS,
            "Times the local namespace was created again by a new owner (its holder "
            "restarted) after the exporter attached to it; pools left on the old one "
            "are unlisted.",
            labels=[DISCOVERY_LABEL],
        )
        orphaned = GaugeMetricFamily(
            DISCOVERY_ORPHANED,
            "Workers the exporter listed right before the local namespace's last "
            "replacement (its holder restarted) and has not listed again since, pool by "
            "pool (tags): left on an old namespace, unlisted. 0 once all were, and an "
            "hour after it.",
            labels=[DISCOVERY_LABEL],
        )
        for each in self.followers:
            name = str(each.spec)
            up.add_metric([name], float(each.up))
            workers.add_metric([name], len(each.records))
            for problem in FollowProblem:
                errors.add_metric([name, problem.value], each.errors[problem])
            replacements.add_metric([name], each.replacements)
            orphaned.add_metric([name], each.orphans.count())
        yield from (up, workers, errors, replacements, orphaned)
