"""A real Prometheus server (Debian's package) on loopback with a temporary data dir."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hashmod(value: str, modulus: int) -> int:
    """Prometheus's ``hashmod`` relabel action on one source label's ``value``: the
    last 8 bytes of its MD5 as a big-endian integer, modulo ``modulus``."""
    digest = hashlib.md5(value.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[8:], "big") % modulus


SHIPPED_WORKER_JOBS = {
    "prometheus.yml": "wool-idle",
    "prometheus-probe.yml": "wool-idle-probe",
    "prometheus-sd.yml": "wool-idle-sd",
}
"""Each shipped Prometheus config (one per mode) and its one job reading the workers."""


def shipped_config(path: Path, addresses: Mapping[str, str]) -> dict[str, Any]:
    """The Prometheus config file at ``path`` with each placeholder address of
    ``addresses`` (which must all occur in it) replaced by the address it maps to."""
    text = path.read_text()
    for placeholder, address in addresses.items():
        assert placeholder in text, f"{path.name} no longer mentions {placeholder}"
        text = text.replace(placeholder, address)
    config: dict[str, Any] = yaml.safe_load(text)
    return config


def held_port() -> socket.socket:
    """A loopback socket bound to a free port and never listening, with
    ``SO_REUSEADDR``: while it is open, a listener that sets ``SO_REUSEADDR`` too (Go's,
    so Prometheus's) can take the port, while the kernel hands it to nobody else (a
    bind of port 0, an outgoing connection, a bind without the option)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class PrometheusServer:
    """``prometheus`` with the given config, listening on a loopback port held for it
    (``held_port``) as long as this object lives, so a restart finds it free;
    with ``web_config``, its ``--web.config.file`` (HTTPS), reached through ``opener``;
    ``flags`` are added to its command line (``--query.lookback-delta=3s``)."""

    def __init__(
        self,
        directory: Path,
        config: dict[str, Any],
        rule_files: dict[str, str],
        *,
        web_config: Path | None = None,
        opener: urllib.request.OpenerDirector | None = None,
        flags: tuple[str, ...] = (),
    ) -> None:
        self.directory = directory
        self.flags = flags
        placeholder = held_port()
        weakref.finalize(self, placeholder.close)
        self.port = int(placeholder.getsockname()[1])
        self.url = f"{'https' if web_config else 'http'}://127.0.0.1:{self.port}"
        self.web_config = web_config
        self.opener = opener or urllib.request.build_opener()
        for name, text in rule_files.items():
            (directory / name).write_text(text)
        self.config_path = directory / "prometheus.yml"
        self.config_path.write_text(json.dumps(config))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        binary = shutil.which("prometheus")
        assert binary, "Debian's prometheus package is required (scripts/ensure-prometheus)"
        with (self.directory / "prometheus.log").open("ab") as log:  # the child keeps its own
            self.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.console.templates=/dev/null",
                    "--web.console.libraries=/dev/null",
                    *([f"--web.config.file={self.web_config}"] if self.web_config else []),
                    *self.flags,
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, (self.directory / "prometheus.log").read_text()
            try:
                with self.opener.open(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            assert time.monotonic() < deadline, "prometheus never became ready"
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with self.opener.open(f"{self.url}/api/v1/{path}?{query}", timeout=10) as response:
            return json.loads(response.read())

    def query(self, expr: str) -> list[dict[str, Any]]:
        body = self.api("query", query=expr)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def firing(self, alertname: str) -> set[str]:
        alerts = self.api("alerts")["data"]["alerts"]
        return {
            a["labels"].get("worker", "")
            for a in alerts
            if a["labels"]["alertname"] == alertname and a["state"] == "firing"
        }
