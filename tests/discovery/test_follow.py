"""Following real wool 0.15 ``LocalDiscovery`` namespaces (and a LAN one that cannot
start), held and published to by the test process through wool's own classes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
from multiprocessing.shared_memory import SharedMemory

import pytest
from support.pooled import settled
from support.wool_namespaces import held, publishing, running
from wool import LocalDiscovery
from wool.runtime.discovery import local as wool_local
from wool.runtime.discovery.local import _short_hash

from wool_idle.discovery.attachment import MAX_WORKERS_FOLLOWED, FollowProblem
from wool_idle.discovery.follow import Follower, WoolMissing, follower, require_wool
from wool_idle.discovery.lan import restrict_zeroconf
from wool_idle.discovery.local import SHARED_MEMORY, LocalAttachment, segment_name
from wool_idle.discovery.spec import DiscoverySpec
from wool_idle.logs import TextFormatter

POLL = 0.1


def local(namespace: str, **kwargs):
    return follower(DiscoverySpec.parse(f"local:{namespace}"), poll_interval=POLL, **kwargs)


def addresses(each) -> set[str]:
    return {record.address for record in each.records.values()}


class TestFollower:
    async def test_run_follows_adds_updates_and_drops(self, namespace: str) -> None:
        """Given a held namespace with one worker, when a worker is added, one re-published
        with other tags and one dropped, then the records follow each change, every record
        is reported changed once per change only, and the follower is up."""
        # Arrange
        changes: list[int] = []
        async with held(namespace) as publish:
            first = await publish.add("127.0.0.1:5001", tags=("b", "a"))
            async with running(local(namespace, on_change=lambda: changes.append(1))) as each:
                await settled(lambda: each.up)
                seen_first = addresses(each)
                # Act
                second = await publish.add("127.0.0.1:5002")
                await settled(lambda: len(each.records) == 2)
                await publish.add("127.0.0.1:5001", tags=("c",), uid=first)
                await settled(lambda: each.records[str(first)].tags == ("c",))
                await publish.drop(second)
                await settled(lambda: len(each.records) == 1)
                await asyncio.sleep(5 * POLL)  # several polls re-announce every worker
                # Assert
                assert seen_first == {"127.0.0.1:5001"}
                assert addresses(each) == {"127.0.0.1:5001"}
                assert each.records[str(first)].tags == ("c",)
                assert len(changes) == 4  # first, second, first updated, second dropped
                assert each.up

    async def test_run_namespace_missing_is_retried_then_followed(self, namespace: str) -> None:
        """Given no namespace, when the follower runs, then it is down with
        namespace_missing counted (and logged once); when the namespace appears with a
        worker, then it is up and follows it."""
        # Arrange
        async with running(local(namespace)) as each:
            await settled(lambda: each.errors[FollowProblem.NAMESPACE_MISSING] >= 3)
            missing = (each.up, dict(each.records))
            # Act
            async with held(namespace) as publish:
                await publish.add("127.0.0.1:5001")
                await settled(lambda: each.up and len(each.records) == 1)
                # Assert
                assert missing == (False, {})
                assert each.up and addresses(each) == {"127.0.0.1:5001"}

    async def test_run_bad_address_skipped_counted_once(self, namespace: str, caplog) -> None:
        """Given a namespace where one record's address is not a worker address, when
        followed over many polls, then that worker is never a record, it is counted and
        logged once, and the good worker is followed."""
        # Arrange
        caplog.set_level(logging.WARNING, logger="wool_idle.discovery")
        async with held(namespace) as publish:
            await publish.add("not an address")
            await publish.add("127.0.0.1:5001")
            # Act
            async with running(local(namespace)) as each:
                await settled(lambda: each.up)
                await asyncio.sleep(5 * POLL)
                # Assert
                assert addresses(each) == {"127.0.0.1:5001"}
                assert each.errors[FollowProblem.INVALID_ADDRESS] == 1
                skipped = [r for r in caplog.records if "not an address" in r.getMessage()]
                assert len(skipped) == 1

    async def test_run_record_address_cannot_forge_a_decision_line(
        self, namespace: str, caplog
    ) -> None:
        """Given a namespace whose record is at a Unix socket path holding blanks and the
        text of a decision on another worker (any local user can publish one), when
        followed with debug logs, then the line naming the record quotes its address as
        one value: it does not read as a decision on 10.9.9.9:1 (a grep, logfmt)."""
        # Arrange
        forged = " decision worker=10.9.9.9:1 verdict=stop result=stopped"
        address = f"unix:/tmp/s{forged}"  # never dialled: followed only
        caplog.set_level(logging.DEBUG, logger="wool_idle.discovery")
        async with held(namespace) as publish:
            await publish.add(address)
            # Act
            async with running(local(namespace)) as each:
                await settled(lambda: len(each.records) == 1)
        # Assert
        lines = [TextFormatter().format(r) for r in caplog.records if " at " in r.getMessage()]
        assert lines and all(json.dumps(address) in line for line in lines), lines
        assert not any(forged in line.replace(json.dumps(address), "") for line in lines)

    async def test_run_stale_record_reported_workers_kept(self, namespace: str) -> None:
        """Given a followed namespace with two workers, when one worker's record block
        vanishes (as when its publisher is killed), then the follower is down with
        stale_record counted and keeps both workers; when that worker is dropped, it is up
        again with the other one only."""
        # Arrange
        async with held(namespace) as publish:
            kept = await publish.add("127.0.0.1:5001")
            lost = await publish.add("127.0.0.1:5002")
            async with running(local(namespace)) as each:
                await settled(lambda: each.up and len(each.records) == 2)
                # Act
                SharedMemory(name=_short_hash(lost.hex)).unlink()
                await settled(lambda: each.errors[FollowProblem.STALE_RECORD] >= 2)
                poisoned = (each.up, addresses(each))
                await publish.drop(lost)
                await settled(lambda: each.up and len(each.records) == 1)
                # Assert
                assert poisoned == (False, {"127.0.0.1:5001", "127.0.0.1:5002"})
                assert set(each.records) == {str(kept)}

    async def test_run_replaced_namespace_is_attached_again(self, namespace: str) -> None:
        """Given a followed namespace with a worker whose publisher stays up, when the
        namespace's owner leaves and a new owner creates it again with another worker,
        then the follower forgets the old worker and follows the new one (it does not
        stay on the unlinked segment, which still reads as before)."""
        # Arrange
        owner = LocalDiscovery(namespace)
        owner.__enter__()
        async with running(local(namespace)) as each, publishing(namespace) as old:
            await old.add("127.0.0.1:5001")
            await settled(lambda: addresses(each) == {"127.0.0.1:5001"})
            # Act
            owner.__exit__(None, None, None)
            async with held(namespace) as publish:
                await publish.add("127.0.0.1:5002")
                await settled(lambda: addresses(each) == {"127.0.0.1:5002"} and each.up)
                # Assert
                assert addresses(each) == {"127.0.0.1:5002"}
                assert each.up

    async def test_run_replaced_namespace_counted_and_warned_once(
        self, namespace: str, caplog
    ) -> None:
        """Given a followed namespace with a worker whose publisher stays up (a pool
        attached to it), when its holder leaves and a new holder creates it again, then
        the follower counts one replacement, however many polls follow, and logs one
        warning that names the discovery and says to restart the pools left behind."""
        # Arrange
        caplog.set_level(logging.INFO, logger="wool_idle.discovery")
        owner = LocalDiscovery(namespace)
        owner.__enter__()
        async with running(local(namespace)) as each, publishing(namespace) as old:
            await old.add("127.0.0.1:5001")
            await settled(lambda: addresses(each) == {"127.0.0.1:5001"})
            before = each.replacements
            # Act
            owner.__exit__(None, None, None)
            async with held(namespace):
                await settled(lambda: each.up and addresses(each) == set())
                await asyncio.sleep(5 * POLL)
                # Assert
                assert (before, each.replacements) == (0, 1)
        warned = [r for r in caplog.records if "created again" in r.getMessage()]
        assert [r.levelno for r in warned] == [logging.WARNING]
        assert f"local:{namespace}" in warned[0].getMessage()
        assert "restart" in warned[0].getMessage()

    async def test_run_same_namespace_attached_again_is_no_replacement(
        self, namespace: str
    ) -> None:
        """Given a namespace nobody holds yet, when it is created and followed, then a
        worker's record block vanishes (every read fails, the follower attaches again
        and again to the same namespace) and the worker is dropped, then no
        replacement is counted: only a namespace created again after one was attached
        is."""
        # Arrange
        async with running(local(namespace)) as each:
            await settled(lambda: each.errors[FollowProblem.NAMESPACE_MISSING] >= 2)
            # Act
            async with held(namespace) as publish:
                lost = await publish.add("127.0.0.1:5001")
                await settled(lambda: each.up and len(each.records) == 1)
                SharedMemory(name=_short_hash(lost.hex)).unlink()
                await settled(lambda: each.errors[FollowProblem.STALE_RECORD] >= 2)
                await publish.drop(lost)
                await settled(lambda: each.up and len(each.records) == 0)
                # Assert
                assert each.replacements == 0

    async def test_run_replaced_namespaces_keep_no_bad_records_of_old_ones(
        self, namespace: str
    ) -> None:
        """Given a followed namespace whose owner is replaced again and again, each time
        with two records whose address is not a worker address (new uids: the old
        namespace's never come back, and no drop of them is ever published), when each
        new namespace has been followed, then the skipped records remembered are at
        most those of the namespace followed now: none of an old one is kept for good."""
        # Arrange
        rounds, bad_per_round = 5, 2
        remembered = []
        async with running(local(namespace)) as each:
            # Act
            for round_ in range(rounds):
                owner = LocalDiscovery(namespace)
                owner.__enter__()
                try:
                    async with publishing(namespace) as publish:
                        for _ in range(bad_per_round):
                            await publish.add(f"bad address {round_}")
                        good = f"127.0.0.1:{5001 + round_}"
                        await publish.add(good)
                        await settled(lambda: each.up and addresses(each) == {good})  # noqa: B023
                        await asyncio.sleep(3 * POLL)  # past the settle time of an attach
                        remembered.append(len(each._rejected))
                finally:
                    owner.__exit__(None, None, None)
        # Assert
        assert each.errors[FollowProblem.INVALID_ADDRESS] == rounds * bad_per_round
        assert max(remembered) <= bad_per_round

    async def test_run_unreadable_segment_path_is_failed_not_fatal(self, namespace: str) -> None:
        """Given a followed namespace, when its owner leaves and a symlink loop is planted
        where its segment was (/dev/shm is writable by every user), then the follower
        is down with failed counted, keeps its workers and goes on; once the loop is
        removed, the namespace is missing and its workers forgotten."""
        # Arrange
        owner = LocalDiscovery(namespace)
        owner.__enter__()
        path = os.path.join(SHARED_MEMORY, segment_name(namespace))
        async with running(local(namespace)) as each, publishing(namespace) as publish:
            await publish.add("127.0.0.1:5001")
            await settled(lambda: each.up and addresses(each) == {"127.0.0.1:5001"})
            # Act
            owner.__exit__(None, None, None)
            os.symlink(path, path)
            try:
                await settled(lambda: each.errors[FollowProblem.FAILED] >= 2)
                looped = (each.up, addresses(each))
            finally:
                os.unlink(path)
            await settled(lambda: each.errors[FollowProblem.NAMESPACE_MISSING] >= 1)
            # Assert
            assert looped == (False, {"127.0.0.1:5001"})
            assert addresses(each) == set()

    async def test_run_namespace_with_room_over_the_limit_is_not_read(
        self, namespace: str, caplog
    ) -> None:
        """Given a namespace whose owner stamped a capacity over MAX_WORKERS_FOLLOWED (every
        poll of wool's would read that many slots and every block listed), with a worker,
        when followed over many polls, then it is never read: no worker, down, and
        too_many_workers counted and logged once; when a new owner stamps a capacity
        within the limit, its worker is followed."""
        # Arrange
        caplog.set_level(logging.WARNING, logger="wool_idle.discovery")
        owner = LocalDiscovery(namespace, capacity=MAX_WORKERS_FOLLOWED + 1)
        owner.__enter__()
        try:
            async with running(local(namespace)) as each, publishing(namespace) as publish:
                await publish.add("127.0.0.1:5001")
                # Act
                await asyncio.sleep(10 * POLL)
                flooded = (each.up, dict(each.records), each.errors.copy())
        finally:
            owner.__exit__(None, None, None)
        async with held(namespace) as publish, running(local(namespace)) as each:
            await publish.add("127.0.0.1:5002")
            await settled(lambda: each.up and addresses(each) == {"127.0.0.1:5002"})
        # Assert
        assert flooded[:2] == (False, {})
        assert flooded[2][FollowProblem.TOO_MANY_WORKERS] == 1
        over = [r for r in caplog.records if "more than the 4096" in r.getMessage()]
        assert len(over) == 1

    async def test_run_workers_past_the_limit_keep_it_down_until_under(
        self, namespace: str
    ) -> None:
        """Given a follower of at most 2 workers following a namespace with 2, when a
        third worker is published, then the follower is down (its pools are incomplete)
        over many polls, keeping the workers it knew, with too_many_workers counted once; when
        a worker is dropped, it settles up again with the 2 left."""
        # Arrange
        spec = DiscoverySpec.parse(f"local:{namespace}")
        attachment = LocalAttachment(namespace, poll_interval=POLL)
        each = Follower(spec, attachment, retry_interval=POLL, max_workers=2)
        async with held(namespace) as publish, running(each):
            await publish.add("127.0.0.1:5001")
            second = await publish.add("127.0.0.1:5002")
            await settled(lambda: each.up and len(each.records) == 2)
            # Act
            await publish.add("127.0.0.1:5003")
            await settled(lambda: not each.up)
            await asyncio.sleep(10 * POLL)
            over = (each.up, addresses(each), each.errors[FollowProblem.TOO_MANY_WORKERS])
            await publish.drop(second)
            await settled(lambda: each.up)
            # Assert
            assert (over[0], over[2]) == (False, 1)
            assert {"127.0.0.1:5001", "127.0.0.1:5002"} <= over[1]  # the last known, kept
            assert addresses(each) == {"127.0.0.1:5001", "127.0.0.1:5003"}

    async def test_run_lan_interface_not_up_is_failed_not_fatal(self, monkeypatch) -> None:
        """Given LAN discovery restricted to an address no interface has, when followed,
        then every attempt fails as `failed`, it is retried, and the follower is down."""
        # Arrange
        import functools

        import wool.runtime.discovery.lan as wool_lan
        from zeroconf.asyncio import AsyncZeroconf

        unroutable = functools.partial(AsyncZeroconf, interfaces=["192.0.2.123"])
        monkeypatch.setattr(wool_lan, "AsyncZeroconf", unroutable)
        spec = DiscoverySpec.parse("lan:unit-no-interface")
        # Act
        async with running(follower(spec, poll_interval=POLL)) as each:
            await settled(lambda: each.errors[FollowProblem.FAILED] >= 3)
            # Assert
            assert each.errors[FollowProblem.FAILED] >= 3
            assert not each.up and each.records == {}

    async def test_run_lan_interface_not_up_names_the_flag(self, monkeypatch, caplog) -> None:
        """Given --wool-discovery.lan-interface set to an address no interface has, when
        the LAN discovery is followed, then its `failed` warning names the flag and the
        address, not only the OS's `No such device`."""
        # Arrange
        import wool.runtime.discovery.lan as wool_lan

        monkeypatch.setattr(wool_lan, "AsyncZeroconf", wool_lan.AsyncZeroconf)  # restored
        restrict_zeroconf(["192.0.2.123"])
        spec = DiscoverySpec.parse("lan:unit-no-interface-named")
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.discovery.follow"):
            async with running(follower(spec, poll_interval=POLL)) as each:
                await settled(lambda: each.errors[FollowProblem.FAILED] >= 1)
        # Assert
        messages = [r.getMessage() for r in caplog.records]
        assert any("--wool-discovery.lan-interface 192.0.2.123" in m for m in messages)


class TestRequireWool:
    def test_require_wool_missing_says_how_to_install(self, monkeypatch) -> None:
        """Given a process where the wool package cannot be imported, when a discovery
        needs it, then WoolMissing names the extra to install."""
        # Arrange
        monkeypatch.setitem(sys.modules, "wool", None)
        # Act / Assert
        with pytest.raises(WoolMissing, match=r"wool-idle\[wool\]"):
            require_wool()

    def test_wool_imported_only_when_followed(self) -> None:
        """Given a fresh interpreter, when it imports the exporter's command line and the
        follower (as every exporter does), then the wool package is not loaded: only a
        configured discovery imports it."""
        # Act
        code = (
            "import sys, wool_idle.exporter.cli, wool_idle.discovery.follow; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('wool', 'zeroconf')))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        # Assert
        assert done.stdout.strip() == "[]"


def recorded_reads(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The threads that read a namespace from now on: wool's walk of its slots and its
    mapping of every segment and record block (wrapped, still wool's own)."""
    threads: set[int] = set()
    for name in ("_iter_slots", "_attach"):
        original = getattr(wool_local, name)

        def recorded(*args, _original=original, **kwargs):
            threads.add(threading.get_ident())
            return _original(*args, **kwargs)

        monkeypatch.setattr(wool_local, name, recorded)
    return threads


class TestFollowerOffTheLoop:
    async def test_run_reads_the_namespace_off_the_loop_thread(
        self, namespace: str, monkeypatch
    ) -> None:
        """Given a namespace with many records (published through wool's publisher), when
        followed over many polls, then every read of it (its slots walked, every block
        mapped) runs on a thread other than the event loop's, and every worker is a
        record: the loop that answers the scrapes never waits behind a read."""
        # Arrange
        workers = 500
        loop_thread = threading.get_ident()
        with LocalDiscovery(namespace, capacity=workers):
            async with publishing(namespace) as publish:
                for port in range(20000, 20000 + workers):
                    await publish.add(f"127.0.0.1:{port}")
                readers = recorded_reads(monkeypatch)
                # Act
                async with running(local(namespace)) as each:
                    await settled(lambda: each.up and len(each.records) == workers)
                    await asyncio.sleep(5 * POLL)
                    taken_in = len(each.records)
        # Assert
        assert taken_in == workers
        assert readers and loop_thread not in readers

    async def test_run_scan_thread_that_cannot_start_is_failed_not_fatal(
        self, namespace: str, monkeypatch
    ) -> None:
        """Given a held namespace with a worker, when no thread can be started to read it
        (a pids limit), then the follower is down with failed counted and goes on; once
        threads start again, it follows the worker."""
        # Arrange
        start = threading.Thread.start

        def refused(thread: threading.Thread) -> None:
            if thread.name.startswith("wool-idle-scan"):
                raise RuntimeError("can't start new thread")
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", refused)
        async with held(namespace) as publish, running(local(namespace)) as each:
            await publish.add("127.0.0.1:5001")
            # Act
            await settled(lambda: each.errors[FollowProblem.FAILED] >= 3)
            refusing = (each.up, dict(each.records))
            monkeypatch.setattr(threading.Thread, "start", start)
            await settled(lambda: each.up and len(each.records) == 1)
            # Assert
            assert refusing == (False, {})
            assert addresses(each) == {"127.0.0.1:5001"}

    async def test_run_stalled_read_is_failed_workers_kept(
        self, namespace: str, monkeypatch, caplog
    ) -> None:
        """Given a followed namespace with two workers, when a read of it hangs (a stalled
        /dev/shm), then past the read's deadline the follower is down with failed
        counted (logged as a read that took too long), keeps both workers and goes on;
        once the read ends, it follows the namespace again."""
        # Arrange
        caplog.set_level(logging.WARNING, logger="wool_idle.discovery")
        stalled, released = threading.Event(), threading.Event()
        original = wool_local._iter_slots

        def hanging(*args, **kwargs):
            if stalled.is_set():
                released.wait(30)  # bounded: a read on the loop would hold up the test
            return original(*args, **kwargs)

        spec = DiscoverySpec.parse(f"local:{namespace}")
        attachment = LocalAttachment(namespace, poll_interval=POLL, scan_deadline=3 * POLL)
        each = Follower(spec, attachment, retry_interval=POLL)
        async with held(namespace) as publish, running(each):
            await publish.add("127.0.0.1:5001")
            await publish.add("127.0.0.1:5002")
            await settled(lambda: each.up and len(each.records) == 2)
            monkeypatch.setattr(wool_local, "_iter_slots", hanging)
            # Act
            stalled.set()
            await settled(lambda: each.errors[FollowProblem.FAILED] >= 2)
            hung = (each.up, addresses(each))
            stalled.clear()
            released.set()
            await settled(lambda: each.up)
        # Assert
        assert hung == (False, {"127.0.0.1:5001", "127.0.0.1:5002"})
        assert any("took more than" in r.getMessage() for r in caplog.records)

    async def test_run_first_read_slower_than_settle_drops_no_worker(
        self, namespace: str, monkeypatch
    ) -> None:
        """Given a followed namespace with two workers, when its holder is replaced and the
        pool publishes them again in the new namespace, but the new subscription's first
        read takes longer than its settle time, then no worker is dropped meanwhile: a
        subscription settles only once it has read the namespace (no worker is taken
        for gone because it was not read yet); once read, both are followed."""
        # Arrange
        loop_thread = threading.get_ident()
        stalled, released = threading.Event(), threading.Event()
        original = wool_local._iter_slots

        def hanging(*args, **kwargs):
            if stalled.is_set() and threading.get_ident() != loop_thread:
                released.wait(30)
            return original(*args, **kwargs)

        spec = DiscoverySpec.parse(f"local:{namespace}")
        attachment = LocalAttachment(namespace, poll_interval=POLL, scan_deadline=100 * POLL)
        each = Follower(spec, attachment, retry_interval=POLL)
        owner = LocalDiscovery(namespace)
        owner.__enter__()
        async with running(each), publishing(namespace) as publish:
            first = await publish.add("127.0.0.1:5001")
            second = await publish.add("127.0.0.1:5002")
            await settled(lambda: each.up and len(each.records) == 2)
            monkeypatch.setattr(wool_local, "_iter_slots", hanging)
            stalled.set()
            # Act
            owner.__exit__(None, None, None)
            with LocalDiscovery(namespace):  # entered at once: never missing
                await publish.add("127.0.0.1:5001", uid=first)
                await publish.add("127.0.0.1:5002", uid=second)
                await settled(lambda: each.replacements == 1)
                await asyncio.sleep(5 * POLL)  # past the settle time: 2 polls
                unread = addresses(each)
                stalled.clear()
                released.set()
                await settled(lambda: each.up and len(each.records) == 2)
                # Assert
                assert unread == {"127.0.0.1:5001", "127.0.0.1:5002"}
                assert set(each.records) == {str(first), str(second)}
