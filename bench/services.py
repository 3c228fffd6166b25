"""The processes a bench runs against: the simulated fleet, wool-idle's exporter,
and Debian's blackbox_exporter.

Each is a real process on loopback; the bench reads their CPU from ``/proc``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.support import Child
from wool_idle.proto import SERVICE

FLEET_SHARD = 2500
"""Workers per fleet process: each holds a listening socket and the accepted
connections of every client per worker, and the file limit here is 20,000."""

PROMETHEUS_HEADERS = {
    # What Prometheus 2.42 sends on a scrape (the bench scrapes as it does).
    "Accept": (
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    ),
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/2.42.0",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}

BLACKBOX = "prometheus-blackbox-exporter"
BLACKBOX_MODULE = "grpc_worker"
BLACKBOX_CONFIG = f"""\
modules:
  {BLACKBOX_MODULE}:
    prober: grpc
    timeout: 10s
    grpc:
      service: {SERVICE}
      preferred_ip_protocol: ip4
      tls: false
"""


class Fleet:
    """A simulated fleet of ``workers`` (bench.fleet), in shards of ``FLEET_SHARD``;
    over TLS with ``tls`` (certificate, key) when given."""

    def __init__(self, workers: int, tls: tuple[str, str] | None = None) -> None:
        flags = ["--tls-cert", tls[0], "--tls-key", tls[1]] if tls else []
        self.shards: list[Child] = []
        self.addresses: list[str] = []
        try:
            for start in range(0, workers, FLEET_SHARD):
                size = min(FLEET_SHARD, workers - start)
                shard = Child(["-m", "bench.fleet", "--workers", str(size), *flags])
                self.shards.append(shard)
                self.addresses.extend(shard.first["addresses"])
        except BaseException:
            self.close()
            raise

    def calls(self) -> dict[str, Any]:
        """Idle calls since the last ask: ``{"calls": total, "peers": {peer: count}}``."""
        peers: Counter[str] = Counter()
        total = 0
        for shard in self.shards:
            answer = shard.ask()
            total += answer["calls"]
            peers.update(answer["peers"])
        return {"calls": total, "peers": dict(peers)}

    def close(self) -> None:
        for shard in self.shards:
            shard.close()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for servers that take no port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class _Process:
    """A server process of the bench: its pid, and how it is stopped."""

    process: subprocess.Popen[Any]

    @property
    def pid(self) -> int:
        return self.process.pid

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def grpc_environment(experiments: str | None) -> dict[str, str]:
    """This process's environment, with ``GRPC_EXPERIMENTS`` set when given."""
    return {**os.environ, **({"GRPC_EXPERIMENTS": experiments} if experiments else {})}


class Exporter(_Process):
    """``wool-idle exporter`` on a free port, with ``addresses`` in its targets file
    (None: no targets file, so every ``/probe`` target is ad hoc), its environment
    ``env`` (default: this process's)."""

    def __init__(
        self,
        addresses: Sequence[str] | None,
        directory: Path,
        *,
        concurrency: int = 256,
        timeout: str = "10s",
        env: Mapping[str, str] | None = None,
        flags: Sequence[str] = (),
    ) -> None:
        command = [
            sys.executable,
            "-m",
            "wool_idle",
            "exporter",
            "--web.listen-address",
            "127.0.0.1:0",
            "--concurrency",
            str(concurrency),
            "--timeout",
            timeout,
            "--log.level",
            "warning",
            *flags,
        ]
        if addresses is not None:
            targets = directory / f"targets-{len(addresses)}.json"
            targets.write_text(json.dumps([{"targets": list(addresses)}]))
            command += ["--targets-file", str(targets)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, text=True, env=None if env is None else dict(env)
        )
        assert self.process.stdout is not None
        self.metrics_url = self.process.stdout.readline().strip()
        if not self.metrics_url:
            self.close()
            raise RuntimeError("the exporter exited before serving")
        self.base = self.metrics_url.removesuffix("/metrics")

    def probe_url(self, address: str) -> str:
        return f"{self.base}/probe?target={address}"


class Blackbox(_Process):
    """Debian's blackbox_exporter on a free port, with one grpc module for the fleet."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which(BLACKBOX)
        if binary is None:
            raise SystemExit(
                f"{BLACKBOX} not found: install Debian's package "
                "(apt-get install prometheus-blackbox-exporter)"
            )
        config = directory / "blackbox.yml"
        config.write_text(BLACKBOX_CONFIG)
        self.base = f"http://127.0.0.1:{free_port()}"
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--web.listen-address={self.base.removeprefix('http://')}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_ready()

    def probe_url(self, address: str) -> str:
        return f"{self.base}/probe?target={address}&module={BLACKBOX_MODULE}"

    def version(self) -> str:
        result = subprocess.run([BLACKBOX, "--version"], capture_output=True, text=True)
        return (result.stdout + result.stderr).splitlines()[0].strip()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{BLACKBOX} exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.base}/-/healthy", timeout=1):
                    return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        self.close()
        raise RuntimeError(f"{BLACKBOX} did not become healthy")
