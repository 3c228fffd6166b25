"""The autoscaler reading protected sources through --http.config.file, end to end:
an exporter locked with TLS and basic auth, and a real Prometheus started with a
web config. Real worker, exporter, autoscaler and Prometheus processes."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest
from support.https import wait_ready
from support.processes import run_cli, spawn_cli
from support.prometheus import PrometheusServer

from wool_idle.worker import LocalWorker, WorkerConnection

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery staple"


def locked_web_config(directory: Path, tls_material, user: str) -> Path:
    """A web config serving TLS with the test server certificate, and basic auth for
    ``user`` with ``PASSWORD``."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    path = directory / "web.yml"
    path.write_text(
        json.dumps(
            {
                "tls_server_config": {
                    "cert_file": tls_material.server.cert,
                    "key_file": tls_material.server.key,
                },
                "basic_auth_users": {user: hashed},
            }
        )
    )
    return path


def locked_exporter(address: str, web: Path) -> tuple[subprocess.Popen[str], str]:
    """An exporter of ``address`` behind web config ``web``, and its /metrics URL."""
    exporter = spawn_cli(
        ["exporter", "--listen", "127.0.0.1:0", "--target", address, "--web.config.file", str(web)]
    )
    return exporter, exporter.stdout.readline().strip()


def client_config(directory: Path, tls_material, user: str, password: str) -> Path:
    """An HTTP client config: basic auth from a password file, the test CA."""
    (directory / f"{user}.pw").write_text(f"{password}\n")
    path = directory / f"http-{user}.yml"
    path.write_text(
        f"basic_auth:\n  username: {user}\n  password_file: {user}.pw\n"
        f"tls_config:\n  ca_file: {tls_material.ca}\n  server_name: localhost\n"
    )
    return path


def tls_only_config(directory: Path, tls_material) -> Path:
    """An HTTP client config trusting the test CA, without credentials."""
    path = directory / "http-tls-only.yml"
    path.write_text(f"tls_config: {{ca_file: {tls_material.ca}, server_name: localhost}}\n")
    return path


def once(source: list[str], config: Path) -> list[str]:
    return [
        "autoscaler",
        "--max-idle",
        "0.2s",
        *source,
        "--http.config.file",
        str(config),
        "--min-workers",
        "0",
        "--grace",
        "2s",
        "--once",
    ]


async def still_serving(address: str) -> bool:
    async with WorkerConnection(address) as connection:
        return await connection.idle_time(timeout=5) >= 0


class TestProtectedExporter:
    async def test_autoscaler_retires_through_tls_and_basic_auth(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given an idle worker and an exporter locked with TLS and basic auth, when an
        autoscaler with a wrong password runs a cycle, then the source fails (exit 1)
        and the worker keeps serving; when one with the right password file runs,
        then the worker is stopped and exits 0, and no password is ever printed."""
        # Arrange
        worker = LocalWorker()
        address = await worker.start()
        exporter, url = locked_exporter(
            address, locked_web_config(tmp_path, tls_material, "autoscaler")
        )
        url = url.replace("127.0.0.1", "localhost")
        (tmp_path / "wrong").mkdir()
        wrong = client_config(tmp_path / "wrong", tls_material, "autoscaler", "wrong password")
        right = client_config(tmp_path, tls_material, "autoscaler", PASSWORD)
        try:
            # Act
            denied = await asyncio.to_thread(run_cli, once(["--metrics-url", url], wrong))
            serving = await still_serving(address)
            allowed = await asyncio.to_thread(run_cli, once(["--metrics-url", url], right))
            assert worker.process is not None
            status = await asyncio.wait_for(worker.process.wait(), 30)
        finally:
            exporter.terminate()
            exporter.wait(timeout=30)
            await worker.kill()
        # Assert
        assert url.startswith("https://localhost:")
        assert denied.returncode == 1 and "HTTP 401" in denied.stderr
        assert serving
        assert allowed.returncode == 0 and "result=stopped" in allowed.stderr, allowed.stderr
        assert status == 0
        for run in (denied, allowed):
            assert PASSWORD not in run.stderr + run.stdout
            assert "wrong password" not in run.stderr + run.stdout

    async def test_autoscaler_url_password_never_printed(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given credentials in --metrics-url (the old workaround), when the autoscaler
        runs against the locked exporter, then it authenticates with them and neither
        its logs nor its landing page show the password."""
        # Arrange
        worker = LocalWorker()
        address = await worker.start()
        exporter, url = locked_exporter(address, locked_web_config(tmp_path, tls_material, "bob"))
        secret_url = url.replace("https://", f"https://bob:{PASSWORD.replace(' ', '%20')}@")
        tls_only = tls_only_config(tmp_path, tls_material)
        autoscaler = spawn_cli(
            [
                "autoscaler",
                "--max-idle",
                "1h",
                "--metrics-url",
                secret_url,
                "--http.config.file",
                str(tls_only),
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "0.5s",
            ]
        )
        try:
            own = autoscaler.stdout.readline().strip()
            # Act
            ready = await asyncio.to_thread(wait_ready, own.removesuffix("/metrics"))
            landing = await asyncio.to_thread(landing_page, own.removesuffix("/metrics"))
        finally:
            autoscaler.terminate()
            exporter.terminate()
            logs = autoscaler.communicate(timeout=30)
            exporter.wait(timeout=30)
            await worker.kill()
        # Assert
        assert ready, logs
        encoded = PASSWORD.replace(" ", "%20")
        for text in (landing, *logs):
            assert PASSWORD not in text and encoded not in text
        assert "xxxxx" not in landing and "bob" not in landing

    async def test_exporter_follows_a_new_user_without_restart(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given an exporter locked for "prometheus" and an autoscaler with its own
        password, when the operator rewrites the web config with the autoscaler's user
        only, then (no restart) the autoscaler's cycle retires the idle worker, the old
        user gets 401, and the exporter's log says the web config was reloaded."""
        # Arrange
        worker = LocalWorker()
        address = await worker.start()
        web = locked_web_config(tmp_path, tls_material, "prometheus")
        exporter, url = locked_exporter(address, web)
        url = url.replace("127.0.0.1", "localhost")
        right = client_config(tmp_path, tls_material, "autoscaler", PASSWORD)
        try:
            denied = await asyncio.to_thread(run_cli, once(["--metrics-url", url], right))
            # Act
            locked_web_config(tmp_path, tls_material, "autoscaler")
            answered = await asyncio.to_thread(
                status_once_changed, url, tls_material.ca, "autoscaler", 401
            )
            old_user = await asyncio.to_thread(status_of, url, tls_material.ca, "prometheus")
            allowed = await asyncio.to_thread(run_cli, once(["--metrics-url", url], right))
            assert worker.process is not None
            status = await asyncio.wait_for(worker.process.wait(), 30)
        finally:
            exporter.terminate()
            _, log = exporter.communicate(timeout=30)
            await worker.kill()
        # Assert
        assert denied.returncode == 1 and "HTTP 401" in denied.stderr
        assert (answered, old_user) == (200, 401)
        assert allowed.returncode == 0 and "result=stopped" in allowed.stderr, allowed.stderr
        assert status == 0
        assert "web config reloaded" in log


def status_of(url: str, ca: str, user: str) -> int:
    """The HTTP status of a GET of ``url`` as ``user`` with ``PASSWORD``, over TLS
    verified by ``ca``."""
    context = ssl.create_default_context(cafile=ca)
    pair = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {pair}"})
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def status_once_changed(url: str, ca: str, user: str, before: int) -> int:
    """``status_of`` until it is no longer ``before`` (at most 30 s); the last one."""
    deadline = time.monotonic() + 30
    while (status := status_of(url, ca, user)) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    return status


def landing_page(base: str) -> str:
    with urllib.request.urlopen(f"{base}/", timeout=5) as response:
        return response.read().decode()


def prometheus_opener(ca: str, user: str) -> urllib.request.OpenerDirector:
    """urllib through TLS verified by ``ca``, with basic auth."""
    context = ssl.create_default_context(cafile=ca)
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
    pair = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
    opener.addheaders = [("Authorization", f"Basic {pair}")]
    return opener


class TestProtectedPrometheus:
    async def test_autoscaler_retires_through_prometheus_with_web_config(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given an idle worker scraped by a real Prometheus that serves its API over
        TLS with basic auth (--web.config.file), when the autoscaler reads Prometheus
        with --http.config.file, then the worker is stopped and exits 0; without the
        credentials, the read fails (401) and nothing is stopped."""
        # Arrange
        worker = LocalWorker()
        address = await worker.start()
        exporter = spawn_cli(["exporter", "--listen", "127.0.0.1:0", "--target", address])
        target = exporter.stdout.readline().strip().removeprefix("http://")
        prometheus = PrometheusServer(
            tmp_path,
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [
                    {
                        "job_name": "wool-idle",
                        "static_configs": [{"targets": [target.removesuffix("/metrics")]}],
                    }
                ],
            },
            {},
            web_config=locked_web_config(tmp_path, tls_material, "autoscaler"),
            opener=prometheus_opener(tls_material.ca, "autoscaler"),
        )
        config = client_config(tmp_path, tls_material, "autoscaler", PASSWORD)
        source = ["--prometheus-url", prometheus.url.replace("127.0.0.1", "localhost")]
        try:
            await asyncio.to_thread(prometheus.start)
            await asyncio.to_thread(wait_for_series, prometheus, address)
            # Act
            without = await asyncio.to_thread(
                run_cli, once(source, tls_only_config(tmp_path, tls_material))
            )
            serving = await still_serving(address)
            allowed = await asyncio.to_thread(run_cli, once(source, config))
            assert worker.process is not None
            status = await asyncio.wait_for(worker.process.wait(), 30)
        finally:
            prometheus.stop()
            exporter.terminate()
            exporter.wait(timeout=30)
            await worker.kill()
        # Assert
        assert without.returncode == 1 and "HTTP 401" in without.stderr
        assert serving
        assert allowed.returncode == 0 and "result=stopped" in allowed.stderr, allowed.stderr
        assert status == 0
        assert PASSWORD not in allowed.stderr + allowed.stdout


def wait_for_series(prometheus: PrometheusServer, address: str, timeout: float = 60.0) -> None:
    """Wait until Prometheus holds an idle sample of ``address``."""
    deadline = time.monotonic() + timeout
    while not prometheus.query(f'wool_worker_idle_seconds{{worker="{address}"}}'):
        assert time.monotonic() < deadline, "Prometheus never scraped the worker's idle time"
        time.sleep(0.5)
