"""Retire under load: 20 real workers, random tasks, an eager autoscaler.

Nothing may be lost: every task either completes or is refused before it
starts with a retryable error and is retried elsewhere; every stop a worker
accepts happens when it has been idle at least --max-idle (from the workers'
own logs); the floor holds throughout.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import tasks
from support.fleet import ExporterProcess
from support.processes import spawn_cli

from wool_idle.exceptions import TaskCancelled, TransientRpcError
from wool_idle.worker import LocalWorker, WorkerConnection

pytestmark = pytest.mark.e2e

WORKERS = 20
FLOOR = 5
MAX_IDLE = 0.5
LOAD_SECONDS = 30.0
ARRIVALS_PER_SECOND = 12.0
SEED = 20261129
ACCEPTED = re.compile(r"stop accepted caller=\S+ idle=([0-9.]+) grace=")
REFUSED = re.compile(r"stop refused .* reason=FAILED_PRECONDITION")


@dataclass
class Tally:
    dispatched: int = 0
    completed: int = 0
    refused_and_retried: int = 0
    cancelled: int = 0
    lost: list[str] = field(default_factory=list)
    fewest_alive: int = WORKERS


async def run_task(
    length: float,
    alive: list[str],
    connections: dict[str, WorkerConnection],
    tally: Tally,
    rng: random.Random,
) -> None:
    """Dispatch one task; on a refusal before start, retry on another worker."""
    tally.dispatched += 1
    while alive:
        address = rng.choice(alive)
        try:
            result = await connections[address].dispatch(tasks.sleep_for, length)
        except TransientRpcError:
            tally.refused_and_retried += 1
            if address in alive:
                alive.remove(address)  # refused: it is stopping or gone
            continue
        except TaskCancelled:
            tally.cancelled += 1
            return
        except Exception as error:  # anything else is a lost task
            tally.lost.append(repr(error))
            return
        assert result == length
        tally.completed += 1
        return
    tally.lost.append("no worker left")


async def watch_floor(workers: list[LocalWorker], tally: Tally, done: asyncio.Event) -> None:
    while not done.is_set():
        alive = sum(w.process is not None and w.process.returncode is None for w in workers)
        tally.fewest_alive = min(tally.fewest_alive, alive)
        await asyncio.sleep(0.02)


class TestRetireUnderLoad:
    async def test_no_task_lost_stops_only_idle_floor_held(
        self, tmp_path: Path, record_property: Callable[[str, object], None]
    ) -> None:
        """Given 20 workers, tasks at random times and of random lengths for 30 s, and
        the autoscaler with a tiny max-idle and interval, then zero tasks are cancelled
        or lost, every accepted stop came after at least max-idle of idle, and no fewer
        than the floor of workers ran at any moment."""
        # Arrange
        tasks.by_value()
        rng = random.Random(SEED)
        logs = [open(tmp_path / f"worker{i}.log", "wb") for i in range(WORKERS)]  # noqa: SIM115
        workers = [LocalWorker(log_file=log) for log in logs]
        addresses = list(await asyncio.gather(*(w.start() for w in workers)))
        exporter = ExporterProcess(addresses)
        exporter.start()
        autoscaler = spawn_cli(
            [
                "autoscaler",
                "--metrics-url",
                exporter.url,
                "--max-idle",
                f"{MAX_IDLE}s",
                "--interval",
                "0.2s",
                "--min-workers",
                str(FLOOR),
                "--max-stops-per-cycle",
                "2",
                "--cooldown",
                "1s",
                "--grace",
                "10s",
                "--listen",
                "127.0.0.1:0",
            ]
        )
        connections = {a: WorkerConnection(a) for a in addresses}
        alive, tally, done = list(addresses), Tally(), asyncio.Event()
        watcher = asyncio.ensure_future(watch_floor(workers, tally, done))
        running: list[asyncio.Future[None]] = []
        try:
            # Act
            loop = asyncio.get_running_loop()
            end = loop.time() + LOAD_SECONDS
            while loop.time() < end:
                length = rng.uniform(0.05, 1.0)
                running.append(
                    asyncio.ensure_future(run_task(length, alive, connections, tally, rng))
                )
                await asyncio.sleep(rng.expovariate(ARRIVALS_PER_SECOND))
            await asyncio.gather(*running)
        finally:
            done.set()
            await watcher
            autoscaler.terminate()
            autoscaler.wait(timeout=30)
            exporter.stop()
            for connection in connections.values():
                await connection.close()
            for worker in workers:
                await worker.kill()
            for log in logs:
                log.close()
        texts = [(tmp_path / f"worker{i}.log").read_text() for i in range(WORKERS)]
        accepted = [float(m) for text in texts for m in ACCEPTED.findall(text)]
        refused = sum(len(REFUSED.findall(text)) for text in texts)
        record_property(  # the counts belong in the run's output, pass or fail (conftest)
            "summary",
            f"stress: seed={SEED} workers={WORKERS} floor={FLOOR} max_idle={MAX_IDLE}s "
            f"tasks dispatched={tally.dispatched} completed={tally.completed} "
            f"refused-and-retried={tally.refused_and_retried} cancelled={tally.cancelled} "
            f"lost={len(tally.lost)} stops accepted={len(accepted)} stops refused={refused} "
            f"fewest workers alive={tally.fewest_alive}",
        )
        # Assert
        assert tally.cancelled == 0
        assert tally.lost == []
        assert tally.completed == tally.dispatched > 100
        assert accepted, "the autoscaler retired no one: the test exercised nothing"
        assert all(idle >= MAX_IDLE for idle in accepted), accepted
        assert tally.fewest_alive >= FLOOR
