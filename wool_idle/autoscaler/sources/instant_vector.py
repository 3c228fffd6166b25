"""The Prometheus HTTP API's instant-vector answers, read strictly.

A body is an instant vector (``status`` success, ``resultType`` vector, a list
of samples with a ``metric`` object and a two-item ``value``) or a
``SourceError`` that says why not (for a failed query, what the body says about
itself). A values sample needs a string ``__name__`` and, in one of the
policy's series, a string ``worker`` label; an age sample needs a string
``worker`` label; an alert or groups sample without a ``worker`` label names no
one. A sample value that is not a numeric string is no value. Pure: no I/O,
nothing kept between calls.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, Final

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.sources.samples import SamplesByWorker, keep_oldest
from wool_idle.autoscaler.sources.source import SourceError
from wool_idle.contract import NAMESPACE_LABEL, WORKER_LABEL

_NO_WORKER: Final = f"a sample without a string {WORKER_LABEL!r} label"


def parse_query_responses(values: Any, ages: Any, group_by: Sequence[str] = ()) -> list[Reading]:
    """Readings from the bodies of ``series_query`` and ``age_query``; each reading's
    group is the values of its series' ``group_by`` labels, its namespaces the
    ``wool_namespace`` values of its series.

    ``SourceError`` if either is not an instant vector whose samples carry a
    string ``__name__`` (values) and a string ``worker`` label, or if a
    ``group_by`` label's value is not a string.
    """
    samples = SamplesByWorker(group_by)
    series_of, add, place = samples.by_series.get, samples.add, samples.place  # bound once
    namespaced = samples.name_namespace
    for labels, value in _samples(values):
        name = labels.get("__name__")
        if type(name) is not str:
            raise SourceError("a sample without a string __name__")
        series = series_of(name)
        if series is not None:
            worker = labels.get(WORKER_LABEL)  # _worker, inlined: this loop runs per sample
            if type(worker) is not str:
                raise SourceError(_NO_WORKER)
            add(series, worker, _number(value))
            if NAMESPACE_LABEL in labels:  # a call per sample only where one is named
                namespaced(worker, labels)
            if group_by:
                try:
                    place(worker, labels)
                except TypeError as error:
                    raise SourceError(str(error)) from None
    for labels, value in _samples(ages):
        worker = labels.get(WORKER_LABEL)
        if type(worker) is not str:
            raise SourceError(_NO_WORKER)
        keep_oldest(samples.ages, worker, _number(value))
    return samples.readings(default_age=math.inf)


def with_other_groups(readings: list[Reading], body: Any, group_by: Sequence[str]) -> list[Reading]:
    """``readings``, each of a worker with series in another group than its reading's
    (or in none) in the body of ``groups_query`` made ``conflicting``: which pool it
    is in is unknown. A series there without a ``worker`` label (outside the
    selection: another job's) names no one. ``SourceError`` as for the values."""
    claims: dict[str, set[tuple[str, ...]]] = {}
    for labels, _ in _samples(body):
        if WORKER_LABEL not in labels:
            continue
        group = tuple(labels.get(name, "") for name in group_by)
        if not all(type(value) is str for value in group):
            raise SourceError(f"a non-string value for a label of {', '.join(group_by)}")
        claims.setdefault(_worker(labels), set()).add(group)
    return [
        replace(r, conflicting=True) if claims.get(r.worker) != {r.group} else r for r in readings
    ]


def evaluation_time(body: Any) -> float | None:
    """The time an instant-vector answer was evaluated at (every sample carries it as
    its timestamp), or None when it has no sample. ``SourceError`` unless the first
    sample's is a finite number (the samples themselves are checked when parsed)."""
    result = _result(body)
    if not result:
        return None
    value = result[0].get("value") if type(result[0]) is dict else None
    at = value[0] if type(value) is list and value else None
    try:
        seconds = float(at) if isinstance(at, int | float) and type(at) is not bool else math.nan
    except OverflowError:  # a JSON integer too large for a float
        seconds = math.nan
    if not math.isfinite(seconds):
        raise SourceError("query result sample has no finite evaluation time")
    return seconds


def parse_alert_response(body: Any) -> set[str]:
    """Workers whose ``alert_query`` series is present, from its body."""
    return {_worker(labels) for labels, _ in _samples(body) if WORKER_LABEL in labels}


def _samples(body: Any) -> Iterator[tuple[dict[str, Any], Any]]:
    """The (labels, value) pairs of an instant-vector API response, strictly checked.

    Bodies come from ``json.loads``, so objects are exactly ``dict`` and arrays
    exactly ``list``; exact type checks keep this loop close to the parse floor.
    """
    malformed = "query result item has malformed labels or value"
    for item in _result(body):
        if type(item) is not dict:
            raise SourceError(malformed)
        labels, value = item.get("metric"), item.get("value")
        if type(labels) is not dict or type(value) is not list or len(value) != 2:
            raise SourceError(malformed)
        yield labels, value[1]


def _result(body: Any) -> list[Any]:
    """The result list of an instant-vector API response; ``SourceError`` for a failed
    query or another shape."""
    if type(body) is not dict or body.get("status") != "success":
        raise SourceError(f"query failed: {_error_text(body)}")
    data = body.get("data")
    if type(data) is not dict or data.get("resultType") != "vector":
        raise SourceError("query did not return an instant vector")
    result = data.get("result")
    if type(result) is not list:
        raise SourceError("query result is not a list")
    return result


def _worker(labels: dict[str, Any]) -> str:
    worker = labels.get(WORKER_LABEL)
    if type(worker) is not str:
        raise SourceError(_NO_WORKER)
    return worker


def _number(value: Any) -> float | None:
    """A sample value (the API sends numbers as strings) as a float, else None."""
    if type(value) is not str:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _error_text(body: Any) -> str:
    """What a failed response says about itself, briefly."""
    if type(body) is not dict:
        return "response is not a JSON object"
    for key in ("error", "status"):
        if type(text := body.get(key)) is str and text:
            return text[:200]
    return "no status"
