"""The autoscaler's own metrics, on a registry passed in."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from wool_idle.autoscaler.retired import RetiredWorkers
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.discovery.drop import DropResult


class AutoscalerMetrics:
    """``wool_autoscaler_*`` series; every label value exists from the start (at 0).

    ``stops_total{result}`` counts each stop tried once, by ``StopResult``;
    ``blocked_total{reason}`` counts each decision whose ``Verdict`` blocks;
    ``drops_total{result}`` each drop published (or not) for a stopped worker, by
    ``DropResult`` (none for a worker with no drop to make: ``Dropper.drop``);
    ``cycle_errors_total`` each cycle that raised (not a failed read: ``source_up``);
    ``state_write_errors_total`` each write of ``--state-file`` that failed
    (``memory``); ``retired_timestamp_seconds{worker,<group_by>}`` shows the
    workers stopped (``retired``).
    """

    def __init__(self, registry: CollectorRegistry, *, group_by: Sequence[str] = ()) -> None:
        self.stops = Counter(
            "wool_autoscaler_stops", "Stops attempted, by result.", ["result"], registry=registry
        )
        self.blocked = Counter(
            "wool_autoscaler_blocked",
            "Retirements a rule or an untrustworthy reading held back, by verdict.",
            ["reason"],
            registry=registry,
        )
        self.candidates = Gauge(
            "wool_autoscaler_candidates",
            "Workers idle past the rule on the last cycle.",
            registry=registry,
        )
        self.source_up = Gauge(
            "wool_autoscaler_source_up",
            "1 if the last read of the source succeeded, else 0.",
            registry=registry,
        )
        self.cycle_duration = Gauge(
            "wool_autoscaler_cycle_duration_seconds",
            "How long the last cycle took.",
            registry=registry,
        )
        self.cycle_errors = Counter(
            "wool_autoscaler_cycle_errors",
            "Cycles that failed on an error of wool-idle's own (logged with its traceback); "
            "such a cycle stops no one more.",
            registry=registry,
        )
        self.state_write_errors = Counter(
            "wool_autoscaler_state_write_errors",
            "Writes of --state-file that failed; a stop whose write failed was not sent.",
            registry=registry,
        )
        self.last_cycle = Gauge(
            "wool_autoscaler_last_cycle_timestamp_seconds",
            "Unix time at which the last cycle ended.",
            registry=registry,
        )
        self.drops = Counter(
            "wool_autoscaler_drops",
            "worker-dropped publications for stopped workers (--wool-discovery local:), by result.",
            ["result"],
            registry=registry,
        )
        self.retired = RetiredWorkers(group_by)
        registry.register(self.retired)
        for result in StopResult:
            self.stops.labels(result.value)
        for drop in DropResult:
            self.drops.labels(drop.value)
        for verdict in Verdict:
            if verdict.blocks:
                self.blocked.labels(verdict.value)
