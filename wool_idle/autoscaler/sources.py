"""Where readings come from: an exporter's ``/metrics`` or a Prometheus server.

The parsers are pure and strict: a body they cannot read raises
``SourceError`` (so the daemon stops no one), and a value that is not a
finite number >= 0 becomes a reading with ``idle=None`` (never a candidate).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from wool_idle.autoscaler.policy import Reading

IDLE: Final = "wool_worker_idle_seconds"
UP: Final = "wool_worker_up"
SUPPORTED: Final = "wool_worker_idle_supported"
WORKER: Final = "worker"
_LABEL_NAME: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


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
        if not sep or not _LABEL_NAME.match(name) or name.startswith("__"):
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
class _Worker:
    idle: float | None = None
    has_idle: bool = False
    up: float | None = None
    supported: float | None = None
    age: float = 0.0
    alerting: bool = True


def _number(value: Any) -> float | None:
    """``value`` as a float if it is numeric text or a number, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number


def _readings(workers: Mapping[str, _Worker]) -> list[Reading]:
    return [
        Reading(
            worker=name,
            idle=w.idle
            if w.has_idle and w.idle is not None and math.isfinite(w.idle) and w.idle >= 0
            else None,
            up=w.up == 1.0,
            supported=w.supported == 1.0,
            age=w.age,
            alerting=w.alerting,
        )
        for name, w in sorted(workers.items())
    ]


def parse_exposition(text: str, selectors: Sequence[Selector] = ()) -> list[Reading]:
    """Readings from an exporter's exposition text; ``SourceError`` if unparsable."""
    workers: dict[str, _Worker] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                _absorb(workers, sample.name, sample.labels, sample.value, selectors)
    except Exception as error:  # the parser raises several types on bad input
        raise SourceError(f"malformed exposition text: {error}") from None
    return _readings(workers)


def _absorb(
    workers: dict[str, _Worker],
    name: str,
    labels: Mapping[str, str],
    value: Any,
    selectors: Sequence[Selector],
) -> None:
    if name not in (IDLE, UP, SUPPORTED) or WORKER not in labels:
        return
    if not all(s.matches(labels) for s in selectors):
        return
    worker = workers.setdefault(labels[WORKER], _Worker())
    number = _number(value)
    if name == IDLE:
        worker.idle, worker.has_idle = number, True
    elif name == UP:
        worker.up = number
    else:
        worker.supported = number


def query(selectors: Sequence[Selector]) -> str:
    """The PromQL instant query for every series the policy needs."""
    matchers = [f'__name__=~"{IDLE}|{UP}|{SUPPORTED}"', *(s.promql() for s in selectors)]
    return "{" + ",".join(matchers) + "}"


def age_query(selectors: Sequence[Selector]) -> str:
    """PromQL for the age of each idle sample (evaluation time minus sample time)."""
    matchers = ",".join(s.promql() for s in selectors)
    return f"time() - timestamp({IDLE}{{{matchers}}})"


def _vector(body: Any) -> list[tuple[Mapping[str, str], Any]]:
    """The (labels, value) pairs of an instant-vector API response, strictly checked."""
    if not isinstance(body, Mapping) or body.get("status") != "success":
        raise SourceError(f"query failed: {_error_text(body)}")
    data = body.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") != "vector":
        raise SourceError("query did not return an instant vector")
    result = data.get("result")
    if not isinstance(result, list):
        raise SourceError("query result is not a list")
    pairs = []
    for item in result:
        if not isinstance(item, Mapping):
            raise SourceError("query result item is not an object")
        labels, value = item.get("metric"), item.get("value")
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise SourceError("query result item has malformed labels")
        if not isinstance(value, list) or len(value) != 2:
            raise SourceError("query result item has a malformed value")
        pairs.append((labels, value[1]))
    return pairs


def _error_text(body: Any) -> str:
    if isinstance(body, Mapping):
        return str(body.get("error") or body.get("status") or "no status")[:200]
    return "response is not a JSON object"


def parse_query_responses(values: Any, ages: Any) -> list[Reading]:
    """Readings from the bodies of ``query`` and ``age_query``; ``SourceError`` if malformed."""
    workers: dict[str, _Worker] = {}
    for labels, value in _vector(values):
        name = labels.get("__name__", "")
        _absorb(workers, name, labels, value, ())
    for labels, value in _vector(ages):
        worker = workers.get(labels.get(WORKER, ""))
        age = _number(value)
        if worker is not None:
            worker.age = age if age is not None and math.isfinite(age) else math.inf
    return _readings(workers)


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
            worker = labels.get(WORKER)
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
