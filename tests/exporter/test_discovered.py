"""Targets from wool's discovery: their labels, their info series, and the exporter's
own series about each discovery, over real HTTP with a real namespace and real workers."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from multiprocessing.shared_memory import SharedMemory

import pytest
from prometheus_client import CollectorRegistry
from support.metrics import samples
from support.pooled import settled
from support.wool_namespaces import fresh_namespace, held
from wool.runtime.discovery.local import _short_hash

from wool_idle.discovery.attachment import FollowProblem
from wool_idle.discovery.follow import Follower
from wool_idle.discovery.local import LocalAttachment
from wool_idle.discovery.records import WorkerRecord
from wool_idle.discovery.spec import DiscoverySpec
from wool_idle.exporter.app import ExporterSettings, create_app
from wool_idle.exporter.discovered import DiscoveredTargets, record_target
from wool_idle.exporter.discovery_metrics import DiscoveryCollector
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.target import Target, pool_digest
from wool_idle.exporter.targets import TargetSet

POLL = 0.1


class DyingAttachment(LocalAttachment):
    """A real namespace whose every subscription dies after its first event, before
    its settle time (as a flaky network's LAN subscription does)."""

    async def subscribe(self):  # type: ignore[override]
        async for event in super().subscribe():
            yield event
            raise ConnectionResetError("the subscription died")


def record(address: str, **fields) -> WorkerRecord:
    defaults = {"uid": "u-1", "pid": 7, "version": "0.15.7", "tags": ("hot",), "secure": False}
    return WorkerRecord(address=address, **{**defaults, **fields})


@pytest.fixture
def namespace():
    with fresh_namespace() as name:
        yield name


@pytest.fixture
async def discovering(aiohttp_client, namespace: str) -> AsyncIterator[object]:
    """An exporter app following ``local:<namespace>`` (plus a missing namespace)."""
    targets = TargetSet()
    specs = [DiscoverySpec.parse(f"local:{namespace}"), DiscoverySpec.parse("local:unit-absent")]
    discovered = DiscoveredTargets(specs, targets, poll_interval=POLL)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DiscoveryCollector(discovered.followers))
    prober = Prober(tls=None, timeout=5.0, concurrency=8)
    client = await aiohttp_client(create_app(targets, prober, registry, ExporterSettings()))
    client.targets, client.prober, client.discovered = targets, prober, discovered
    task = asyncio.ensure_future(discovered.run())
    yield client
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await prober.close()


async def text(client, path: str) -> str:
    response = await client.get(path)
    assert response.status == 200
    return await response.text()


class TestRecordTarget:
    def test_record_target_stable_labels_and_volatile_info(self) -> None:
        """Given a record, then its target is labelled with the namespace and the sorted,
        comma-joined tags; uid, pid, version and secure are info only."""
        # Act
        target = record_target("ns", record("h:1", tags=("hot", "gpu"), secure=True))
        # Assert
        assert target.label_dict() == {
            "worker": "h:1",
            "wool_namespace": "ns",
            "wool_tags": "hot,gpu",
        }
        assert target.info_dict() == {
            **target.label_dict(),
            "uid": "u-1",
            "pid": "7",
            "version": "0.15.7",
            "secure": "true",
        }
        assert target.secure is True

    def test_record_target_without_tags_has_no_tags_label(self) -> None:
        """Given a record without tags, then its target has no wool_tags label (an empty
        value is no label to Prometheus)."""
        # Act
        target = record_target("ns", record("h:1", tags=()))
        # Assert
        assert "wool_tags" not in target.label_dict()

    def test_record_target_restart_changes_info_only(self) -> None:
        """Given a worker restarted on its address (new uid and pid), then its series
        labels are unchanged and only its info labels differ."""
        # Act
        before = record_target("ns", record("h:1"))
        after = record_target("ns", record("h:1", uid="u-2", pid=8))
        # Assert
        assert before.label_dict() == after.label_dict()
        assert before.info_dict() != after.info_dict()


class TestDiscoveredTargets:
    async def test_apply_first_source_wins_an_address(self, namespace: str) -> None:
        """Given a static target and a discovered worker on the same address, and
        another discovered worker, when applied, then the address stays the static
        target's, and the other worker is a discovered target."""
        # Arrange
        targets = TargetSet(static=(Target("127.0.0.1:5001"),))
        discovered = DiscoveredTargets(
            [DiscoverySpec.parse(f"local:{namespace}")], targets, poll_interval=POLL
        )
        async with held(namespace) as publish:
            await publish.add("127.0.0.1:5001", tags=("hot",))
            await publish.add("127.0.0.1:5002", tags=("cold",))
            task = asyncio.ensure_future(discovered.run())
            # Act
            await settled(lambda: len(targets.all()) == 2)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        # Assert
        assert [t.label_dict() for t in targets.all()] == [
            {"worker": "127.0.0.1:5001"},
            {"worker": "127.0.0.1:5002", "wool_namespace": namespace, "wool_tags": "cold"},
        ]

    async def test_apply_address_of_two_pools_is_no_target_until_they_agree(
        self, namespace: str, caplog
    ) -> None:
        """Given a namespace where a stopped cold worker's record shares its address with
        a live hot worker's (a port reused), and a cold worker elsewhere, when applied
        several times, then that address is no target (labelled with the wrong pool,
        the autoscaler could stop the hot pool's last worker), counted and logged once;
        when the stale record is dropped, the hot worker is a target again."""
        # Arrange
        caplog.set_level(logging.WARNING, logger="wool_idle.discovery")
        targets = TargetSet()
        discovered = DiscoveredTargets(
            [DiscoverySpec.parse(f"local:{namespace}")], targets, poll_interval=POLL
        )
        follower = discovered.followers[0]
        async with held(namespace) as publish:
            stale = await publish.add("127.0.0.1:5001", tags=("cold",))
            await publish.add("127.0.0.1:5001", tags=("hot",))
            await publish.add("127.0.0.1:5002", tags=("cold",))
            task = asyncio.ensure_future(discovered.run())
            try:
                # Act
                await settled(lambda: len(follower.records) == 3)
                contested = []
                for _ in range(3):
                    discovered.apply()
                    contested.append([t.label_dict() for t in targets.all()])
                await publish.drop(stale)
                await settled(lambda: len(follower.records) == 2)
                discovered.apply()
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        # Assert
        cold = {"worker": "127.0.0.1:5002", "wool_namespace": namespace, "wool_tags": "cold"}
        hot = {"worker": "127.0.0.1:5001", "wool_namespace": namespace, "wool_tags": "hot"}
        assert contested == [[cold]] * 3
        assert [t.label_dict() for t in sorted(targets.all(), key=lambda t: t.address)] == [
            hot,
            cold,
        ]
        assert follower.errors[FollowProblem.DUPLICATE_ADDRESS] == 1
        shared = [r for r in caplog.records if "share 127.0.0.1:5001" in r.getMessage()]
        assert len(shared) == 1

    async def test_apply_address_in_two_namespaces_is_no_target(self) -> None:
        """Given two followed namespaces that list one address (a worker of the first
        killed, its record kept, and a worker of the second on its port), when applied,
        then that address is no target (with the first's namespace, the autoscaler could
        count the second's worker in the first pool and empty it) and each discovery
        counts it; an address both list alike would be one target."""
        # Arrange
        with fresh_namespace() as first, fresh_namespace() as second:
            targets = TargetSet()
            specs = [DiscoverySpec.parse(f"local:{first}"), DiscoverySpec.parse(f"local:{second}")]
            discovered = DiscoveredTargets(specs, targets, poll_interval=POLL)
            async with held(first) as publish_first, held(second) as publish_second:
                await publish_first.add("127.0.0.1:5001", tags=("hot",))
                await publish_first.add("127.0.0.1:5002", tags=("hot",))
                await publish_second.add("127.0.0.1:5001", tags=("hot",))
                task = asyncio.ensure_future(discovered.run())
                try:
                    # Act
                    await settled(lambda: all(len(f.records) for f in discovered.followers))
                    discovered.apply()
                finally:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
        # Assert
        assert [t.label_dict() for t in targets.all()] == [
            {"worker": "127.0.0.1:5002", "wool_namespace": first, "wool_tags": "hot"},
        ]
        assert [f.errors[FollowProblem.DUPLICATE_ADDRESS] for f in discovered.followers] == [1, 1]

    async def test_apply_address_a_discovery_read_lists_keeps_its_pool(
        self, namespace: str, monkeypatch
    ) -> None:
        """Given a namespace followed both locally and on LAN (loopback), both listing a
        hot worker alike, the local one also another hot worker and a cold worker whose
        pool was SIGKILLed (wool cannot read the namespace locally), when the local
        discovery is down past the grace, then the workers only it lists have an unknown
        pool; the one the LAN discovery still reads keeps its pool, its LAN record."""
        # Arrange
        import functools

        import wool
        import wool.runtime.discovery.lan as wool_lan
        from zeroconf.asyncio import AsyncZeroconf

        monkeypatch.setattr(
            wool_lan, "AsyncZeroconf", functools.partial(AsyncZeroconf, interfaces=["127.0.0.1"])
        )
        targets = TargetSet()
        specs = [DiscoverySpec.parse(f"local:{namespace}"), DiscoverySpec.parse(f"lan:{namespace}")]
        discovered = DiscoveredTargets(specs, targets, poll_interval=POLL, grace=0.0)
        local, lan = discovered.followers
        task = asyncio.ensure_future(discovered.run())
        try:
            async with held(namespace) as publish:
                lan_discovery = wool.LanDiscovery(namespace, advertise_host="127.0.0.1")
                async with lan_discovery.publisher as lan_publisher:
                    shared = wool.WorkerMetadata(
                        uid=uuid.uuid4(),
                        address="127.0.0.1:5001",
                        pid=1,
                        version="0.15.7",
                        tags=frozenset({"hot"}),
                    )
                    await lan_publisher.publish("worker-added", shared)
                    await publish.add("127.0.0.1:5001", tags=("hot",))
                    await publish.add("127.0.0.1:5002", tags=("hot",))
                    dead = await publish.add("127.0.0.1:5003", tags=("cold",))
                    await settled(lambda: len(local.records) == 3 and len(lan.records) == 1)
                    # Act
                    SharedMemory(name=_short_hash(dead.hex)).unlink()
                    await settled(lambda: sum(t.pool_unknown for t in targets.all()) == 2)
                    found = {t.address: t for t in targets.all()}
                    await publish.drop(dead)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        # Assert
        assert {a: t.pool_unknown for a, t in found.items()} == {
            "127.0.0.1:5001": False,
            "127.0.0.1:5002": True,
            "127.0.0.1:5003": True,
        }
        assert found["127.0.0.1:5001"].info_dict()["uid"] == str(shared.uid)
        assert found["127.0.0.1:5001"].info_dict()["pid"] == "1"

    async def test_apply_discovery_down_past_grace_no_longer_holds_the_targets(
        self, namespace: str
    ) -> None:
        """Given a discovery not read yet (its namespace unreadable since the start),
        when applied within the grace, then the targets are not known yet; when applied
        once it has been down for the grace, then they are (what the other sources and
        discoveries know is served, not held back for ever by one bad namespace)."""
        # Arrange
        spec = [DiscoverySpec.parse(f"local:{namespace}")]
        within, past = TargetSet(), TargetSet()
        # Act
        DiscoveredTargets(spec, within, poll_interval=POLL, grace=3600.0).apply()
        DiscoveredTargets(spec, past, poll_interval=POLL, grace=0.0).apply()
        # Assert
        assert within.unloaded == "wool discovery not read yet"
        assert past.unloaded is None

    async def test_apply_discovery_dying_before_it_settles_no_longer_holds_the_targets(
        self, namespace: str
    ) -> None:
        """Given a discovery whose every subscription announces a worker and dies before
        its settle time (up, then down again at each retry: never read once, never down
        for the grace), when followed past the grace, then the targets are known (the
        other sources' targets are served, not held back at 503 for ever)."""
        # Arrange
        spec = DiscoverySpec.parse(f"local:{namespace}")
        targets = TargetSet()
        discovered = DiscoveredTargets([spec], targets, poll_interval=POLL, grace=5 * POLL)
        dying = DyingAttachment(namespace, poll_interval=POLL)
        each = Follower(spec, dying, retry_interval=POLL, on_change=discovered._schedule)
        discovered.followers = [each]
        async with held(namespace) as publish:
            await publish.add("127.0.0.1:5001")
            following = asyncio.ensure_future(discovered.run())
            # Act
            await settled(lambda: each.errors[FollowProblem.FAILED] >= 20)
            flapping, known = each.read_once, targets.unloaded
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        # Assert
        assert flapping is False
        assert known is None


class TestDiscoveredExporter:
    async def test_metrics_discovered_workers_labelled_bad_record_never_probed(
        self, discovering, namespace: str, start_server
    ) -> None:
        """Given a namespace with a real worker, a record whose address is not an address,
        and a second discovery whose namespace does not exist, when /metrics is scraped,
        then the worker's series carry wool_namespace and wool_tags and it has one info
        series; the bad record has no series, no connection and is counted once; the
        missing namespace reads up 0 with namespace_missing counted, and the exporter
        serves regardless."""
        # Arrange
        server = await start_server()
        async with held(namespace) as publish:
            await publish.add("no-port-here", tags=("hot",))
            uid = await publish.add(server.address, tags=("hot", "a"))
            await settled(lambda: len(discovering.targets.all()) == 1)
            await asyncio.sleep(3 * POLL)  # more polls re-announce the bad record
            # Act
            found = samples(await text(discovering, "/metrics"))
        # Assert
        labels = {("worker", server.address), ("wool_namespace", namespace), ("wool_tags", "a,hot")}
        assert ("wool_worker_idle_seconds", frozenset(labels)) in found
        assert found[("wool_worker_up", frozenset(labels))] == 1
        info = labels | {
            ("uid", str(uid)),
            ("pid", "4242"),
            ("version", "0.15.7"),
            ("secure", "false"),
        }
        assert found[("wool_worker_info", frozenset(info))] == 1
        assert not any("no-port-here" in str(key) for key in found)
        assert discovering.prober.connections.open() == {server.address}
        ours = ("discovery", f"local:{namespace}")
        absent = ("discovery", "local:unit-absent")
        assert found[("wool_exporter_discovery_up", frozenset({ours}))] == 1
        assert found[("wool_exporter_discovery_workers", frozenset({ours}))] == 1
        invalid = frozenset({ours, ("reason", "invalid_address")})
        assert found[("wool_exporter_discovery_errors_total", invalid)] == 1
        assert found[("wool_exporter_discovery_up", frozenset({absent}))] == 0
        missing = frozenset({absent, ("reason", "namespace_missing")})
        assert found[("wool_exporter_discovery_errors_total", missing)] >= 1

    async def test_metrics_lan_record_with_tags_not_utf8_skipped_scrape_served(
        self, aiohttp_client, monkeypatch, start_server
    ) -> None:
        """Given a LAN namespace (on loopback) announcing a real worker and a record whose
        tags JSON escapes a lone surrogate, when /metrics is scraped, then it answers
        200 with the worker's series; the bad record has no series and is counted once
        as an invalid record (its label would fail every scrape)."""
        # Arrange
        import functools
        import uuid

        import wool
        import wool.runtime.discovery.lan as wool_lan
        from zeroconf.asyncio import AsyncZeroconf

        monkeypatch.setattr(
            wool_lan, "AsyncZeroconf", functools.partial(AsyncZeroconf, interfaces=["127.0.0.1"])
        )
        namespace = f"unit-lan-{uuid.uuid4().hex[:8]}"
        server = await start_server()
        targets = TargetSet()
        discovered = DiscoveredTargets(
            [DiscoverySpec.parse(f"lan:{namespace}")], targets, poll_interval=POLL
        )
        registry = CollectorRegistry(auto_describe=False)
        registry.register(DiscoveryCollector(discovered.followers))
        prober = Prober(tls=None, timeout=5.0, concurrency=8)
        client = await aiohttp_client(create_app(targets, prober, registry, ExporterSettings()))
        (follower,) = discovered.followers
        task = asyncio.ensure_future(discovered.run())
        try:
            lan = wool.LanDiscovery(namespace, advertise_host="127.0.0.1")
            async with lan.publisher as publisher:
                for address, tags in ((server.address, {"hot"}), ("127.0.0.1:5002", {"x\ud800"})):
                    record = wool.WorkerMetadata(
                        uid=uuid.uuid4(), address=address, pid=1, version="0.15.7", tags=tags
                    )
                    await publisher.publish("worker-added", record)
                await settled(lambda: follower.errors[FollowProblem.INVALID_RECORD] == 1)
                await settled(lambda: len(targets.all()) == 1)
                # Act
                response = await client.get("/metrics")
                found = samples(await response.text())
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await prober.close()
        # Assert
        assert response.status == 200
        labels = {("worker", server.address), ("wool_namespace", namespace), ("wool_tags", "hot")}
        assert found[("wool_worker_up", frozenset(labels))] == 1
        assert not any("127.0.0.1:5002" in str(key) for key in found)
        invalid = frozenset({("discovery", f"lan:{namespace}"), ("reason", "invalid_record")})
        assert found[("wool_exporter_discovery_errors_total", invalid)] == 1

    async def test_probe_discovered_target_renders_its_labels(
        self, discovering, namespace: str, start_server
    ) -> None:
        """Given a discovered worker, when /probe?target= asks for it, then its series
        carry its discovery labels, with its info series."""
        # Arrange
        server = await start_server()
        async with held(namespace) as publish:
            await publish.add(server.address, tags=("hot",))
            await settled(lambda: len(discovering.targets.all()) == 1)
            # Act
            found = samples(await text(discovering, f"/probe?target={server.address}"))
        # Assert
        labels = {("worker", server.address), ("wool_namespace", namespace), ("wool_tags", "hot")}
        assert found[("wool_worker_up", frozenset(labels))] == 1
        assert [key for key in found if key[0] == "wool_worker_info"] != []

    async def test_sd_lists_discovered_workers_with_labels(
        self, discovering, namespace: str
    ) -> None:
        """Given discovered workers, when /sd is read, then it is the http_sd JSON of
        each with its labels and its volatile facts as __meta_wool_* labels; when one
        is dropped, then the next read lists the other only."""
        # Arrange
        async with held(namespace) as publish:
            gone = await publish.add("127.0.0.1:5001", tags=("hot",))
            kept = await publish.add("127.0.0.1:5002", secure=True)
            await settled(lambda: len(discovering.targets.all()) == 2)
            # Act
            both = await discovering.get("/sd")
            await publish.drop(gone)
            await settled(lambda: len(discovering.targets.all()) == 1)
            one = json.loads(await text(discovering, "/sd"))
        # Assert
        assert both.headers["Content-Type"] == "application/json; charset=utf-8"
        groups = sorted(await both.json(), key=lambda g: g["targets"])
        assert groups[0] == {
            "targets": ["127.0.0.1:5001"],
            "labels": {
                "wool_namespace": namespace,
                "wool_tags": "hot",
                "__meta_wool_uid": str(gone),
                "__meta_wool_pid": "4242",
                "__meta_wool_version": "0.15.7",
                "__meta_wool_secure": "false",
                "__param_pool": pool_digest((("wool_namespace", namespace), ("wool_tags", "hot"))),
            },
        }
        assert [g["targets"] for g in one] == [["127.0.0.1:5002"]]
        assert one[0]["labels"]["__meta_wool_secure"] == "true"
        assert one[0]["labels"]["__meta_wool_uid"] == str(kept)

    async def test_sd_unavailable_until_every_discovery_has_read(
        self, aiohttp_client, namespace: str
    ) -> None:
        """Given an exporter just started, following a namespace with a worker and a
        namespace nobody holds, when /sd is read before the first has been read (a
        restart: an empty list would have every shard drop all its workers), then it
        answers 503, as /-/ready does; once both have been read, then /sd lists the
        worker and /-/ready is 200."""
        # Arrange
        targets = TargetSet()
        specs = [DiscoverySpec.parse(f"local:{namespace}"), DiscoverySpec.parse("local:unit-gone")]
        discovered = DiscoveredTargets(specs, targets, poll_interval=POLL)
        prober = Prober(tls=None, timeout=5.0, concurrency=8)
        registry = CollectorRegistry(auto_describe=False)
        client = await aiohttp_client(create_app(targets, prober, registry, ExporterSettings()))
        async with held(namespace) as publish:
            await publish.add("127.0.0.1:5001", tags=("hot",))
            # Act
            before, unready = await client.get("/sd"), await client.get("/-/ready")
            following = asyncio.ensure_future(discovered.run())
            await settled(lambda: all(f.read_once for f in discovered.followers))
            after, ready = await client.get("/sd"), await client.get("/-/ready")
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        await prober.close()
        # Assert
        assert (before.status, unready.status) == (503, 503)
        assert "wool discovery not read yet" in await before.text()
        assert (after.status, ready.status) == (200, 200)
        assert [g["targets"] for g in await after.json()] == [["127.0.0.1:5001"]]

    async def test_metrics_discovery_down_withholds_idle_until_it_reads_again(
        self, aiohttp_client, namespace: str, start_server
    ) -> None:
        """Given a followed namespace with two real hot workers, one of them also a
        static target, when a third worker's record block vanishes (its pool was
        SIGKILLed: wool cannot read the namespace) and the discovery stays down past
        the grace, then the worker kept only from it is still probed (up 1) but has no
        idle series, in /metrics and in /probe, counted as discovery_down; the static
        target keeps its idle value; when the dead worker is dropped and the namespace
        reads again, its idle series is back."""
        # Arrange
        kept, listed = await start_server(), await start_server()
        targets = TargetSet(static=(Target(listed.address),))
        spec = DiscoverySpec.parse(f"local:{namespace}")
        discovered = DiscoveredTargets([spec], targets, poll_interval=POLL, grace=0.0)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(DiscoveryCollector(discovered.followers))
        prober = Prober(tls=None, timeout=5.0, concurrency=8)
        client = await aiohttp_client(create_app(targets, prober, registry, ExporterSettings()))
        (follower,) = discovered.followers
        labels = frozenset(
            {("worker", kept.address), ("wool_namespace", namespace), ("wool_tags", "hot")}
        )
        static = frozenset({("worker", listed.address)})
        task = asyncio.ensure_future(discovered.run())
        try:
            async with held(namespace) as publish:
                await publish.add(kept.address, tags=("hot",))
                await publish.add(listed.address, tags=("hot",))
                lost = await publish.add("127.0.0.1:9", tags=("cold",))
                await settled(lambda: follower.up and len(targets.all()) == 3)
                before = samples(await text(client, "/metrics"))
                # Act
                SharedMemory(name=_short_hash(lost.hex)).unlink()
                await settled(
                    lambda: (
                        follower.errors[FollowProblem.STALE_RECORD] >= 2
                        and targets.discovered[0].pool_unknown
                    )
                )
                down = samples(await text(client, "/metrics"))
                probed = samples(await text(client, f"/probe?target={kept.address}"))
                await publish.drop(lost)
                await settled(lambda: follower.up and len(targets.all()) == 2)
                again = samples(await text(client, "/metrics"))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await prober.close()
        # Assert
        assert ("wool_worker_idle_seconds", labels) in before
        assert ("wool_worker_idle_seconds", labels) not in down
        assert down[("wool_worker_up", labels)] == 1
        assert ("wool_worker_idle_seconds", static) in down
        withheld = ("wool_exporter_probe_errors_total", frozenset({("reason", "discovery_down")}))
        assert before[withheld] == 0
        assert down[withheld] == 1
        assert ("wool_worker_idle_seconds", labels) not in probed
        assert probed[("wool_worker_up", labels)] == 1
        assert ("wool_worker_idle_seconds", labels) in again

    async def test_metrics_worker_moved_to_another_pool_withheld_until_it_holds_still(
        self, aiohttp_client, namespace: str, start_server
    ) -> None:
        """Given a followed namespace with a real worker tagged cold, when its record is
        re-published tagged hot (a record flipping pools: counted in one pool's floor,
        it could be in the other the next moment), then it is probed (up 1) under its new
        labels but its idle value is withheld (pool_changed); once its pool has held
        still for the grace, its idle series is back."""
        # Arrange
        worker = await start_server()
        targets = TargetSet()
        spec = DiscoverySpec.parse(f"local:{namespace}")
        discovered = DiscoveredTargets([spec], targets, poll_interval=POLL, grace=1.0)
        prober = Prober(tls=None, timeout=5.0, concurrency=8)
        registry = CollectorRegistry(auto_describe=False)
        client = await aiohttp_client(create_app(targets, prober, registry, ExporterSettings()))
        cold, hot = (
            frozenset({("worker", worker.address), ("wool_namespace", namespace), ("wool_tags", t)})
            for t in ("cold", "hot")
        )
        task = asyncio.ensure_future(discovered.run())
        try:
            async with held(namespace) as publish:
                uid = await publish.add(worker.address, tags=("cold",))
                await settled(lambda: len(targets.discovered) == 1)
                before = samples(await text(client, "/metrics"))
                # Act
                await publish.add(worker.address, tags=("hot",), uid=uid)
                await settled(lambda: dict(targets.discovered[0].labels)["wool_tags"] == "hot")
                moved = samples(await text(client, "/metrics"))
                await settled(lambda: not targets.discovered[0].regrouped)
                still = samples(await text(client, "/metrics"))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await prober.close()
        # Assert
        assert ("wool_worker_idle_seconds", cold) in before
        assert ("wool_worker_idle_seconds", hot) not in moved
        assert moved[("wool_worker_up", hot)] == 1
        withheld = ("wool_exporter_probe_errors_total", frozenset({("reason", "pool_changed")}))
        assert moved[withheld] == 1
        assert ("wool_worker_idle_seconds", hot) in still
