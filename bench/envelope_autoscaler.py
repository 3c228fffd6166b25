"""The autoscaler's half of ``bench.envelopes``: its peak memory over one cycle of
each input, served by a plain HTTP server (a Prometheus API's answer to the three
queries, or an exporter's ``/metrics``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from aiohttp import web

from bench.autoscaler_cycle import api_bodies, exposition
from wool_idle.autoscaler.sources.source import DEFAULT_MAX_BYTES
from wool_idle.exporter.probe import ProbeResult
from wool_idle.exporter.target import Target

PEAK_OF_CHILD = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)
"""A parent small enough that its size at fork never is its child's peak (Linux
keeps the larger of the two as the child's ``ru_maxrss``)."""


def labelled(addresses: list[str], chars: int) -> list[tuple[str, dict[str, str]]]:
    """(address, labels) per worker: a 44-character ``wool_namespace`` and ``chars``
    characters of ``wool_tags`` (none when 0), 100 workers a pool."""
    out = []
    for i, address in enumerate(addresses):
        pool = i // 100
        tags = ",".join(f"tag{pool}-" + "t" * 20 for _ in range(chars // 20 + 1))[:chars]
        labels = {"wool_namespace": f"ns-{'n' * 40}{pool}", "wool_tags": tags} if chars else {}
        out.append((address, labels))
    return out


async def autoscaler_peak(source: list[str], bodies: dict[str, bytes]) -> float:
    """Peak MiB of one ``--once`` cycle of the autoscaler reading ``bodies``."""

    async def serve(request: web.Request) -> web.Response:
        query = request.query.get("query", "series")
        kind = "series" if query.startswith("{") else "ages"
        now = request.query.get("time") or repr(time.time())
        body = bodies.get(request.path, bodies.get(kind, b"")).replace(
            b"1700000000.0,", f"{now},".encode()
        )
        kind = "text/plain" if request.path == "/metrics" else "application/json"
        return web.Response(body=body, content_type=kind)

    app = web.Application()
    app.router.add_get("/{path:.*}", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    command = [
        sys.executable,
        "-m",
        "wool_idle",
        "autoscaler",
        *[s.format(port=port) for s in source],
        "--once",
        "--dry-run",
        "--max-idle",
        "10m",
        "--group-by",
        "wool_tags",
        "--min-workers",
        "1",
        "--web.listen-address",
        "127.0.0.1:0",
        "--log.level",
        "error",
    ]
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PEAK_OF_CHILD, *command, stdout=subprocess.PIPE
    )
    output, _ = await child.communicate()
    await runner.cleanup()
    return int(output) / 1024


def measure_autoscaler(
    n: int, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[tuple[str, float, float]]:
    """(input, body MB, peak MiB) for each input; the last is text just under
    ``max_bytes``, read with that ``--source-max-bytes``."""
    results = [
        ProbeResult(Target(a, tuple(sorted(labels.items()))), True, True, 42.0, 0.001)
        for a, labels in labelled([f"10.0.{i // 256}.{i % 256}:50051" for i in range(n)], 300)
    ]
    text = exposition(results).encode()
    values, ages = (body.encode() for body in api_bodies(results))
    padding = b"".join(
        b'wool_worker_up{worker="pad%d"} 0.0\n' % i
        for i in range((max_bytes - len(text) - 4096) // 40)
    )
    at_cap = text + padding[: max_bytes - len(text) - 4096]
    at_cap = at_cap[: at_cap.rfind(b"\n") + 1]
    prometheus = ["--prometheus-url", "http://127.0.0.1:{port}", "--alert", "WoolWorkerIdle"]
    exporter = ["--metrics-url", "http://127.0.0.1:{port}/metrics"]
    capped = [*exporter, "--source-max-bytes", str(max_bytes)]
    rows = []
    for name, source, bodies, size in (
        ("exposition text", exporter, {"/metrics": text}, len(text)),
        ("Prometheus JSON, --alert", prometheus, {"series": values, "ages": ages}, len(values)),
        ("text at --source-max-bytes", capped, {"/metrics": at_cap}, len(at_cap)),
    ):
        rows.append((name, size / 1e6, asyncio.run(autoscaler_peak(source, bodies))))
    return rows
