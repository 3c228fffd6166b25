"""Certificate rotation of the daemons' HTTPS endpoints, end to end: rewrite the
files under a running exporter and autoscaler, and the next handshakes present
the new certificates. Real processes; the peer certificate is read with ``ssl``."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.https import presented_serial, serial_after_rotation
from support.processes import spawn_cli
from support.tls import CertFiles, issue

pytestmark = pytest.mark.e2e


def https_files(directory: Path, tls_material) -> tuple[Path, CertFiles]:
    """A web config serving copies of the server certificate, and those copies."""
    directory.mkdir()
    files = CertFiles(str(directory / "server.crt"), str(directory / "server.key"))
    shutil.copy(tls_material.server.cert, files.cert)
    shutil.copy(tls_material.server.key, files.key)
    config = directory / "web.yml"
    config.write_text("tls_server_config: {cert_file: server.crt, key_file: server.key}\n")
    return config, files


def metric(url: str, ca: str, name: str) -> float | None:
    """The value of the unlabelled series ``name`` at ``url`` (HTTPS, verified by ``ca``)."""
    context = ssl.create_default_context(cafile=ca)
    with urllib.request.urlopen(url.replace("127.0.0.1", "localhost"), context=context) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    return None


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.terminate()
    return process.communicate(timeout=30)


class TestHttpsRotation:
    def test_daemons_present_rotated_certificates(self, tmp_path: Path, tls_material) -> None:
        """Given an exporter and an autoscaler serving HTTPS (the autoscaler reading
        the exporter over HTTPS through --http.config.file), when each one's
        certificate files are rewritten, then a later handshake with each presents
        its new certificate, and the autoscaler still reads the exporter."""
        # Arrange
        exporter_web, exporter_files = https_files(tmp_path / "exporter", tls_material)
        autoscaler_web, autoscaler_files = https_files(tmp_path / "autoscaler", tls_material)
        client = tmp_path / "http.yml"
        client.write_text(f"tls_config: {{ca_file: {tls_material.ca}, server_name: localhost}}\n")
        exporter = spawn_cli(
            ["exporter", "--listen", "127.0.0.1:0", "--web.config.file", str(exporter_web)]
        )
        exporter_url = exporter.stdout.readline().strip()
        autoscaler = spawn_cli(
            [
                "autoscaler",
                "--max-idle",
                "1h",
                "--metrics-url",
                exporter_url,
                "--http.config.file",
                str(client),
                "--interval",
                "0.5s",
                "--listen",
                "127.0.0.1:0",
                "--web.config.file",
                str(autoscaler_web),
            ]
        )
        autoscaler_url = autoscaler.stdout.readline().strip()
        try:
            before = {
                "exporter": presented_serial(exporter_url, tls_material.ca),
                "autoscaler": presented_serial(autoscaler_url, tls_material.ca),
            }
            # Act
            rotated = {
                "exporter": issue(tls_material.ca, exporter_files, ("localhost",)),
                "autoscaler": issue(tls_material.ca, autoscaler_files, ("localhost",)),
            }
            after = {
                "exporter": serial_after_rotation(
                    exporter_url, tls_material.ca, rotated["exporter"]
                ),
                "autoscaler": serial_after_rotation(
                    autoscaler_url, tls_material.ca, rotated["autoscaler"]
                ),
            }
            time.sleep(1.5)  # a few more cycles, over connections to the rotated exporter
            source_up = metric(autoscaler_url, tls_material.ca, "wool_autoscaler_source_up")
        finally:  # the reader first: a cycle after the exporter stopped would fail
            _, autoscaler_log = stop(autoscaler)
            _, exporter_log = stop(exporter)
        # Assert
        assert exporter_url.startswith("https://") and autoscaler_url.startswith("https://")
        assert after == rotated
        assert before["exporter"] != rotated["exporter"]
        assert before["autoscaler"] != rotated["autoscaler"]
        assert "TLS files reloaded" in exporter_log and "TLS files reloaded" in autoscaler_log
        assert "unusable" not in autoscaler_log
        assert source_up == 1.0
