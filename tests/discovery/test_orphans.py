"""The workers a replaced namespace may have orphaned, counted by a ``Follower`` of real
wool 0.15 ``LocalDiscovery`` namespaces: a holder restarted is the namespace's owner
leaving and a new one creating it again, the pools publishing through wool's own
publisher (those that restarted with it publish again on the new namespace)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from support.clock import Clock
from support.pooled import settled
from support.wool_namespaces import Publications, held, publishing, running
from wool import LocalDiscovery

from wool_idle.discovery.attachment import FollowProblem
from wool_idle.discovery.follow import Follower
from wool_idle.discovery.local import LocalAttachment
from wool_idle.discovery.orphans import ORPHANS_EXPIRY, Orphans
from wool_idle.discovery.records import WorkerRecord
from wool_idle.discovery.spec import DiscoverySpec

POLL = 0.1


def following(namespace: str, clock: Clock | None = None) -> Follower:
    """A follower of ``local:<namespace>`` whose orphans read ``clock`` (if given)."""
    spec = DiscoverySpec.parse(f"local:{namespace}")
    attachment = LocalAttachment(namespace, poll_interval=POLL)
    orphans = Orphans(clock=clock) if clock is not None else None
    return Follower(spec, attachment, retry_interval=POLL, orphans=orphans)


def listing(*uids: str) -> dict[str, WorkerRecord]:
    """Workers of no tags listed under ``uids``, as a follower keeps them."""
    return {uid: WorkerRecord(uid, "127.0.0.1:5001", 4242, "0.15.7") for uid in uids}


def addresses(each: Follower) -> set[str]:
    return {record.address for record in each.records.values()}


class Holder:
    """The owner of a namespace, as wool's first entrant is; ``stop`` (once) unlinks it."""

    def __init__(self, namespace: str) -> None:
        self.owner: LocalDiscovery | None = LocalDiscovery(namespace)
        self.owner.__enter__()

    def stop(self) -> None:
        if self.owner is not None:
            self.owner.__exit__(None, None, None)
            self.owner = None


@contextlib.asynccontextmanager
async def old_pool(namespace: str, *workers: str) -> AsyncIterator[Holder]:
    """A holder of ``namespace`` and a pool publishing ``workers`` on it, still attached
    once the holder is stopped."""
    holder = Holder(namespace)
    try:
        async with publishing(namespace) as publish:
            for address in workers:
                await publish.add(address)
            yield holder
    finally:
        holder.stop()


async def holder_gone(each: Follower, holder: Holder) -> None:
    """Stop the holder and wait until the follower has found its namespace missing."""
    missing = each.errors[FollowProblem.NAMESPACE_MISSING]
    holder.stop()
    await settled(lambda: each.errors[FollowProblem.NAMESPACE_MISSING] > missing)


async def republished(each: Follower, publish: Publications, *workers: str) -> None:
    """Publish ``workers`` on the new namespace; wait until the follower lists only them."""
    for address in workers:
        await publish.add(address)
    await settled(lambda: each.replacements >= 1 and addresses(each) == set(workers))


class TestOrphans:
    async def test_count_planned_restart_every_pool_back_is_zero(self, namespace: str) -> None:
        """Given a followed namespace with two workers, when its holder restarts with the
        pool (the namespace missing a while, then every worker published again on the
        new one under a new uid), then no worker is orphaned."""
        # Arrange
        each = following(namespace)
        async with running(each), old_pool(namespace, "127.0.0.1:5001", "127.0.0.1:5002") as holder:
            await settled(lambda: len(each.records) == 2)
            # Act
            await holder_gone(each, holder)
            async with held(namespace) as publish:
                await republished(each, publish, "127.0.0.1:5001", "127.0.0.1:5002")
                # Assert
                assert each.orphans.count() == 0

    async def test_count_pool_left_on_old_namespace_is_baseline_less_seen(
        self, namespace: str
    ) -> None:
        """Given a followed namespace with three workers, when its holder restarts (the
        namespace missing a while) and only one worker is published on the new one, the
        pool of the others left attached to the old one, then two are orphaned: the
        three listed before the namespace went missing, less the one seen since."""
        # Arrange
        each = following(namespace)
        workers = ("127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003")
        async with running(each), old_pool(namespace, *workers) as holder:
            await settled(lambda: len(each.records) == 3)
            # Act
            await holder_gone(each, holder)
            async with held(namespace) as publish:
                await republished(each, publish, "127.0.0.1:5004")
                # Assert
                assert each.orphans.count() == 2

    async def test_count_holder_replaced_at_once_pool_left_is_every_worker(
        self, namespace: str
    ) -> None:
        """Given a followed namespace with two workers, when a new holder creates it again
        at once (never seen missing) and its pool stays on the old one, then both are
        orphaned."""
        # Arrange
        each = following(namespace)
        async with running(each), old_pool(namespace, "127.0.0.1:5001", "127.0.0.1:5002") as holder:
            await settled(lambda: len(each.records) == 2)
            # Act
            holder.stop()
            with LocalDiscovery(namespace):  # at once (a read between may find it missing)
                await settled(lambda: each.replacements == 1 and each.up and not each.records)
                # Assert
                assert each.orphans.count() == 2

    async def test_count_republished_then_retired_stays_zero(self, namespace: str) -> None:
        """Given a followed namespace with two workers whose holder restarts with the pool,
        when one worker is published on the new namespace and retired (dropped) before
        the other is published, then none is orphaned: each came back, though the
        namespace lists one now; nor once the other is retired too."""
        # Arrange
        each = following(namespace)
        async with running(each), old_pool(namespace, "127.0.0.1:5001", "127.0.0.1:5002") as holder:
            await settled(lambda: len(each.records) == 2)
            await holder_gone(each, holder)
            async with held(namespace) as publish:
                # Act
                first = await publish.add("127.0.0.1:5001")
                await settled(lambda: addresses(each) == {"127.0.0.1:5001"})
                await publish.drop(first)
                await settled(lambda: not each.records)
                second = await publish.add("127.0.0.1:5002")
                await settled(lambda: addresses(each) == {"127.0.0.1:5002"})
                back = each.orphans.count()
                await publish.drop(second)
                await settled(lambda: not each.records)
                # Assert
                assert back == 0
                assert each.orphans.count() == 0

    async def test_count_second_replacement_keeps_the_first_orphans(self, namespace: str) -> None:
        """Given a followed namespace with three workers whose holder restarted leaving two
        on the old namespace (one listed on the new one), when the holder restarts
        again and no worker is published on the newest namespace, then three are
        orphaned: the one listed right before the second replacement, and the two still
        on the first namespace (the second replacement did not bring them back)."""
        # Arrange
        each = following(namespace)
        workers = ("127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003")
        async with running(each), old_pool(namespace, *workers) as holder:
            await settled(lambda: len(each.records) == 3)
            await holder_gone(each, holder)
            async with old_pool(namespace, "127.0.0.1:5004") as second:
                await settled(lambda: each.replacements == 1 and len(each.records) == 1)
                first_count = each.orphans.count()
                # Act
                await holder_gone(each, second)
                with LocalDiscovery(namespace):
                    await settled(lambda: each.replacements == 2 and each.up)
                    # Assert
                    assert first_count == 2
                    assert each.orphans.count() == 3

    async def test_count_second_replacement_once_all_back_takes_a_fresh_baseline(
        self, namespace: str
    ) -> None:
        """Given a followed namespace with two workers whose holder restarted with the
        pool (both back on the new one), when the holder restarts again at once (never
        seen missing) and its pool stays on the old one, then two are orphaned: the
        two listed right before the second replacement, none of the first counted twice."""
        # Arrange
        each = following(namespace)
        workers = ("127.0.0.1:5001", "127.0.0.1:5002")
        async with running(each), old_pool(namespace, *workers) as holder:
            await settled(lambda: len(each.records) == 2)
            await holder_gone(each, holder)
            async with old_pool(namespace, *workers) as second:
                await settled(lambda: each.replacements == 1 and len(each.records) == 2)
                first_count = each.orphans.count()
                # Act
                second.stop()
                with LocalDiscovery(namespace):
                    await settled(lambda: each.replacements == 2 and each.up and not each.records)
                    # Assert
                    assert first_count == 0
                    assert each.orphans.count() == 2

    async def test_count_empty_namespace_replaced_is_zero(self, namespace: str) -> None:
        """Given a followed namespace listing no worker, when its holder restarts, then
        no worker is orphaned."""
        # Arrange
        each = following(namespace)
        async with running(each), old_pool(namespace) as holder:
            await settled(lambda: each.up and each.read_once)
            # Act
            await holder_gone(each, holder)
            with LocalDiscovery(namespace):
                await settled(lambda: each.replacements == 1 and each.up)
                # Assert
                assert each.orphans.count() == 0

    async def test_count_new_follower_of_a_replaced_namespace_is_zero(self, namespace: str) -> None:
        """Given a namespace whose holder restarted leaving its pool on the old one, when a
        follower starts on it afterwards (an exporter restarted), then it counts no
        orphan: it knows of no replacement."""
        # Arrange
        async with old_pool(namespace, "127.0.0.1:5001") as holder:
            holder.stop()
            with LocalDiscovery(namespace):
                each = following(namespace)
                # Act
                async with running(each):
                    await settled(lambda: each.up and each.read_once)
                    # Assert
                    assert (each.replacements, each.orphans.count()) == (0, 0)

    async def test_count_expiry_passed_is_zero_for_good(self, namespace: str) -> None:
        """Given a followed namespace whose holder restarted leaving two workers on the
        old one (two orphaned), when ``ORPHANS_EXPIRY`` has passed on the follower's
        clock, then none is orphaned any more, and still none once a worker of the old
        namespace is published on the new one."""
        # Arrange
        clock = Clock()
        each = following(namespace, clock)
        async with running(each), old_pool(namespace, "127.0.0.1:5001", "127.0.0.1:5002") as holder:
            await settled(lambda: len(each.records) == 2)
            await holder_gone(each, holder)
            async with held(namespace) as publish:
                await settled(lambda: each.replacements == 1 and each.up)
                before = each.orphans.count()
                # Act
                clock.now += ORPHANS_EXPIRY
                expired = each.orphans.count()
                await republished(each, publish, "127.0.0.1:5001")
                # Assert
                assert (before, expired) == (2, 0)
                assert each.orphans.count() == 0

    async def test_count_another_pool_started_does_not_make_up_for_orphans(
        self, namespace: str
    ) -> None:
        """Given a followed namespace with a pool ``a`` of two workers and a pool ``b`` of
        one, when its holder restarts with pool ``a`` only (``b`` left on the old
        namespace) and a new pool ``c`` of one worker starts on the new one, then one
        is orphaned: ``b``'s, though as many workers are listed as before."""
        # Arrange
        each = following(namespace)
        async with (
            running(each),
            old_pool(namespace) as holder,
            publishing(namespace) as pools,
        ):
            await pools.add("127.0.0.1:5001", tags=("a",))
            await pools.add("127.0.0.1:5002", tags=("a",))
            await pools.add("127.0.0.1:5003", tags=("b",))
            await settled(lambda: len(each.records) == 3)
            # Act
            await holder_gone(each, holder)
            async with held(namespace) as publish:
                await publish.add("127.0.0.1:5004", tags=("a",))
                await publish.add("127.0.0.1:5005", tags=("a",))
                await publish.add("127.0.0.1:5006", tags=("c",))
                await settled(lambda: each.replacements == 1 and len(each.records) == 3)
                # Assert
                assert each.orphans.count() == 1

    def test_missing_before_the_new_namespace_settled_counts_no_worker_twice(self) -> None:
        """Given a replacement orphaning three workers of which one came back, the three
        still among the last known (no subscription of the new namespace settled),
        when the namespace goes missing and is created again, then three are orphaned:
        the two not seen again and the one seen, not the four known besides."""
        # Arrange
        orphans = Orphans()
        old = listing("a", "b", "c")
        orphans.attached(False, old)
        orphans.attached(True, old)
        orphans.saw("d", ())
        # Act
        orphans.missing(listing("a", "b", "c", "d"))
        orphans.attached(True, {})
        # Assert
        assert orphans.count() == 3
