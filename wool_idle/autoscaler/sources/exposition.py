"""Reading an exporter's ``/metrics``: Prometheus exposition text, read just now and
parsed on a thread (see ``source``)."""

from __future__ import annotations

import asyncio
import io
import logging
import math
import time
from collections.abc import Iterator, Sequence
from typing import Final, TextIO, cast

import aiohttp
from prometheus_client.parser import text_fd_to_metric_families

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.sources.pushed import PUSH_TIME, PushTimes, age_since
from wool_idle.autoscaler.sources.samples import SamplesByWorker, Values, keep_oldest
from wool_idle.autoscaler.sources.selector import Selector, empty_hint, selecting
from wool_idle.autoscaler.sources.source import (
    DEFAULT_MAX_BYTES,
    SourceError,
    WrongPage,
    fetch_text,
)
from wool_idle.contract import IDLE_SECONDS, IDLE_SUPPORTED, NAMESPACE_LABEL, WORKER_LABEL

log = logging.getLogger("wool_idle.autoscaler")

MAX_LINE: Final = 64 * 1024
"""The longest line of exposition text read, in characters (newline included). The
parser's time grows with the square of a line's length (64 MiB of escaped quotes in
one label value: hours); capped, a body costs at most a few times a normal one."""

EMPTY: Final = (
    "is it the exporter's /metrics, not /metrics/exporter, or a Prometheus server that scrapes it"
)
"""What an exposition text without worker series most likely is: another page."""
WRONG_PAGE: Final = (
    "--metrics-url is the exporter's /metrics, such as http://127.0.0.1:9478/metrics"
)
"""Said with a 404 or an HTML page: the URL names another page."""

ERROR_TEXT: Final = 200
"""Characters of the parser's error message a ``SourceError`` keeps."""


def parse_exposition(
    text: str,
    selectors: Sequence[Selector] = (),
    group_by: Sequence[str] = (),
    *,
    age: float = 0.0,
) -> list[Reading]:
    """Readings from an exporter's exposition text; ``SourceError`` if unparsable.

    The exporter renders each sample when scraped, so an age is 0, unless the
    sample carries a timestamp (text from ``/federate`` or a caching proxy):
    then it is now, by this host's clock, less that timestamp (a timestamp ahead of
    now by more than ``CLOCK_TOLERANCE``, this host's clock set back, is of unknown
    age: stale, never fresh). In text with a
    ``push_time_seconds`` family (a Pushgateway's, whose samples carry none) an
    unstamped sample is at least as old as its group's last push (``pushed``).
    No sample is younger than ``age``, the answer's own (``answer_age``: a cache
    serving text it has held, timestamps or not, serves it that old).
    A worker with no idle sample takes the age of its ``idle_supported`` one.
    Each reading's namespaces are the ``wool_namespace`` values of its selected series.
    Each reading's group is the values of its series' ``group_by`` labels, the
    series ``selectors`` leave out included: a worker they read in one group and
    other series name in another is conflicting. Only
    samples named as their family count: a summary's or histogram's ``_count``,
    ``_sum`` and ``_bucket`` (series of other names in Prometheus) are no value.
    A line longer than ``MAX_LINE`` is a ``SourceError``.
    """
    samples = SamplesByWorker(group_by)
    add, place, namespaced = samples.add, samples.place, samples.name_namespace  # bound once
    stamped: dict[str, Values] = {IDLE_SECONDS: {}, IDLE_SUPPORTED: {}}
    now = time.time()
    pushed = PushTimes() if PUSH_TIME in text else None
    try:
        for family in text_fd_to_metric_families(cast(TextIO, _lines(text))):
            values = samples.by_series.get(family.name)
            if values is None:
                if pushed is not None and family.name == PUSH_TIME:
                    pushed.add_groups(family.samples)
                continue
            ages = stamped.get(family.name)
            for sample in family.samples:
                if sample.name != family.name:  # a summary's or histogram's _count, _sum
                    continue
                labels = sample.labels
                worker = labels.get(WORKER_LABEL)
                if worker is None:
                    continue
                if group_by:  # the selectors left out: in another group too, conflicting
                    place(worker, labels)
                if selectors and not all(s.matches(labels) for s in selectors):
                    continue
                add(values, worker, sample.value)
                if NAMESPACE_LABEL in labels:  # a call per sample only where one is named
                    namespaced(worker, labels)
                if sample.timestamp is not None and ages is not None:
                    since = age_since(float(sample.timestamp), now)
                    keep_oldest(ages, worker, None if since is None else max(since, age))
                if pushed is not None and sample.timestamp is None:
                    pushed.note(worker, labels)
    except Exception as error:  # the parser raises several types on bad input
        # The parser's message quotes the whole bad line: kept short for the log.
        raise SourceError(f"malformed exposition text: {str(error)[:ERROR_TEXT]}") from None
    samples.ages.update(stamped[IDLE_SUPPORTED])
    samples.ages.update(stamped[IDLE_SECONDS])
    if pushed is not None and pushed.found:
        for worker, since_push in pushed.ages(now).items():
            keep_oldest(samples.ages, worker, None if since_push is None else max(since_push, age))
    return samples.readings(default_age=age)


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text``, as the parser reads them; ``ValueError`` at one longer
    than ``MAX_LINE``."""
    for line in io.StringIO(text):
        if len(line) > MAX_LINE:
            raise ValueError(f"a line longer than {MAX_LINE} characters")
        yield line


class ExporterSource:
    """Reads an exporter's ``/metrics``."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: str,
        selectors: Sequence[Selector],
        timeout: float,
        group_by: Sequence[str] = (),
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.session, self.url, self.selectors, self.timeout = session, url, selectors, timeout
        self.group_by, self.max_bytes = group_by, max_bytes
        self.description = f"exporter {url}{selecting(selectors)}"
        self.empty_hint = empty_hint(EMPTY, selectors)

    async def read(self) -> list[Reading]:
        try:
            text, age = await fetch_text(
                self.session, self.url, self.timeout, max_bytes=self.max_bytes
            )
        except WrongPage as error:
            raise SourceError(f"{error} ({WRONG_PAGE})") from None
        if age > 0:  # said only by an Age header or a Date past the tolerance
            log.warning(
                "%s answered %s by its Age or Date header (a cache between, or clocks "
                "apart): every sample is at least that old",
                self.url,
                f"{age:.0f} s old" if math.isfinite(age) else "of unknown age",
            )
        return await asyncio.to_thread(
            parse_exposition, text, self.selectors, self.group_by, age=age
        )
