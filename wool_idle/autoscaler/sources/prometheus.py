"""Reading a Prometheus server's HTTP API, every query at one pinned time.

Up to four instant queries, all evaluated at the same time: the policy's
series; the age of each idle sample, or of an ``idle_supported`` 0 sample where
there is no idle one (evaluation time minus sample time), of a worker whose last
``up`` sample is 1; when an alert gates retirement, the age of that alert's
``ALERTS`` series in state firing, no older than ``alert_max_age`` (Prometheus
writes no staleness marker for a rule when it crashes or a rule is removed, so
an old ``ALERTS`` sample would be read as firing for the five minutes of its
lookback); and, with selectors and ``group_by``, the groups of every worker's
policy series, the selectors left out (``groups_query``): a worker the
selectors read in one pool and another job or exporter names in another is
``conflicting``, never stopped for the one pool while the other needs it.
``/api/v1/alerts`` is not used: it has no time parameter, so it could describe
another instant than the values. A worker missing from the age result has an
unknown age, which is stale.

The time is Prometheus's own: the policy's series are asked for at
Prometheus's now, and the other queries are pinned to the time that answer was
evaluated at. (Pinned to a clock running behind, every query would describe
the fleet as it was then, with ages that look fresh: a worker gone since would
still hold ``--min-workers``.) This host's clock only refuses: an answer
evaluated outside the read (from sending the query to its answer) by more
than ``CLOCK_TOLERANCE`` fails it: a cache between, which would answer the same
URL alike every cycle, or clocks apart. Every query carries ``nocache=1``:
Prometheus ignores it, and VictoriaMetrics then evaluates at the time asked
(its now, or the pinned time) rather than ``-search.latencyOffset`` (30 s)
before it, which would make every age 30 s too young.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

import aiohttp

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.sources.instant_vector import (
    evaluation_time,
    parse_alert_response,
    parse_query_responses,
    with_other_groups,
)
from wool_idle.autoscaler.sources.selector import (
    Selector,
    empty_hint,
    promql_string,
    selecting,
)
from wool_idle.autoscaler.sources.source import (
    CLOCK_TOLERANCE,
    DEFAULT_MAX_BYTES,
    SourceError,
    WrongPage,
    fetch,
)
from wool_idle.contract import IDLE_SECONDS, IDLE_SUPPORTED, UP, WORKER_LABEL
from wool_idle.logs import bounded, field_value

log = logging.getLogger("wool_idle.autoscaler")

EMPTY: Final = "does it scrape the exporter, and is the exporter up (WoolExporterDown)"
"""Why a Prometheus server lists no worker series: it does not scrape the exporter,
or the exporter is down and its series are stale."""
WRONG_PAGE: Final = "--prometheus-url is the server's base URL, such as http://prometheus:9090"
"""Said with a 404 or an HTML page from the query API: the URL names another page."""
NO_CACHE: Final = "1"
"""``nocache``: VictoriaMetrics evaluates at the time asked (Prometheus ignores it)."""


def series_query(selectors: Sequence[Selector]) -> str:
    """PromQL for every series the policy needs."""
    matchers = [
        f'__name__=~"{IDLE_SECONDS}|{UP}|{IDLE_SUPPORTED}"',
        *(s.promql() for s in selectors),
    ]
    return "{" + ",".join(matchers) + "}"


def age_query(selectors: Sequence[Selector]) -> str:
    """PromQL for the age of each worker's idle sample (evaluation time minus sample
    time), or, where it has none, of its ``idle_supported`` sample if that says 0 (a
    worker that predates the idle RPC: its answer is only as fresh as that sample),
    for the workers whose last ``up`` sample is 1 only.

    The age is read apart from the values (a scrape committed between the two
    queries, or a replica behind the same URL, may show a worker the value query
    read up and idle as down, or up with no idle value), so it is the age of a
    sample only a worker answering as read could have: ``idle_supported`` is
    written for a worker down (0) and for one answering no valid idle value (1)
    too, and its age alone must never make an earlier idle value fresh."""
    matchers = ",".join(s.promql() for s in selectors)
    supported = f"{IDLE_SUPPORTED}{{{matchers}}}"
    return (
        f"(time() - timestamp({IDLE_SECONDS}{{{matchers}}})"
        f" or (time() - timestamp({supported}) and {supported} == 0))"
        f" and {UP}{{{matchers}}} == 1"
    )


def groups_query(group_by: Sequence[str]) -> str:
    """PromQL for the groups (the values of ``group_by``) of every worker's policy
    series, the selectors left out: a worker the selectors read in one group may have
    series in another (two jobs or exporters naming it in two pools), which a read of
    the selected series alone would never see."""
    labels = ", ".join(dict.fromkeys([WORKER_LABEL, *group_by]))
    return f'count by ({labels}) ({{__name__=~"{IDLE_SECONDS}|{UP}|{IDLE_SUPPORTED}"}})'


def alert_query(alert: str, max_age: float) -> str:
    """PromQL for the age of each firing series of ``alert`` no older than ``max_age``
    seconds (the series keep the alert's labels, ``worker`` among them)."""
    series = f'ALERTS{{alertname={promql_string(alert)},alertstate="firing"}}'
    return f"time() - timestamp({series}) <= {max_age!r}"


class PrometheusSource:
    """Reads a Prometheus server's HTTP API; with ``alert``, only workers whose
    alert fires are retirement candidates, as an ``ALERTS`` sample no older than
    ``alert_max_age`` seconds says."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        selectors: Sequence[Selector],
        alert: str | None,
        timeout: float,
        group_by: Sequence[str] = (),
        *,
        alert_max_age: float,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.session, self.base = session, base_url.rstrip("/")
        self.selectors, self.alert, self.timeout = selectors, alert, timeout
        self.group_by, self.max_bytes = group_by, max_bytes
        self.alert_max_age = alert_max_age
        self.description = f"prometheus {base_url}{selecting(selectors)}" + (
            f" alert {alert}" if alert else ""
        )
        self.empty_hint = empty_hint(EMPTY, selectors)
        self._rule_checked = alert is None

    async def read(self) -> list[Reading]:
        """The policy's series at Prometheus's now, then the other queries pinned to
        the time they were evaluated at (see the module docstring)."""
        url, limit = f"{self.base}/api/v1/query", self.max_bytes
        if not self._rule_checked:  # before the read: it neither widens nor delays it
            await self._check_alert_rule()
        sent = time.time()
        try:
            values = await fetch(
                self.session,
                url,
                {"query": series_query(self.selectors), "nocache": NO_CACHE},
                self.timeout,
                max_bytes=limit,
            )
        except WrongPage as error:
            raise SourceError(f"{error} ({WRONG_PAGE})") from None
        at = await asyncio.to_thread(evaluation_time, values)
        if at is None:
            return []  # no series: no worker to read
        received = time.time()
        if not sent - CLOCK_TOLERANCE <= at <= received + CLOCK_TOLERANCE:
            raise SourceError(
                f"Prometheus evaluated the query at {at:.3f}, outside this read ({sent:.3f} "
                f"to {received:.3f}) by more than {CLOCK_TOLERANCE:g}s: a cached answer "
                "between, or this host's clock and Prometheus's apart (sync them)"
            )
        queries = [age_query(self.selectors)]
        if self.alert is not None:
            queries.append(alert_query(self.alert, self.alert_max_age))
        claimed = bool(self.selectors and self.group_by)  # groups outside the selection
        if claimed:
            queries.append(groups_query(self.group_by))
        pinned = repr(at)
        bodies = await asyncio.gather(
            *(
                fetch(
                    self.session,
                    url,
                    {"query": q, "time": pinned, "nocache": NO_CACHE},
                    self.timeout,
                    max_bytes=limit,
                )
                for q in queries
            )
        )
        readings = await asyncio.to_thread(parse_query_responses, values, bodies[0], self.group_by)
        if claimed:
            readings = await asyncio.to_thread(
                with_other_groups, readings, bodies[-1], self.group_by
            )
        if self.alert is None:
            return readings
        firing = parse_alert_response(bodies[1])
        return [replace(r, alerting=r.worker in firing) for r in readings]

    async def _check_alert_rule(self) -> None:
        """Warn, once, when the server has no alerting rule named ``alert``: a misspelt
        ``--alert`` matches no firing series, so no worker would ever be retired and
        nothing would say why. Never fails the read: a server that does not list its
        rules (a proxy allowing the query API only) is not checked."""
        self._rule_checked = True
        try:
            body = await fetch(
                self.session,
                f"{self.base}/api/v1/rules",
                {"type": "alert"},
                self.timeout,
                max_bytes=self.max_bytes,
            )
            names = {rule["name"] for group in body["data"]["groups"] for rule in group["rules"]}
        except (SourceError, LookupError, TypeError):
            return
        if self.alert not in names:
            log.warning(
                "prometheus %s has no alerting rule named %s: unless its ALERTS series come "
                "from elsewhere (federation, a remote ruler), no worker will be retired; is "
                "--alert spelt as the rule's name? (its alerts: %s)",
                self.base,
                field_value(self.alert),
                bounded(", ".join(sorted(map(str, names))) or "none"),
            )
