"""Publishing worker-dropped in a real wool 0.15.7 LocalDiscovery namespace from
another process, as wool's own subscribers see it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import wool
from support.wool_namespaces import listed, lock_path
from support.wool_pools import WoolFleet, unique_namespace

from wool_idle.discovery.drop import Dropper, DropResult
from wool_idle.discovery.namespace_files import notify_path
from wool_idle.discovery.published import read_records

pytestmark = pytest.mark.e2e

WAIT = 10.0


async def next_drop(stream: AsyncIterator[Any]) -> Any:
    """The next worker-dropped event of a wool subscription (rescans in between
    repeat every worker as worker-updated)."""
    async for event in stream:
        if event.type == "worker-dropped":
            return event
    raise AssertionError("the subscription ended")


def noted(dropper: Dropper, address: str) -> Dropper:
    """``dropper``, having noted ``address`` as the daemon does right before a stop."""
    dropper.note(address)
    return dropper


class TestDropper:
    async def test_drop_unlists_the_worker_for_wool_subscribers(self, pools) -> None:
        """Given two listed workers, when one is dropped by address, then the result is
        published, a fresh wool subscriber lists only the other, and the pool that
        published them is still running."""
        # Arrange
        dropped, kept = sorted(await listed(pools.namespace))
        # Act
        result = await noted(Dropper([pools.namespace]), dropped).drop(dropped, {pools.namespace})
        # Assert
        assert result is DropResult.PUBLISHED
        assert await listed(pools.namespace) == {kept}
        assert all(p.returncode is None for p in pools.processes)

    async def test_drop_wakes_notification_only_subscribers(self, pools) -> None:
        """Given a wool subscriber without polling (wool's default: it rescans only
        when notified) that has listed both workers, when one is dropped, then it
        receives worker-dropped for that worker."""
        # Arrange
        stream = aiter(wool.LocalDiscovery(pools.namespace).subscribe())
        added = [await asyncio.wait_for(anext(stream), WAIT) for _ in range(2)]
        dropped = added[0].metadata.address
        try:
            # Act
            result = await noted(Dropper([pools.namespace]), dropped).drop(
                dropped, {pools.namespace}
            )
            event = await asyncio.wait_for(next_drop(stream), WAIT)
        finally:
            await stream.aclose()
        # Assert
        assert result is DropResult.PUBLISHED
        assert event.metadata.address == dropped

    @pytest.mark.parametrize(
        ("spelling", "expected"),
        [
            ("[0:0:0:0:0:0:0:1]:{port}", DropResult.PUBLISHED),
            ("[0::1]:{port}", DropResult.PUBLISHED),
            ("127.0.0.1:{port}", DropResult.NOT_FOUND),
        ],
    )
    async def test_drop_finds_an_ipv6_record_under_another_spelling(
        self, spelling: str, expected: DropResult
    ) -> None:
        """Given a wool pool on [::1] (its worker listed as [::1]:P), when its worker is
        noted and dropped under another spelling of that address (the label the
        autoscaler stopped it under), then its record is dropped; under 127.0.0.1:P,
        another address (a worker apart may listen there), it is not found and stays."""
        async with WoolFleet() as fleet:
            # Arrange
            await fleet.hold()
            await fleet.serve("v6", 1, host="[::1]")
            (listed_as,) = await listed(fleet.namespace)
            stopped = spelling.format(port=listed_as.rpartition(":")[2])
            # Act
            result = await noted(Dropper([fleet.namespace]), stopped).drop(
                stopped, {fleet.namespace}
            )
            # Assert
            assert listed_as.startswith("[::1]:")
            assert result is expected
            remaining = set() if expected is DropResult.PUBLISHED else {listed_as}
            assert await listed(fleet.namespace) == remaining

    async def test_drop_unknown_address_is_not_found(self, pools) -> None:
        """Given an address no record has, when dropped, then not_found and both
        workers stay listed."""
        # Act
        result = await Dropper([pools.namespace]).drop("127.0.0.1:9", {pools.namespace})
        # Assert
        assert result is DropResult.NOT_FOUND
        assert len(await listed(pools.namespace)) == 2

    async def test_drop_address_of_two_records_is_ambiguous(self, pools) -> None:
        """Given a second record at one worker's address (two workers sharing a port,
        as gRPC's SO_REUSEPORT lets them), when that address is dropped, then
        ambiguous, and every record stays listed: which one was stopped is unknown."""
        # Arrange
        shared, other = sorted(await listed(pools.namespace))
        twin = wool.WorkerMetadata(uid=uuid.uuid4(), address=shared, pid=1, version="0.15.7")
        async with wool.LocalDiscovery.Publisher(pools.namespace) as publisher:
            await publisher.publish("worker-added", twin)  # listed while the publisher is open
            # Act
            result = await noted(Dropper([pools.namespace]), shared).drop(shared, {pools.namespace})
            # Assert
            assert result is DropResult.AMBIGUOUS
            assert [r.address for r in read_records(pools.namespace)].count(shared) == 2
            assert await listed(pools.namespace) == {shared, other}

    async def test_drop_address_listed_in_two_namespaces_naming_none_is_ambiguous(
        self, pools
    ) -> None:
        """Given a worker whose series name no namespace, listed in one followed namespace,
        and a record at its address in another followed one (a worker of another pool
        sharing its port, as SO_REUSEPORT lets it), when it is dropped, then ambiguous,
        and both records stay listed: which of them was stopped is unknown."""
        # Arrange
        shared, other = sorted(await listed(pools.namespace))
        fleet = WoolFleet()
        await fleet.hold()
        twin = wool.WorkerMetadata(uid=uuid.uuid4(), address=shared, pid=1, version="0.15.7")
        try:
            async with wool.LocalDiscovery.Publisher(fleet.namespace) as publisher:
                await publisher.publish("worker-added", twin)
                dropper = noted(Dropper([pools.namespace, fleet.namespace]), shared)
                # Act
                result = await dropper.drop(shared, set())
                # Assert
                assert result is DropResult.AMBIGUOUS
                assert await listed(pools.namespace) == {shared, other}
                assert await listed(fleet.namespace) == {shared}
        finally:
            await fleet.close()

    async def test_drop_worker_published_after_the_stop_is_replaced(self, pools) -> None:
        """Given a worker noted before its stop, and, by the time of its drop, its record
        gone and another worker published at its address (its pool restarted on the
        same port), when the drop is made, then replaced, and the new worker stays
        listed (a drop by address alone would unlist a live worker)."""
        # Arrange
        address, _ = sorted(await listed(pools.namespace))
        dropper = noted(Dropper([pools.namespace]), address)
        (stopped,) = [r.uid for r in read_records(pools.namespace) if r.address == address]
        gone = wool.WorkerMetadata(uid=stopped, address="", pid=0, version="")
        new = wool.WorkerMetadata(uid=uuid.uuid4(), address=address, pid=1, version="0.15.7")
        async with wool.LocalDiscovery.Publisher(pools.namespace) as publisher:
            await publisher.publish("worker-dropped", gone)
            await publisher.publish("worker-added", new)  # listed while the publisher is open
            # Act
            result = await dropper.drop(address, {pools.namespace})
            # Assert
            assert result is DropResult.REPLACED
            assert [r.uid for r in read_records(pools.namespace) if r.address == address] == [
                new.uid
            ]

    async def test_drop_missing_namespace(self) -> None:
        """Given a namespace that does not exist, when a drop is made, then
        namespace_missing, and nothing was created in its name."""
        # Arrange
        namespace = unique_namespace("absent")
        # Act
        result = await Dropper([namespace]).drop("127.0.0.1:9", {namespace})
        # Assert
        assert result is DropResult.NAMESPACE_MISSING
        assert not lock_path(namespace).exists()

    async def test_drop_publishes_where_the_worker_is(self, pools) -> None:
        """Given a worker whose series name a missing namespace and its own, both
        followed, when dropped, then published (the missing one does not hide the drop
        made in the other)."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        # Act
        dropper = Dropper([unique_namespace("absent"), pools.namespace])
        result = await noted(dropper, address).drop(address, set(dropper.namespaces))
        # Assert
        assert result is DropResult.PUBLISHED

    async def test_drop_names_no_namespace_and_listed_nowhere_makes_none(
        self, pools, caplog
    ) -> None:
        """Given a followed namespace, when a worker it does not list, whose series name
        no wool namespace (a targets-file worker), is dropped, then no drop is made
        (None, nothing logged but at debug: no not_found) and the namespace is as it was."""
        # Arrange
        before = await listed(pools.namespace)
        caplog.set_level(logging.DEBUG, logger="wool_idle.discovery")
        # Act
        result = await noted(Dropper([pools.namespace]), "127.0.0.1:9").drop("127.0.0.1:9", set())
        # Assert
        assert result is None
        assert await listed(pools.namespace) == before
        assert [r.levelno for r in caplog.records] == [logging.DEBUG]
        assert "worker 127.0.0.1:9: no drop (in no namespace and named in none)" in caplog.text

    async def test_drop_names_no_namespace_but_listed_is_published(self, pools) -> None:
        """Given a wool worker listed in a followed namespace whose series name none (it
        is in a targets file too, whose labels win), when it is dropped, then it is
        published there: wool's clients no longer route to it."""
        # Arrange
        dropped, kept = sorted(await listed(pools.namespace))
        # Act
        result = await noted(Dropper([pools.namespace]), dropped).drop(dropped, set())
        # Assert
        assert result is DropResult.PUBLISHED
        assert await listed(pools.namespace) == {kept}

    async def test_drop_only_from_the_namespace_named(self, pools, caplog) -> None:
        """Given two followed namespaces (one missing), when a worker whose series name
        its own is dropped, then it is published there and the other is never tried."""
        # Arrange
        absent = unique_namespace("absent")
        address = sorted(await listed(pools.namespace))[0]
        caplog.set_level(logging.INFO, logger="wool_idle.discovery")
        # Act
        dropper = Dropper([absent, pools.namespace])
        result = await noted(dropper, address).drop(address, {pools.namespace})
        # Assert
        assert result is DropResult.PUBLISHED
        assert f"drop published (local:{pools.namespace} published)" in caplog.text
        assert absent not in caplog.text

    async def test_drop_namespace_not_followed_is_not_dropped(self, pools, caplog) -> None:
        """Given a worker listed in a namespace the dropper does not follow (it follows
        another), when it is dropped naming that namespace, then not_followed, logged as
        a warning, and it stays listed (no namespace is touched)."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        other = unique_namespace("absent")
        # Act
        result = await noted(Dropper([other]), address).drop(address, {pools.namespace})
        # Assert
        assert result is DropResult.NOT_FOLLOWED
        assert address in await listed(pools.namespace)
        assert f"drop not_followed ({pools.namespace} not_followed)" in caplog.text
        assert [r.levelno for r in caplog.records] == [logging.WARNING]

    async def test_drop_lan_namespace_makes_none(self, pools) -> None:
        """Given a dropper following the worker's namespace on LAN only, when it is
        dropped, then no drop is made (LAN has none from another process): None, and
        the local namespace of the same name is not touched."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        # Act
        dropper = Dropper([], lan=[pools.namespace])
        result = await noted(dropper, address).drop(address, {pools.namespace})
        # Assert
        assert result is None
        assert address in await listed(pools.namespace)

    async def test_drop_lock_held_elsewhere_times_out(self, pools) -> None:
        """Given another process holding the namespace's lock, when a drop with a short
        lock timeout is made, then lock_timeout and the worker stays listed."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(lock_path(pools.namespace))],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            # Act
            dropper = Dropper([pools.namespace], lock_timeout=0.3)
            result = await noted(dropper, address).drop(address, {pools.namespace})
        finally:
            holder.kill()
            holder.wait()
        # Assert
        assert result is DropResult.LOCK_TIMEOUT
        assert address in await listed(pools.namespace)

    async def test_drop_any_other_error_is_failed(self, pools, caplog) -> None:
        """Given a namespace whose lock file cannot be opened (a directory stands in its
        place), when a drop is made, then failed, logged with the error, never raised."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        path = lock_path(pools.namespace)
        path.unlink(missing_ok=True)
        path.mkdir()
        try:
            # Act
            result = await noted(Dropper([pools.namespace]), address).drop(
                address, {pools.namespace}
            )
        finally:
            shutil.rmtree(path)
        # Assert
        assert result is DropResult.FAILED
        assert "IsADirectoryError" in caplog.text

    async def test_drop_never_opens_a_planted_lock_fifo(self, pools, caplog) -> None:
        """Given a FIFO where the namespace's lock file goes (anyone may make
        /tmp/wool-lock-<hash> first; with no reader, wool's opening it for writing
        blocks the event loop for good: here one reads, so nothing hangs either way),
        when a drop is made, then failed, logged, and the worker stays listed."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        path = lock_path(pools.namespace)
        path.unlink(missing_ok=True)
        os.mkfifo(path)
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            # Act
            result = await noted(Dropper([pools.namespace]), address).drop(
                address, {pools.namespace}
            )
        finally:
            os.close(reader)
            path.unlink()
        # Assert
        assert result is DropResult.FAILED
        assert "not a regular file with one link" in caplog.text
        assert address in await listed(pools.namespace)

    async def test_drop_never_leaves_another_users_lock_file_to_wool(
        self, pools, caplog, monkeypatch
    ) -> None:
        """Given a regular lock file of another user (its owner may swap it for a FIFO
        between the check and wool's own open, which then blocks the event loop for
        good; told apart here by this process's user id seeming another), when a drop
        is made, then failed, logged, and the worker stays listed."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        lock_path(pools.namespace).touch()
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
        # Act
        result = await noted(Dropper([pools.namespace]), address).drop(address, {pools.namespace})
        monkeypatch.undo()
        # Assert
        assert result is DropResult.FAILED
        assert "not by this process's user" in caplog.text
        assert address in await listed(pools.namespace)

    async def test_drop_wake_failure_keeps_the_drop(self, pools, caplog) -> None:
        """Given a namespace whose notify file cannot be truncated, when a drop is
        made, then it is still published (the drop stands) and the failure is logged."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        notify = notify_path(pools.namespace)
        notify.unlink(missing_ok=True)
        notify.mkdir()
        try:
            # Act
            result = await noted(Dropper([pools.namespace]), address).drop(
                address, {pools.namespace}
            )
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(notify)
        # Assert
        assert result is DropResult.PUBLISHED
        assert "cannot wake its subscribers" in caplog.text
        assert address not in await listed(pools.namespace)

    async def test_drop_never_writes_through_a_planted_notify_link(
        self, pools, caplog, tmp_path
    ) -> None:
        """Given a notify file replaced by a symlink to another file (anyone may make
        /tmp/wool-<namespace> first), when a drop is made, then the drop is published,
        the linked file keeps its content and the refusal is logged."""
        # Arrange
        address = sorted(await listed(pools.namespace))[0]
        victim = tmp_path / "precious.conf"
        victim.write_text("keep me\n")
        notify = notify_path(pools.namespace)
        notify.unlink(missing_ok=True)
        notify.symlink_to(victim)
        try:
            # Act
            result = await noted(Dropper([pools.namespace]), address).drop(
                address, {pools.namespace}
            )
        finally:
            notify.unlink()
            notify.touch()
        # Assert
        assert result is DropResult.PUBLISHED
        assert victim.read_text() == "keep me\n"
        assert "cannot wake its subscribers" in caplog.text


HOLD_LOCK = """
import sys, time, portalocker
lock = open(sys.argv[1], "w")
portalocker.lock(lock, portalocker.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""
