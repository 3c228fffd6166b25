"""Reading the records of a real wool 0.15.7 LocalDiscovery namespace without
owning it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import wool
from support.wool_namespaces import listed, lock_path
from support.wool_pools import unique_namespace
from wool.runtime.discovery.local import _short_hash

from wool_idle.discovery.attachment import MAX_WORKERS_FOLLOWED, TooManyWorkers
from wool_idle.discovery.drop import Dropper, DropResult
from wool_idle.discovery.namespace_files import notify_path
from wool_idle.discovery.published import read_records

pytestmark = pytest.mark.e2e


class TestReadRecords:
    async def test_read_records_as_wool_lists_them(self, pools) -> None:
        """Given a namespace with two workers, when its records are read, then they are
        the workers wool's own subscriber lists, each with its uid."""
        # Act
        records = read_records(pools.namespace)
        # Assert
        assert {r.address for r in records} == await listed(pools.namespace)
        assert len({r.uid for r in records}) == 2

    def test_read_records_missing_namespace_creates_nothing(self) -> None:
        """Given a namespace that does not exist, when read, then FileNotFoundError, and
        no segment, lock file or notify directory was created (never an owner)."""
        # Arrange
        namespace = unique_namespace("absent")
        # Act / Assert
        with pytest.raises(FileNotFoundError):
            read_records(namespace)
        assert not Path("/dev/shm", _short_hash(namespace)).exists()
        assert not lock_path(namespace).exists()
        assert not notify_path(namespace).parent.exists()

    async def test_read_records_room_over_the_limit_reads_no_record(self, namespace) -> None:
        """Given a namespace whose owner stamped a capacity over MAX_WORKERS_FOLLOWED, with
        a worker, when read, then TooManyWorkers before any record is read, and a drop
        there is failed (nothing published)."""
        # Arrange
        address = "127.0.0.1:5001"
        with wool.LocalDiscovery(namespace, capacity=MAX_WORKERS_FOLLOWED + 1):
            async with wool.LocalDiscovery.Publisher(namespace) as publisher:
                await publisher.publish(
                    "worker-added",
                    wool.WorkerMetadata(uid=uuid.uuid4(), address=address, pid=1, version="0"),
                )
                # Act
                with pytest.raises(TooManyWorkers):
                    read_records(namespace)
                dropper = Dropper([namespace])
                dropper.note(address)
                result = await dropper.drop(address, {namespace})
                # Assert
                assert result is DropResult.FAILED
                assert await listed(namespace) == {address}

    async def test_read_records_skips_a_record_whose_block_is_gone(self, pools) -> None:
        """Given a namespace where a publisher left a slot whose block it unlinked (as a
        killed pool does), when read, then that record is skipped and the live workers
        are still read."""
        # Arrange
        ghost = wool.WorkerMetadata(uid=uuid.uuid4(), address="127.0.0.1:9", pid=1, version="0")
        async with wool.LocalDiscovery.Publisher(pools.namespace) as publisher:
            await publisher.publish("worker-added", ghost)
        # Act
        records = read_records(pools.namespace)
        # Assert
        assert len(records) == 2
        assert "127.0.0.1:9" not in {r.address for r in records}
