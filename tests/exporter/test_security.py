"""The exporter's HTTP endpoints behind --web.config.file, as a real process."""

from __future__ import annotations

import asyncio
import base64
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest
from support.metrics import by_worker
from support.processes import run_cli, spawn_cli

PASSWORD_HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()


def get(
    url: str, *, user: str | None = None, password: str = "", context: ssl.SSLContext | None = None
) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture
def serve():
    processes = []

    def start(subcommand: list[str]) -> str:
        process = spawn_cli([*subcommand, "--listen", "127.0.0.1:0"])
        processes.append(process)
        url = process.stdout.readline().strip()
        assert url, process.stderr.read()
        return url

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=30)


class TestBasicAuth:
    async def test_scrape_401_without_credentials_and_no_fan_out(
        self, scripted, serve, tmp_path: Path
    ) -> None:
        """Given an exporter requiring basic auth, when scraped without credentials,
        with a wrong password and as an unknown user, then each gets 401 and no idle RPC
        reaches the worker; with the right credentials, 200 and the worker's series."""
        # Arrange
        worker = await scripted(seconds=5.0)
        config = tmp_path / "web.yml"
        config.write_text(f"basic_auth_users:\n  prometheus: '{PASSWORD_HASH}'\n")
        url = await asyncio.to_thread(
            serve, ["exporter", "--target", worker.address, "--web.config.file", str(config)]
        )
        # Act
        anonymous = await asyncio.to_thread(get, url)
        wrong = await asyncio.to_thread(get, url, user="prometheus", password="nope")
        unknown = await asyncio.to_thread(get, url, user="mallory", password="s3cret")
        calls_after_401s = worker.idle_calls
        status, body = await asyncio.to_thread(get, url, user="prometheus", password="s3cret")
        # Assert
        assert [anonymous[0], wrong[0], unknown[0]] == [401, 401, 401]
        assert calls_after_401s == 0
        assert status == 200
        assert by_worker(body, "wool_worker_idle_seconds") == {worker.address: 5.0}

    async def test_autoscaler_endpoints_require_auth(self, serve, tmp_path: Path) -> None:
        """Given an autoscaler with basic auth, when /metrics is fetched without and
        with credentials, then 401, then 200."""
        # Arrange
        config = tmp_path / "web.yml"
        config.write_text(f"basic_auth_users:\n  prometheus: '{PASSWORD_HASH}'\n")
        url = await asyncio.to_thread(
            serve,
            [
                "autoscaler",
                "--max-idle",
                "1h",
                "--metrics-url",
                "http://127.0.0.1:1/metrics",
                "--interval",
                "1h",
                "--web.config.file",
                str(config),
            ],
        )
        # Act
        anonymous = await asyncio.to_thread(get, url)
        authorized = await asyncio.to_thread(get, url, user="prometheus", password="s3cret")
        # Assert
        assert (anonymous[0], authorized[0]) == (401, 200)
        assert "wool_autoscaler_source_up" in authorized[1]


class TestTls:
    async def test_https_with_client_certificates(
        self, scripted, serve, tls_material, tmp_path: Path
    ) -> None:
        """Given an exporter serving TLS that requires verified client certificates,
        when scraped with a client certificate, then 200 over https; without one, the
        handshake fails."""
        # Arrange
        worker = await scripted(seconds=1.0)
        config = tmp_path / "web.yml"
        config.write_text(
            f"tls_server_config:\n  cert_file: {tls_material.server.cert}\n"
            f"  key_file: {tls_material.server.key}\n"
            "  client_auth_type: RequireAndVerifyClientCert\n"
            f"  client_ca_file: {tls_material.ca}\n  min_version: TLS12\n"
        )
        url = await asyncio.to_thread(
            serve, ["exporter", "--target", worker.address, "--web.config.file", str(config)]
        )
        with_cert = ssl.create_default_context(cafile=tls_material.ca)
        client = tls_material.clients["exporter"]
        with_cert.load_cert_chain(client.cert, client.key)
        without_cert = ssl.create_default_context(cafile=tls_material.ca)
        # Act
        status, body = await asyncio.to_thread(get, url, context=with_cert)
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            await asyncio.to_thread(get, url, context=without_cert)
        # Assert
        assert url.startswith("https://")
        assert status == 200 and worker.address in body


class TestWebConfigFlags:
    def test_check_valid_file(self, tmp_path: Path) -> None:
        """Given a valid web config, when --web.config.check runs, then exit 0 and OK."""
        config = tmp_path / "web.yml"
        config.write_text(f"basic_auth_users:\n  prometheus: '{PASSWORD_HASH}'\n")
        result = run_cli(["exporter", "--web.config.file", str(config), "--web.config.check"])
        assert result.returncode == 0 and "OK" in result.stdout

    @pytest.mark.parametrize("subcommand", [["exporter"], ["autoscaler", "--max-idle", "1m"]])
    def test_malformed_file_fails_at_start(self, tmp_path: Path, subcommand: list[str]) -> None:
        """Given a malformed web config, when the server starts, then it exits 2 with one
        line naming the flag and the problem."""
        config = tmp_path / "web.yml"
        config.write_text("basic_auth_users:\n  prometheus: plaintext-password\n")
        result = run_cli([*subcommand, "--web.config.file", str(config)])
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1
        assert "--web.config.file" in result.stderr and "bcrypt" in result.stderr

    def test_check_without_file(self) -> None:
        result = run_cli(["exporter", "--web.config.check"])
        assert result.returncode == 2 and "--web.config.check" in result.stderr
