"""Real wool pools run by ``wool_idle.demo.pools`` (the demo's and the e2e tests' fleet)."""

from __future__ import annotations

import asyncio
import json

import pytest
from support.wool_pools import WoolFleet

from wool_idle.demo.fleet import POOLS
from wool_idle.discovery.published import read_records
from wool_idle.worker import WorkerConnection
from wool_idle.worker.process import spawn_ready

pytestmark = pytest.mark.e2e


class TestPools:
    async def test_client_on_a_tag_completes_every_task(self) -> None:
        """Given a held namespace with a hot pool of 2 and a cold pool of 1, when a
        client dispatches to the hot tag, then every task completes."""
        # Arrange
        async with WoolFleet() as fleet:
            await fleet.hold()
            await fleet.serve("hot", 2)
            await fleet.serve("cold", 1)
            # Act
            client = await fleet.client("hot", seconds=2.0, interval=0.1)
            counts = await fleet.counts(client)
        # Assert
        assert counts["failed"] == 0
        assert counts["completed"] == counts["submitted"] > 0

    async def test_client_until_sigterm_reports_progress_and_final_counts(self) -> None:
        """Given a held namespace with a hot pool of 1 and a client started through
        spawn_ready with no end (--seconds 0) and --progress, when it has reported two
        tasks and gets SIGTERM, then it ends after the task in flight, exits 0, and its
        last line counts every task it submitted as completed."""
        async with WoolFleet() as fleet:
            # Arrange
            await fleet.hold()
            await fleet.serve("hot", 1)
            options = ["--tag", "hot", "--seconds", "0", "--progress", "--interval", "0.05"]
            ready = await spawn_ready(["client", fleet.namespace, *options], module=POOLS)
            client = ready.process
            assert client.stdout is not None
            progress = [json.loads(await client.stdout.readline()) for _ in range(2)]
            # Act
            client.terminate()
            output, _ = await asyncio.wait_for(client.communicate(), 30)
        # Assert
        final = json.loads(output.decode().splitlines()[-1])
        assert ready.line == f"client on hot workers of {fleet.namespace}"
        assert [p["submitted"] for p in progress] == [1, 2]
        assert client.returncode == 0
        assert final["submitted"] == final["completed"] >= 2 and final["failed"] == 0

    async def test_client_counts_a_task_its_worker_cancelled_as_failed(self) -> None:
        """Given a held namespace with a hot pool of 1 and a client whose one task runs
        far longer than the grace, when the worker is stopped with a short grace (wool
        then cancels the task and the client's await raises CancelledError), then the
        client goes on, exits 0 and counts that task failed (and any later one, with no
        worker left), none completed."""
        async with WoolFleet() as fleet:
            # Arrange
            await fleet.hold()
            await fleet.serve("hot", 1)
            client = await fleet.client("hot", seconds=1.0, task_seconds=60.0)
            (record,) = read_records(fleet.namespace)
            async with WorkerConnection(record.address) as connection:
                while await connection.idle_time(timeout=5) != 0.0:
                    await asyncio.sleep(0.1)
                # Act
                await connection.stop(0.5, timeout=30)
            counts = await fleet.counts(client)
        # Assert
        assert client.returncode == 0
        assert counts["completed"] == 0
        assert counts["failed"] == counts["submitted"] >= 1
