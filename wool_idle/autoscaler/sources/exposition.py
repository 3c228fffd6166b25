"""Reading an exporter's ``/metrics``: Prometheus exposition text, read just now and
parsed on a thread (see ``source``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.sources.samples import SamplesByWorker, Values, keep_oldest
from wool_idle.autoscaler.sources.selector import Selector
from wool_idle.autoscaler.sources.source import DEFAULT_MAX_BYTES, SourceError, fetch
from wool_idle.contract import IDLE_SECONDS, IDLE_SUPPORTED, WORKER_LABEL


def parse_exposition(
    text: str, selectors: Sequence[Selector] = (), group_by: Sequence[str] = ()
) -> list[Reading]:
    """Readings from an exporter's exposition text; ``SourceError`` if unparsable.

    The exporter renders each sample when scraped, so an age is 0, unless the
    sample carries a timestamp (text from ``/federate``, a Pushgateway or a
    caching proxy): then it is now, by this host's clock, less that timestamp.
    A worker with no idle sample takes the age of its ``idle_supported`` one.
    Each reading's group is the values of its series' ``group_by`` labels. Only
    samples named as their family count: a summary's or histogram's ``_count``,
    ``_sum`` and ``_bucket`` (series of other names in Prometheus) are no value.
    """
    samples = SamplesByWorker(group_by)
    add, place = samples.add, samples.place  # bound once: a loop per sample
    stamped: dict[str, Values] = {IDLE_SECONDS: {}, IDLE_SUPPORTED: {}}
    now = time.time()
    try:
        for family in text_string_to_metric_families(text):
            values = samples.by_series.get(family.name)
            if values is None:
                continue
            ages = stamped.get(family.name)
            for sample in family.samples:
                if sample.name != family.name:  # a summary's or histogram's _count, _sum
                    continue
                labels = sample.labels
                worker = labels.get(WORKER_LABEL)
                if worker is None or (selectors and not all(s.matches(labels) for s in selectors)):
                    continue
                add(values, worker, sample.value)
                if sample.timestamp is not None and ages is not None:
                    keep_oldest(ages, worker, now - float(sample.timestamp))
                if group_by:
                    place(worker, labels)
    except Exception as error:  # the parser raises several types on bad input
        raise SourceError(f"malformed exposition text: {error}") from None
    samples.ages.update(stamped[IDLE_SUPPORTED])
    samples.ages.update(stamped[IDLE_SECONDS])
    return samples.readings(default_age=0.0)


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
        self.description = f"exporter {url}"

    async def read(self) -> list[Reading]:
        text = await fetch(
            self.session, self.url, {}, self.timeout, json_body=False, max_bytes=self.max_bytes
        )
        return await asyncio.to_thread(parse_exposition, text, self.selectors, self.group_by)
