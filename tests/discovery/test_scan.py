"""Reading a real wool 0.15 ``LocalDiscovery`` namespace off the event loop: wool's events
from two reads, and the loop's turns while a read's events are taken in."""

from __future__ import annotations

import asyncio
import uuid

from support.pooled import settled
from support.wool_namespaces import publishing
from wool import LocalDiscovery, WorkerMetadata

from wool_idle.daemon_thread import DaemonThreads
from wool_idle.discovery.scan import CHUNK, changes, scans


def worker(uid: uuid.UUID, port: int) -> WorkerMetadata:
    return WorkerMetadata(uid=uid, address=f"127.0.0.1:{port}", pid=4242, version="0.15.7")


class TestChanges:
    def test_changes_are_wools_events_for_what_changed_only(self) -> None:
        """Given the workers of the last read and those of this one (one kept as it was,
        one re-published at another port, one gone, one new), then the events are wool's:
        added for the new, dropped for the gone, updated for the changed, nothing for the
        one unchanged (wool re-announces it, to no effect); the known workers become
        those read."""
        # Arrange
        same, moved, gone, new = (uuid.uuid4() for _ in range(4))
        known = {str(u): worker(u, 5000 + i) for i, u in enumerate((same, moved, gone))}
        found = {str(same): worker(same, 5000), str(moved): worker(moved, 6001)}
        found[str(new)] = worker(new, 5003)
        # Act
        events = changes(known, found)
        # Assert
        assert sorted((e.type, e.metadata.uid) for e in events) == sorted(
            [("worker-added", new), ("worker-dropped", gone), ("worker-updated", moved)]
        )
        assert known == found


class TestScans:
    async def test_scans_let_the_loop_run_between_chunks(self, namespace: str) -> None:
        """Given a namespace listing more than CHUNK workers, when its first read is taken
        in while another task runs on the loop, then that task runs while part of the
        read is taken in (the loop is not held for the whole read), every worker is
        added once, each read is reported done after its last event, and the reads
        after it (nothing changed) yield nothing."""
        # Arrange
        workers = CHUNK + 44
        taken: list[str] = []
        seen_by_other: set[int] = set()
        reads: list[int] = []

        async def other() -> None:
            while True:
                seen_by_other.add(len(taken))
                await asyncio.sleep(0)

        async def consume() -> None:
            async for event in scans(
                namespace,
                poll_interval=0.05,
                threads=DaemonThreads(1, "test-scan"),
                on_scanned=lambda: reads.append(len(taken)),
            ):
                taken.append(event.type)

        with LocalDiscovery(namespace, capacity=workers):
            async with publishing(namespace) as publish:
                for port in range(20000, 20000 + workers):
                    await publish.add(f"127.0.0.1:{port}")
                tasks = [asyncio.ensure_future(other()), asyncio.ensure_future(consume())]
                # Act
                try:
                    await settled(lambda: len(reads) >= 3)
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
        # Assert
        assert taken == ["worker-added"] * workers
        assert any(0 < n < workers for n in seen_by_other)
        assert reads[:3] == [workers] * 3  # each read reported after its events; no more
