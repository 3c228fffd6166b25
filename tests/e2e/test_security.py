"""The security story end to end: an mTLS fleet with per-method authorization,
a read-only exporter identity and an autoscaler identity allowed to stop."""

from __future__ import annotations

import asyncio

import pytest
from support.processes import run_cli, spawn_cli
from support.tls import client_flags

from wool_idle.worker import ClientTls, LocalWorker, WorkerConnection

pytestmark = pytest.mark.e2e


class TestSecureFleet:
    async def test_only_the_autoscaler_identity_retires(self, tls_material) -> None:
        """Given an idle worker over mutual TLS that allows stop to `autoscaler` only,
        and the exporter holding the `exporter` identity, when an autoscaler holding the
        exporter's identity runs a cycle, then its stop is denied (failed) and the worker
        keeps serving; when one holding `autoscaler` runs, the worker exits 0."""
        # Arrange
        worker = LocalWorker(
            "localhost:0",
            extra_args=[
                "--tls-cert",
                tls_material.server.cert,
                "--tls-key",
                tls_material.server.key,
                "--tls-client-ca",
                tls_material.ca,
                "--allow-stop",
                "autoscaler",
            ],
        )
        address = await worker.start()
        exporter = spawn_cli(
            [
                "exporter",
                "--listen",
                "127.0.0.1:0",
                "--target",
                address,
                *client_flags(tls_material, "exporter"),
            ]
        )
        url = exporter.stdout.readline().strip()
        await asyncio.sleep(0.5)
        once = [
            "autoscaler",
            "--max-idle",
            "0.2s",
            "--metrics-url",
            url,
            "--min-workers",
            "0",
            "--grace",
            "2s",
            "--once",
        ]
        try:
            # Act
            denied = await asyncio.to_thread(
                run_cli, [*once, *client_flags(tls_material, "exporter")]
            )
            client = tls_material.clients["exporter"]
            async with WorkerConnection(
                address,
                tls=ClientTls(ca_file=tls_material.ca, cert_file=client.cert, key_file=client.key),
            ) as c:
                still_serving = await c.idle_time(timeout=5)
            allowed = await asyncio.to_thread(
                run_cli, [*once, *client_flags(tls_material, "autoscaler")]
            )
            assert worker.process is not None
            status = await asyncio.wait_for(worker.process.wait(), 30)
        finally:
            exporter.terminate()
            exporter.wait(timeout=30)
            await worker.kill()
        # Assert
        assert denied.returncode == 0 and "result=failed" in denied.stderr
        assert still_serving > 0
        assert allowed.returncode == 0 and "result=stopped" in allowed.stderr
        assert status == 0
