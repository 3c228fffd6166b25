"""Interoperability with the real wool package, both ways."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest
from support.fleet import ExporterProcess
from support.metrics import by_worker, fetch
from support.processes import run_cli
from support.wool import SCRIPTS

from wool_idle.exceptions import IdleUnavailable, RpcError
from wool_idle.worker import LocalWorker, WorkerConnection

pytestmark = pytest.mark.e2e


class TestExporterAgainstWool:
    def test_exporter_reads_wool15_and_flags_wool13(self, wool15, wool13, wool_worker) -> None:
        """Given a wool 0.15 worker and a wool 0.13 worker, when the exporter scrapes
        them twice, then the 0.15 worker's idle series grows, and the 0.13 worker is up,
        unsupported and has no idle series."""
        # Arrange
        new, old = wool_worker(wool15), wool_worker(wool13)
        exporter = ExporterProcess([new.address, old.address])
        exporter.start()
        try:
            # Act
            first = fetch(exporter.url)
            time.sleep(0.3)
            second = fetch(exporter.url)
        finally:
            exporter.stop()
        # Assert
        idle_first = by_worker(first, "wool_worker_idle_seconds")
        idle_second = by_worker(second, "wool_worker_idle_seconds")
        assert set(idle_second) == {new.address}
        assert idle_second[new.address] > idle_first[new.address] > 0
        assert by_worker(second, "wool_worker_up") == {new.address: 1, old.address: 1}
        assert by_worker(second, "wool_worker_idle_supported") == {new.address: 1, old.address: 0}


class TestConnectionAgainstWool:
    async def test_idle_time_wool15_value_wool13_unavailable(
        self, wool15, wool13, wool_worker
    ) -> None:
        """Given real wool workers, when idle_time is awaited, then 0.15 answers a
        positive value and 0.13 raises IdleUnavailable, not RpcError."""
        # Arrange
        new, old = wool_worker(wool15), wool_worker(wool13)
        # Act
        async with WorkerConnection(new.address) as connection:
            value = await connection.idle_time(timeout=5)
        async with WorkerConnection(old.address) as connection:
            with pytest.raises(IdleUnavailable) as raised:
                await connection.idle_time(timeout=5)
        # Assert
        assert value > 0
        assert not isinstance(raised.value, RpcError)


class TestAutoscalerAgainstWool:
    async def test_autoscaler_retires_wool15_never_wool13(
        self, wool15, wool13, wool_worker
    ) -> None:
        """Given an idle wool 0.15 worker and a wool 0.13 worker behind the exporter,
        when the autoscaler runs a cycle with a positive grace and no floor, then the
        0.15 worker's process exits and the 0.13 worker keeps serving."""
        # Arrange
        new, old = wool_worker(wool15), wool_worker(wool13)
        exporter = ExporterProcess([new.address, old.address])
        exporter.start()
        await asyncio.sleep(0.5)
        try:
            # Act
            result = await asyncio.to_thread(
                run_cli,
                [
                    "autoscaler",
                    "--max-idle",
                    "0.3s",
                    "--metrics-url",
                    exporter.url,
                    "--min-workers",
                    "0",
                    "--grace",
                    "3s",
                    "--once",
                ],
            )
            deadline = time.monotonic() + 30
            while not new.exited() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            exporter.stop()
        # Assert
        assert result.returncode == 0, result.stderr
        assert f"worker={new.address}" in result.stderr and "result=stopped" in result.stderr
        assert new.exited()
        assert not old.exited()
        async with WorkerConnection(old.address) as connection:
            with pytest.raises(IdleUnavailable):
                await connection.idle_time(timeout=5)


class TestWoolClientAgainstUs:
    async def test_wool15_client_idle_and_stop_our_worker(self, wool15, tmp_path: Path) -> None:
        """Given our worker, when wool 0.15's own WorkerConnection polls idle twice and
        stops it with a grace, then it reads growing positive values and our worker
        exits 0 having logged the grace."""
        # Arrange
        log_path = tmp_path / "worker.log"
        with log_path.open("wb") as log_file:
            worker = LocalWorker(log_file=log_file)
            address = await worker.start()
            # Act
            result = await asyncio.to_thread(
                subprocess.run,
                [wool15.python, str(SCRIPTS / "wool_client.py"), address, "2.5"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert worker.process is not None
            status = await asyncio.wait_for(worker.process.wait(), 30)
        # Assert
        assert result.returncode == 0, result.stderr
        readings = json.loads(result.stdout)
        assert 0 < readings["first"] < readings["second"]
        assert status == 0
        assert "grace=2.5" in log_path.read_text()


class TestTogether:
    def test_import_wool_and_wool_idle_in_one_process(self, wool15) -> None:
        """Given wool 0.15 and wool-idle in one environment, when both are imported and
        their messages used in one process, then it works and the message names are
        the same (wool's in the default pool, ours in a private one)."""
        # Act
        result = subprocess.run(
            [wool15.python, str(SCRIPTS / "wool_together.py")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        # Assert
        assert result.returncode == 0, result.stderr
        facts = json.loads(result.stdout)
        assert facts["grace"] == 1.5
        assert facts["names"] == ["wool.runtime.protobuf.wire.StopRequest"] * 2
        assert facts["embedded"] is True


class TestConditionalStopAdvertised:
    async def test_idle_report_wool_not_honoured_ours_honoured(self, wool15, wool_worker) -> None:
        """Given a wool 0.15 worker and our worker, when idle_report asks both, then
        the wool worker's reply says the conditional stop is not honoured and ours
        says it is; both give their seconds. (That wool's own client still reads our
        idle reply, extension field and all: test_wool15_client_idle_and_stop_our_worker.)"""
        # Arrange
        theirs_worker = wool_worker(wool15)
        worker = LocalWorker()
        address = await worker.start()
        # Act
        try:
            async with WorkerConnection(theirs_worker.address) as connection:
                theirs = await connection.idle_report(timeout=5)
            async with WorkerConnection(address) as connection:
                ours = await connection.idle_report(timeout=5)
        finally:
            await worker.kill()
        # Assert
        assert theirs.conditional_stop is False and theirs.seconds > 0
        assert ours.conditional_stop is True and ours.seconds > 0


class TestWoolWorkloads:
    def test_suspended_stream_is_busy_and_never_stopped(self, wool15) -> None:
        """Given a wool client holding a stream open on a real wool 0.15 worker, its
        generator suspended until the client pulls the next item, when `wool-idle idle`
        asks and `wool-idle stop --if-idle-for` tries to stop it, then the worker reads
        busy (0.000), the stop is held (exit 3: a wool worker ignores the condition, so
        it is checked first), and the client then pulls every item."""
        # Arrange
        client = subprocess.Popen(
            [wool15.python, str(SCRIPTS / "wool_stream.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert client.stdout is not None and client.stdin is not None
            address = client.stdout.readline().strip()
            time.sleep(0.3)  # the threshold below is met by time, were the worker idle
            # Act
            idle = run_cli(["idle", address])
            held = run_cli(["stop", address, "--if-idle-for", "0.2s", "--grace", "5s"])
            client.stdin.write("pull\n")
            client.stdin.flush()
            outcome = json.loads(client.stdout.readline())
        finally:  # stdin closed, the client pulls the rest and leaves, its pool too
            client.stdin.close()
            try:
                client.wait(timeout=60)
            except subprocess.TimeoutExpired:
                client.kill()
                client.wait()
        # Assert
        assert idle.returncode == 0 and idle.stdout.strip() == "0.000"
        assert held.returncode == 3, held.stderr
        assert outcome == {"items": [0, 1, 2]}
