"""``/probe?target=...&debug=true``: the probe's steps, then its metrics, as text.

Like blackbox_exporter's debug output: "Logs for the probe:" (the target,
the time budget, the connection used, the RPC's result or error, the
timings), then "Metrics that would have been returned:". The probe is the
very one ``/probe`` makes, through the same prober and connection cache.
"""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import dataclass, field
from typing import Final

from aiohttp import web
from prometheus_client.exposition import generate_latest

from wool_idle.exporter.collector import ProbeCollector
from wool_idle.exporter.probe import Prober, ProbeResult
from wool_idle.exporter.target import Target
from wool_idle.worker.address import UNIX_PREFIX


@dataclass
class _Steps:
    """The probe's log lines, each stamped with the time it was written."""

    target: str
    lines: list[str] = field(default_factory=list)

    def log(self, message: str, **facts: object) -> None:
        now = datetime.datetime.now(datetime.UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
        text = " ".join(f"{name}={_value(value)}" for name, value in facts.items())
        target = _value(self.target)
        self.lines.append(f'ts={stamp} target={target} msg="{message}" {text}'.rstrip())


_QUOTED_IF: Final = frozenset(' ="\\')


def _value(value: object) -> str:
    """``value`` as a logfmt value: a float with 6 decimals; text as it is, or quoted as
    a JSON string when empty or holding a blank, ``=``, a quote, a backslash or a
    character that is not printable (a target's Unix socket path may hold
    ``" msg="Probe succeeded``, which would read as facts of the line)."""
    if isinstance(value, float):
        return f"{value:.6f}"
    text = str(value)
    if text and text.isprintable() and _QUOTED_IF.isdisjoint(text):
        return text
    return json.dumps(text)


async def debug_probe(
    prober: Prober, target: Target, budget: float, *, configured: bool
) -> web.Response:
    """Probe ``target`` within ``budget`` seconds and answer the steps and metrics
    as text/plain; ``configured`` says whether it is one of the exporter's targets."""
    steps = _Steps(target.address)
    started = time.monotonic()
    steps.log("Beginning probe", timeout_seconds=budget)
    reused = target.address in prober.connections.open()
    steps.log(
        "Using connection",
        target_kind="configured" if configured else "ad hoc",
        channel="reused" if reused else "new",
        transport="unix socket" if target.address.startswith(UNIX_PREFIX) else "tcp",
    )
    steps.log("Calling the idle RPC")
    result = await prober.probe_adhoc(target, started + budget, detail=True)
    _log_result(steps, result)
    kept = target.address in prober.connections.open()
    steps.log("Connection kept open" if kept else "Connection closed")
    steps.log("Probe finished", duration_seconds=time.monotonic() - started)
    metrics = generate_latest(ProbeCollector([result])).decode()
    body = (
        "Logs for the probe:\n"
        + "\n".join(steps.lines)
        + "\n\n\nMetrics that would have been returned:\n"
        + metrics
    )
    return web.Response(text=body, content_type="text/plain")


def _log_result(steps: _Steps, result: ProbeResult) -> None:
    if result.idle is not None:
        steps.log(
            "Probe succeeded",
            idle_seconds=result.idle,
            rpc_duration_seconds=result.duration,
        )
        return
    steps.log(
        "Probe failed",
        reason=result.error.value if result.error else "unknown",
        up=int(result.up),
        idle_supported=int(result.supported),
        rpc_duration_seconds=result.duration,
        **({"error": result.detail} if result.detail else {}),
    )
