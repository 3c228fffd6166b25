"""Metric families built fresh from one fan-out's results (custom collectors).

Series (label ``worker`` is the target address as configured, plus any
labels from the targets file, or ``wool_namespace`` and ``wool_tags`` for a
worker found through wool's discovery):

- ``wool_worker_idle_seconds`` only for a worker that answered a valid value (and
  whose pool is known: ``outcome``);
- ``wool_worker_up``, ``wool_worker_idle_supported``,
  ``wool_worker_probe_duration_seconds`` for every target;
- ``wool_worker_info`` (1) for every target found through wool's discovery,
  with its volatile facts as labels too;
- the exporter's own: ``wool_exporter_probe_errors_total{reason}``,
  ``wool_exporter_targets``, ``wool_exporter_scrape_duration_seconds``,
  ``wool_exporter_targets_reload_success``,
  ``wool_exporter_targets_reload_timestamp_seconds``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from wool_idle.contract import IDLE_SECONDS, IDLE_SUPPORTED, PROBE_DURATION, UP, WORKER_INFO
from wool_idle.exporter.outcome import ErrorReason, ProbeResult
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.targets import TargetSet


def _gauge(
    name: str, documentation: str, samples: Iterable[tuple[dict[str, str], float]]
) -> Metric:
    """A gauge whose samples may carry different label sets (file labels vary by target)."""
    family = Metric(name, documentation, "gauge")
    family.samples = [Sample(name, labels, value) for labels, value in samples]
    return family


def worker_families(results: Sequence[ProbeResult]) -> list[Metric]:
    """The per-worker families for ``results``."""
    labelled = [(result.target.label_dict(), result) for result in results]
    return [
        _gauge(
            WORKER_INFO,
            "1 per worker found through wool's discovery; its volatile facts as labels.",
            ((r.target.info_dict(), 1.0) for r in results if r.target.info),
        ),
        _gauge(
            IDLE_SECONDS,
            "Seconds the worker has been continuously idle, as it reports; absent when unknown.",
            ((labels, r.idle) for labels, r in labelled if r.idle is not None),
        ),
        _gauge(
            UP,
            "1 if the worker answered the idle RPC (value, UNIMPLEMENTED, server status), else 0.",
            ((labels, float(r.up)) for labels, r in labelled),
        ),
        _gauge(
            IDLE_SUPPORTED,
            "0 if the worker predates the idle RPC (answered UNIMPLEMENTED), else 1 when up.",
            ((labels, float(r.supported)) for labels, r in labelled),
        ),
        _gauge(
            PROBE_DURATION,
            "How long the worker's idle RPC took on this scrape.",
            ((labels, r.duration) for labels, r in labelled),
        ),
    ]


class ProbeCollector(Collector):
    """Collects the per-worker families of one fan-out's results."""

    def __init__(self, results: Sequence[ProbeResult]) -> None:
        self.results = results

    def collect(self) -> Iterator[Metric]:
        yield from worker_families(self.results)


class ExporterCollector(Collector):
    """The exporter's own metrics: counters of the prober's results it is told of,
    the last fan-out's duration (none before the first), and the state of the
    target set."""

    def __init__(self, prober: Prober, targets: TargetSet) -> None:
        self.targets = targets
        self.errors: Counter[ErrorReason] = Counter({reason: 0 for reason in ErrorReason})
        self.last_duration: float | None = None
        prober.subscribe(self.record)

    def record(self, results: Sequence[ProbeResult], fan_out_duration: float | None) -> None:
        """Count ``results`` by error reason; remember a fan-out's duration."""
        errors = self.errors
        for result in results:
            if result.error is not None:
                errors[result.error] += 1
        if fan_out_duration is not None:
            self.last_duration = fan_out_duration

    def collect(self) -> Iterator[Metric]:
        errors = CounterMetricFamily(
            "wool_exporter_probe_errors",
            "Probes that produced no idle value, by reason.",
            labels=["reason"],
        )
        for reason in ErrorReason:
            errors.add_metric([reason.value], self.errors[reason])
        yield errors
        yield GaugeMetricFamily(
            "wool_exporter_targets",
            "Workers scraped: from the flags, the targets file and wool discovery.",
            value=len(self.targets.all()),
        )
        if self.last_duration is not None:  # absent, not 0, until a fan-out ran
            yield GaugeMetricFamily(
                "wool_exporter_scrape_duration_seconds",
                "How long the last fan-out over all workers took.",
                value=self.last_duration,
            )
        yield GaugeMetricFamily(
            "wool_exporter_targets_reload_success",
            "1 if the last read of the targets file succeeded, else 0.",
            value=float(self.targets.reload_success),
        )
        yield GaugeMetricFamily(
            "wool_exporter_targets_reload_timestamp_seconds",
            "Unix time of the last successful read of the targets file "
            "(0 until it is first read; the start time without one).",
            value=self.targets.reload_timestamp,
        )
