"""The decision log: what the daemon decided and did, as records and log lines.

A record is written once per log line: the message is ``decision`` and every
fact is a field of the log record (``extra``). JSON logs carry the fields as
keys; text logs append them as ``key=value``. Each ``--group-by`` label is a
field of its own, ``group.<label>``, so a value holding ``,`` or ``=`` (wool's
tags are comma-separated) reads as one value.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from wool_idle.autoscaler.policy import Decision
from wool_idle.autoscaler.verdicts import StopResult, Verdict
from wool_idle.logs import bounded, json_number, json_text

log = logging.getLogger("wool_idle.autoscaler")

DECISION_LOG_SIZE: Final = 1000
"""Records kept for ``/decisions``, newest last."""
MAX_FIELD: Final = 1024
"""Characters of a worker label or group value a record keeps. No address is longer
(a host name has at most 253, a Unix socket path at most 107 bytes); a longer label
(a source may send one of megabytes: Prometheus's API bounds none) is cut, its
length noted, so the records kept, and each log line, stay bounded."""


@dataclass(frozen=True)
class Record:
    """One decision: the verdict on a worker and, if a stop was tried, its result;
    ``group`` is the worker's ``--group-by`` labels."""

    time: float
    worker: str
    source_idle: float | None
    verdict: Verdict
    confirmed_idle: float | None = None
    result: StopResult | None = None
    group: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        decision: Decision,
        group_by: Sequence[str],
        result: StopResult | None = None,
        confirmed_idle: float | None = None,
    ) -> Record:
        """The record of ``decision`` now (with the ``result`` of its stop, if one was
        tried, and the idle time the worker confirmed), its group labelled by
        ``group_by``; a label or value longer than ``MAX_FIELD`` is cut."""
        group = {name: _bounded(v) for name, v in zip(group_by, decision.group, strict=False)}
        return cls(
            time.time(),
            _bounded(decision.worker),
            decision.idle,
            decision.verdict,
            confirmed_idle,
            result,
            group,
        )

    def fields(self) -> dict[str, object]:
        """The record as JSON-ready fields, as ``/decisions`` serves it: an idle time
        that is not finite (a worker may confirm NaN) as null (``json_number``)."""
        return {
            "time": self.time,
            "worker": self.worker,
            "source_idle": json_number(self.source_idle),
            "verdict": self.verdict.value,
            "confirmed_idle": json_number(self.confirmed_idle),
            "result": None if self.result is None else self.result.value,
            "group": dict(self.group),
        }


def _bounded(text: str) -> str:
    """``text`` as ``/decisions`` serves it: its first ``MAX_FIELD`` characters and its
    length if longer (``bounded``), a lone surrogate (a source's JSON may escape one)
    as text (``json_text``)."""
    return bounded(json_text(text), MAX_FIELD)


def append(records: deque[Record], record: Record) -> None:
    """Add ``record`` to ``records`` (``/decisions``) and write it."""
    records.append(record)
    write(record)


def write(record: Record, level: int = logging.INFO) -> None:
    """Log ``record`` as one ``decision`` line (its time is the log line's own)."""
    fields: dict[str, object] = {
        "worker": record.worker,
        "verdict": record.verdict.value,
        "source_idle": record.source_idle,
    }
    if record.result is not None:
        fields["confirmed_idle"] = record.confirmed_idle
        fields["result"] = record.result.value
    fields.update((f"group.{name}", value) for name, value in record.group.items())
    log.log(level, "decision", extra=fields)
