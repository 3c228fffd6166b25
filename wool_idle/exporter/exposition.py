"""The per-worker families, and their rendering in the text format 0.0.4.

``WORKER_FAMILIES`` names them, in the order they are rendered, with their
HELP. ``render_workers`` writes them straight into Prometheus's text format
0.0.4: byte for byte what prometheus-client's ``generate_latest`` makes of
``collector.worker_families`` (tested on drawn fleets), at a fraction of its
cost. prometheus-client renders any collector generically: a ``Sample`` per
series, its label names escaped and sorted and its values escaped on every
scrape. Here each target's label set is rendered once, when the target is
made (``label_set``), and a scrape only writes names and values around it.
The OpenMetrics format (for a scraper that refuses 0.0.4) stays with
prometheus-client.

Label names are valid legacy Prometheus names (``contract.LABEL_NAME``: the
targets file is checked for it, the other labels are the exporter's own),
which is what lets them go unescaped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from prometheus_client.utils import floatToGoString

from wool_idle.contract import IDLE_SECONDS, IDLE_SUPPORTED, PROBE_DURATION, UP, WORKER_INFO

if TYPE_CHECKING:
    from wool_idle.exporter.outcome import ProbeResult

WORKER_FAMILIES: Final = {
    WORKER_INFO: "1 per worker found through wool's discovery; its volatile facts as labels.",
    IDLE_SECONDS: (
        "Seconds the worker has been continuously idle, as it reports; absent when unknown."
    ),
    UP: "1 if the worker answered the idle RPC (value, UNIMPLEMENTED, server status), else 0.",
    IDLE_SUPPORTED: (
        "0 if the worker predates the idle RPC (answered UNIMPLEMENTED), else 1 when up."
    ),
    PROBE_DURATION: "How long the worker's idle RPC took on this scrape.",
}
"""Each per-worker family's name and HELP, in the order of the exposition (all gauges)."""

_HEADERS: Final = {
    name: f"# HELP {name} {help_text}\n# TYPE {name} gauge\n"
    for name, help_text in WORKER_FAMILIES.items()
}
_FLAG: Final = {True: "1.0", False: "0.0"}
_number: Callable[[float], str] = floatToGoString  # how prometheus-client writes a value


def label_set(labels: Mapping[str, str]) -> str:
    """``{name="value",...}``: ``labels`` as a series carries them in the text format,
    names sorted (as prometheus-client orders them), values escaped."""
    pairs = (f'{name}="{_escape(value)}"' for name, value in sorted(labels.items()))
    return "{" + ",".join(pairs) + "}"


def _escape(value: str) -> str:
    """A label value escaped for the text format: backslash, newline, double quote."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_workers(results: Sequence[ProbeResult]) -> bytes:
    """The per-worker families of ``results`` in the text format 0.0.4 (UTF-8)."""
    number = _number
    lines = [_HEADERS[WORKER_INFO]]
    lines += [f"{WORKER_INFO}{r.target.info_set()} 1.0\n" for r in results if r.target.info]
    lines.append(_HEADERS[IDLE_SECONDS])
    lines += [
        f"{IDLE_SECONDS}{r.target.label_set()} {number(r.idle)}\n"
        for r in results
        if r.idle is not None
    ]
    lines.append(_HEADERS[UP])
    lines += [f"{UP}{r.target.label_set()} {_FLAG[r.up]}\n" for r in results]
    lines.append(_HEADERS[IDLE_SUPPORTED])
    lines += [f"{IDLE_SUPPORTED}{r.target.label_set()} {_FLAG[r.supported]}\n" for r in results]
    lines.append(_HEADERS[PROBE_DURATION])
    lines += [f"{PROBE_DURATION}{r.target.label_set()} {number(r.duration)}\n" for r in results]
    return "".join(lines).encode()
