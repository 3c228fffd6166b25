"""Where readings come from: an exporter's ``/metrics`` or a Prometheus server.

The parsers are pure and strict: a body they cannot read raises
``SourceError`` (so the daemon stops no one), and a value that is not a
finite number >= 0 becomes a reading with ``idle=None`` (never a candidate).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from wool_idle.autoscaler.policy import Reading
from wool_idle.contract import (
    IDLE_SECONDS,
    IDLE_SUPPORTED,
    LABEL_NAME,
    UP,
    WORKER_LABEL,
    valid_idle,
)


class SourceError(Exception):
    """The source could not be read or answered something malformed."""


@dataclass(frozen=True)
class Selector:
    """A label matcher ``name=value`` that workers must carry to be considered."""

    name: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Parse ``name=value``; raise ``ValueError`` if the name is not a label name."""
        name, sep, value = text.partition("=")
        if not sep or not LABEL_NAME.match(name) or name.startswith("__"):
            raise ValueError(f"invalid selector {text!r}: expected label=value")
        return cls(name, value)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return labels.get(self.name) == self.value

    def promql(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}="{escaped}"'


class Source(Protocol):
    """Anything that yields this cycle's readings."""

    description: str

    async def read(self) -> list[Reading]: ...


@dataclass
class _Series:
    """Raw sample values by series name, then by worker (values not yet checked)."""

    values: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {IDLE_SECONDS: {}, UP: {}, IDLE_SUPPORTED: {}}
    )
    ages: dict[str, Any] = field(default_factory=dict)

    def readings(self) -> list[Reading]:
        """One reading per worker seen in any series."""
        idle, up, supported = (
            self.values[IDLE_SECONDS],
            self.values[UP],
            self.values[IDLE_SUPPORTED],
        )
        workers = dict.fromkeys([*up, *supported, *idle])
        return [
            Reading(
                worker=name,
                idle=_idle(idle.get(name)),
                up=_number(up.get(name)) == 1.0,
                supported=_number(supported.get(name)) == 1.0,
                age=_age(self.ages.get(name, 0.0)),
            )
            for name in workers
        ]


def _number(value: Any) -> float | None:
    """``value`` as a float if it is numeric text or a number, else None."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _idle(value: Any) -> float | None:
    """A usable idle value (finite, >= 0), else None."""
    number = _number(value)
    return number if valid_idle(number) else None


def _age(value: Any) -> float:
    number = _number(value)
    return number if number is not None and math.isfinite(number) else math.inf


def parse_exposition(text: str, selectors: Sequence[Selector] = ()) -> list[Reading]:
    """Readings from an exporter's exposition text; ``SourceError`` if unparsable."""
    series = _Series()
    try:
        for family in text_string_to_metric_families(text):
            table = series.values.get(family.name)
            if table is None:
                continue
            for sample in family.samples:
                labels = sample.labels
                if WORKER_LABEL in labels and all(s.matches(labels) for s in selectors):
                    table[labels[WORKER_LABEL]] = sample.value
    except Exception as error:  # the parser raises several types on bad input
        raise SourceError(f"malformed exposition text: {error}") from None
    return series.readings()


def query(selectors: Sequence[Selector]) -> str:
    """The PromQL instant query for every series the policy needs."""
    matchers = [
        f'__name__=~"{IDLE_SECONDS}|{UP}|{IDLE_SUPPORTED}"',
        *(s.promql() for s in selectors),
    ]
    return "{" + ",".join(matchers) + "}"


def age_query(selectors: Sequence[Selector]) -> str:
    """PromQL for the age of each idle sample (evaluation time minus sample time)."""
    matchers = ",".join(s.promql() for s in selectors)
    return f"time() - timestamp({IDLE_SECONDS}{{{matchers}}})"


def _vector(body: Any) -> list[tuple[dict[str, Any], Any]]:
    """The (labels, value) pairs of an instant-vector API response, strictly checked.

    Bodies come from ``json.loads``, so objects are exactly ``dict`` and arrays
    exactly ``list``; exact type checks keep this loop close to the parse floor.
    """
    if type(body) is not dict or body.get("status") != "success":
        raise SourceError(f"query failed: {_error_text(body)}")
    data = body.get("data")
    if type(data) is not dict or data.get("resultType") != "vector":
        raise SourceError("query did not return an instant vector")
    result = data.get("result")
    if type(result) is not list:
        raise SourceError("query result is not a list")
    pairs = []
    for item in result:
        labels = item.get("metric") if type(item) is dict else None
        value = item.get("value") if type(item) is dict else None
        if type(labels) is not dict or type(value) is not list or len(value) != 2:
            raise SourceError("query result item has malformed labels or value")
        pairs.append((labels, value[1]))
    return pairs


def _error_text(body: Any) -> str:
    if isinstance(body, Mapping):
        return str(body.get("error") or body.get("status") or "no status")[:200]
    return "response is not a JSON object"


def parse_query_responses(values: Any, ages: Any) -> list[Reading]:
    """Readings from the bodies of ``query`` and ``age_query``; ``SourceError`` if malformed."""
    series = _Series()
    tables = series.values.get  # bound once: this loop runs once per sample
    for labels, value in _vector(values):
        table = tables(labels.get("__name__"))  # type: ignore[arg-type]
        if table is None:
            continue
        worker = labels.get(WORKER_LABEL)
        if type(worker) is not str:
            raise SourceError(f"a sample without a string {WORKER_LABEL!r} label")
        table[worker] = value
    for labels, value in _vector(ages):
        worker = labels.get(WORKER_LABEL)
        if type(worker) is str:
            series.ages[worker] = value
    return series.readings()


def parse_alerts_response(body: Any, alert: str) -> set[str]:
    """Workers for which ``alert`` is firing, from ``/api/v1/alerts``."""
    if not isinstance(body, Mapping) or body.get("status") != "success":
        raise SourceError(f"alerts request failed: {_error_text(body)}")
    data = body.get("data")
    alerts = data.get("alerts") if isinstance(data, Mapping) else None
    if not isinstance(alerts, list):
        raise SourceError("alerts response has no alert list")
    firing = set()
    for item in alerts:
        if not isinstance(item, Mapping) or not isinstance(item.get("labels"), Mapping):
            raise SourceError("alerts response has a malformed alert")
        labels = item["labels"]
        if labels.get("alertname") == alert and item.get("state") == "firing":
            worker = labels.get(WORKER_LABEL)
            if isinstance(worker, str):
                firing.add(worker)
    return firing


class ExporterSource:
    """Reads an exporter's ``/metrics``."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: str,
        selectors: Sequence[Selector],
        timeout: float,
    ) -> None:
        self.session, self.url, self.selectors, self.timeout = session, url, selectors, timeout
        self.description = f"exporter {url}"

    async def read(self) -> list[Reading]:
        text = await _get(self.session, self.url, {}, self.timeout, json_body=False)
        return parse_exposition(text, self.selectors)


class PrometheusSource:
    """Reads a Prometheus server's HTTP API; with ``alert``, only workers whose
    alert fires are retirement candidates."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        selectors: Sequence[Selector],
        alert: str | None,
        timeout: float,
    ) -> None:
        self.session, self.base = session, base_url.rstrip("/")
        self.selectors, self.alert, self.timeout = selectors, alert, timeout
        self.description = f"prometheus {base_url}" + (f" alert {alert}" if alert else "")

    async def read(self) -> list[Reading]:
        url = f"{self.base}/api/v1/query"
        requests = [
            _get(self.session, url, {"query": query(self.selectors)}, self.timeout),
            _get(self.session, url, {"query": age_query(self.selectors)}, self.timeout),
        ]
        if self.alert is not None:
            requests.append(_get(self.session, f"{self.base}/api/v1/alerts", {}, self.timeout))
        bodies = await asyncio.gather(*requests)
        readings = parse_query_responses(bodies[0], bodies[1])
        if self.alert is None:
            return readings
        firing = parse_alerts_response(bodies[2], self.alert)
        return [replace(r, alerting=r.worker in firing) for r in readings]


async def _get(
    session: aiohttp.ClientSession,
    url: str,
    params: Mapping[str, str],
    timeout: float,
    *,
    json_body: bool = True,
) -> Any:
    """GET ``url``; the JSON body (or text), or ``SourceError`` for any failure."""
    try:
        async with session.get(
            url, params=params, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            if response.status != 200:
                raise SourceError(f"GET {url}: HTTP {response.status}")
            if json_body:
                return await response.json(content_type=None)
            return await response.text()
    except (aiohttp.ClientError, TimeoutError, ValueError, UnicodeDecodeError) as error:
        raise SourceError(f"GET {url}: {type(error).__name__}: {error}") from None
