"""Parsing and reloading the file_sd targets file."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from support.metrics import samples
from support.pooled import settled

from wool_idle.contract import MAX_LABELS_TEXT
from wool_idle.exporter import targets as targets_module
from wool_idle.exporter.app import ExporterSettings, create_app
from wool_idle.exporter.file_sd import Syntax
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.target import Target
from wool_idle.exporter.targets import (
    TargetSet,
    TargetsFileError,
    parse_targets_document,
)
from wool_idle.logs import TextFormatter


class TestParseTargetsDocument:
    def test_parse_json_and_yaml_with_labels(self) -> None:
        """Given the same groups as JSON and as YAML, when parsed, then both give the
        targets with their labels."""
        # Arrange
        groups = [
            {"targets": ["a:1", "b:2"], "labels": {"pool": "gpu"}},
            {"targets": ["unix:/run/w.sock"]},
        ]
        as_yaml = "- targets: [a:1, b:2]\n  labels: {pool: gpu}\n- targets: ['unix:/run/w.sock']\n"
        # Act
        from_json = parse_targets_document(json.dumps(groups), syntax="json")
        from_yaml = parse_targets_document(as_yaml)
        # Assert
        expected = [
            Target("a:1", (("pool", "gpu"),)),
            Target("b:2", (("pool", "gpu"),)),
            Target("unix:/run/w.sock"),
        ]
        assert from_json == from_yaml == expected

    def test_parse_series_labels_drop_what_prometheus_drops(self) -> None:
        """Given labels Prometheus accepts but drops after relabelling (``__``-prefixed),
        empty and null values, a ``worker`` label and a number, when parsed, then the
        target keeps only the others (the number as written), and ``worker`` stays the
        address."""
        # Arrange
        text = (
            "- targets: ['a:1']\n"
            "  labels: {__meta_x: y, __metrics_path__: /m, worker: w, e: '', n: ~, pool: 3.0}\n"
        )
        # Act
        (target,) = parse_targets_document(text)
        # Assert
        assert target == Target("a:1", (("pool", "3.0"),))
        assert target.label_dict() == {"worker": "a:1", "pool": "3.0"}

    def test_parse_address_in_two_groups_with_one_label_set_is_one_target(self) -> None:
        """Given an address in two groups whose series labels are the same (a label
        Prometheus drops differing), when parsed, then it is one target, in the place
        of its first group."""
        # Act
        targets = parse_targets_document(
            '[{"targets": ["a:1"], "labels": {"p": "1"}},'
            ' {"targets": ["b:2", "a:1"], "labels": {"p": "1", "__meta_x": "y"}}]',
            syntax="json",
        )
        # Assert
        assert targets == [Target("a:1", (("p", "1"),)), Target("b:2", (("p", "1"),))]

    @pytest.mark.parametrize("second", ['{"p": "2"}', "{}", '{"p": "1", "q": "1"}'])
    def test_parse_address_in_two_groups_with_other_labels_rejected(self, second: str) -> None:
        """Given an address in two groups whose series labels differ (a worker listed
        under two pools), when parsed, then TargetsFileError names both groups and the
        address: which pool the worker serves is unknown, and the first group's labels
        would have it counted in that pool."""
        # Arrange
        text = (
            '[{"targets": ["a:1"], "labels": {"p": "1"}},'
            f' {{"targets": ["b:2", "a:1"], "labels": {second}}}]'
        )
        # Act / Assert
        with pytest.raises(TargetsFileError, match="group 1: 'a:1' is in group 0 with other"):
            parse_targets_document(text, syntax="json")

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("{targets: [a:1]}", "list"),
            ("[{targets: a:1}]", "list of strings"),
            ("[{targets: [1]}]", "invalid address"),
            ("[{targets: ['nohost']}]", "invalid address"),
            ("[{targets: ['a:1'], labels: [x]}]", "mapping"),
            ("[{targets: ['a:1'], labels: {'bad-name': x}}]", "not a valid label name"),
            ("[{targets: ['a:1'], labels: {pool: [3]}}]", "string value"),
            ("[{targets: ['a:1'], extra: 1}]", "unknown field"),
            ("[1, 2", "YAML"),
        ],
    )
    def test_parse_rejects_malformed(self, text: str, message: str) -> None:
        """Given a malformed document, when parsed, then TargetsFileError says what."""
        # Act / Assert
        with pytest.raises(TargetsFileError, match=message):
            parse_targets_document(text)

    def test_parse_labels_over_the_exposition_limit_rejected(self) -> None:
        """Given a group whose labels take more than MAX_LABELS_TEXT characters in
        exposition text (each escaped quote counting twice), when parsed, then
        TargetsFileError names the group; labels of exactly the limit are accepted."""
        # Arrange
        room = MAX_LABELS_TEXT - len('note="",')
        at_limit = [{"targets": ["a:1"], "labels": {"note": "x" * room}}]
        over = [{"targets": ["a:1"]}, {"targets": ["b:2"], "labels": {"note": '"' * room}}]
        # Act
        (target,) = parse_targets_document(json.dumps(at_limit), syntax="json")
        with pytest.raises(TargetsFileError, match="group 1: its labels take") as raised:
            parse_targets_document(json.dumps(over), syntax="json")
        # Assert
        assert target.labels == (("note", "x" * room),)
        assert str(MAX_LABELS_TEXT) in str(raised.value)

    @given(text=st.text(max_size=300), syntax=st.sampled_from(["json", "yaml"]))
    def test_parse_fuzz_never_crashes_otherwise(self, text: str, syntax: Syntax) -> None:
        """Given arbitrary text, when parsed as JSON or YAML, then it yields targets or
        raises TargetsFileError, never anything else."""
        # Act
        try:
            targets = parse_targets_document(text, syntax=syntax)
        except TargetsFileError:
            return
        # Assert
        assert all(isinstance(t, Target) for t in targets)


class TestTargetSet:
    def test_reload_broken_file_keeps_last_good_set(self, tmp_path: Path) -> None:
        """Given a loaded targets file, when it is replaced by a broken one and
        reloaded, then the previous set stays and reload_success is False; fixing it
        loads the new set and reload_success is True again."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("- targets: ['a:1']\n")
        targets = TargetSet(static=(Target("s:9"),), path=str(path))
        targets.reload()
        stamp = targets.reload_timestamp
        # Act
        path.write_text("- targets: ['a:1'\n")
        broken = targets.reload()
        kept = [t.address for t in targets.all()]
        path.write_text("- targets: ['b:2']\n")
        os.utime(path, ns=(1, 2))
        fixed = targets.reload()
        # Assert
        assert (broken, kept, targets.reload_timestamp >= stamp) == (False, ["s:9", "a:1"], True)
        assert fixed and targets.reload_success
        assert [t.address for t in targets.all()] == ["s:9", "b:2"]

    def test_reload_timestamp_zero_until_the_file_is_first_read(self, tmp_path: Path) -> None:
        """Given a targets file that does not exist yet, when read, then the reload
        timestamp stays 0 (no read has succeeded); once the file is there and read, it
        is the time of that read. Without a file it is the set's creation time."""
        # Arrange
        path = tmp_path / "targets.yml"
        targets = TargetSet(path=str(path))
        before = time.time()
        # Act
        missing = targets.reload()
        stamp_missing = targets.reload_timestamp
        path.write_text("- targets: ['a:1']\n")
        loaded = targets.reload()
        # Assert
        assert (missing, stamp_missing) == (False, 0.0)
        assert loaded and targets.reload_timestamp >= before
        assert TargetSet().reload_timestamp >= before

    def test_reload_unreadable_file(self, tmp_path: Path) -> None:
        """Given a path that does not exist, when reloaded, then no targets and failure."""
        # Arrange
        targets = TargetSet(path=str(tmp_path / "missing.json"))
        # Act
        ok = targets.reload(force=True)
        # Assert
        assert (ok, targets.all(), targets.loaded) == (False, [], False)

    def test_reload_same_size_same_mtime_swap_is_seen(self, tmp_path: Path) -> None:
        """Given a loaded file, when it is rewritten with other content of the same
        size and given back its modification time (``cp -p``, ``rsync -t``, two writes
        in one tick), then the next reload loads the new content."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("- targets: ['a:1']\n")
        targets = TargetSet(path=str(path))
        targets.reload()
        stamp = os.stat(path).st_mtime_ns
        # Act
        path.write_text("- targets: ['b:2']\n")
        os.utime(path, ns=(stamp, stamp))
        changed = targets.reload()
        # Assert
        assert changed
        assert [t.address for t in targets.all()] == ["b:2"]

    def test_reload_symlink_flip_is_seen(self, tmp_path: Path) -> None:
        """Given a file reached through a ``..data`` symlink (a Kubernetes ConfigMap
        volume), when the symlink is flipped atomically to a directory whose file has
        the same size and modification time, then the next reload loads it."""
        # Arrange
        for version, address in (("..v1", "a:1"), ("..v2", "b:2")):
            (tmp_path / version).mkdir()
            (tmp_path / version / "targets.yml").write_text(f"- targets: ['{address}']\n")
            os.utime(tmp_path / version / "targets.yml", ns=(10**18, 10**18))
        (tmp_path / "..data").symlink_to("..v1")
        (tmp_path / "targets.yml").symlink_to("..data/targets.yml")
        targets = TargetSet(path=str(tmp_path / "targets.yml"))
        targets.reload()
        before = [t.address for t in targets.all()]
        # Act
        (tmp_path / "..data_tmp").symlink_to("..v2")
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
        changed = targets.reload()
        # Assert
        assert (before, changed) == (["a:1"], True)
        assert [t.address for t in targets.all()] == ["b:2"]

    def test_reload_failure_quoting_the_file_is_cut(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a targets file with a label name of 20,000 characters ending in a forged
        log line (a file generated from labels others chose), when read, then the
        failure logged, served by /-/reload and kept holds the start of the name only:
        the line was as long, past the 16 KiB at which Docker and the CRI split a line,
        and its rest read as a line of its own."""
        # Arrange
        forged = "2026-01-01T00:00:00.000Z INFO wool_idle.autoscaler: decision worker=b:1"
        path = tmp_path / "targets.json"
        path.write_text(json.dumps([{"targets": ["a:1"], "labels": {"x" * 20_000 + forged: "v"}}]))
        targets = TargetSet(path=str(path))
        # Act
        with caplog.at_level(logging.ERROR, logger="wool_idle.exporter.targets"):
            loaded = targets.reload()
        # Assert
        (line,) = [TextFormatter().format(record) for record in caplog.records]
        assert not loaded and targets.failure is not None
        assert forged not in line and "characters)" in targets.failure
        assert len(line.encode()) < 8 * 1024

    def test_reload_logs_each_distinct_failure_once(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a loaded file, when it breaks one way (checked three times), then
        another way, then goes missing, then is fixed, then each distinct failure is
        logged once and the recovery is logged."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("- targets: ['a:1']\n")
        targets = TargetSet(path=str(path))
        targets.reload()
        caplog.set_level(logging.INFO, logger="wool_idle.exporter.targets")
        caplog.clear()
        # Act
        path.write_text("- targets: ['a:1'\n")
        for _ in range(3):
            targets.reload()
        path.write_text("- labels: {bad-name: x}\n")
        targets.reload()
        targets.reload()
        path.unlink()
        targets.reload()
        targets.reload()
        path.write_text("- targets: ['a:1']\n")
        targets.reload()
        # Assert
        failures = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(failures) == 3
        assert "YAML" in failures[0]
        assert "not a valid label name" in failures[1]
        assert "cannot read" in failures[2]
        assert "loaded: 1 targets" in caplog.records[-1].getMessage()

    def test_all_and_get_index_static_then_file(self, tmp_path: Path) -> None:
        """Given static targets and a file sharing an address, then all() lists each
        address once (static first, its labels kept), get() finds any of them, and
        all() is the same list until the set changes."""
        # Arrange
        path = tmp_path / "targets.json"
        path.write_text('[{"targets": ["s:9", "f:1"], "labels": {"p": "x"}}]')
        targets = TargetSet(static=(Target("s:9"),), path=str(path))
        # Act
        targets.reload()
        first = targets.all()
        unchanged = targets.reload(force=True)
        # Assert
        assert first == [Target("s:9"), Target("f:1", (("p", "x"),))]
        assert (targets.get("f:1"), targets.get("s:9"), targets.get("x:1")) == (
            Target("f:1", (("p", "x"),)),
            Target("s:9"),
            None,
        )
        assert unchanged and targets.all() is first

    def test_set_discovered_last_in_precedence_reindexed_on_change(self, tmp_path: Path) -> None:
        """Given static and file targets, when discovered targets are set that share an
        address with each and add one, then each address is the first source's, the new
        one is listed last; setting the same discovered targets again keeps the list."""
        # Arrange
        path = tmp_path / "targets.json"
        path.write_text('[{"targets": ["f:1"], "labels": {"p": "x"}}]')
        targets = TargetSet(static=(Target("s:9"),), path=str(path))
        targets.reload()
        found = [
            Target("s:9", (("wool_namespace", "ns"),), secure=True),
            Target("f:1", (("wool_namespace", "ns"),)),
            Target("d:2", (("wool_namespace", "ns"),), info=(("uid", "u"),), secure=False),
        ]
        # Act
        targets.set_discovered(found)
        first = targets.all()
        targets.set_discovered(list(found))
        # Assert
        assert first == [Target("s:9"), Target("f:1", (("p", "x"),)), found[2]]
        assert targets.get("d:2") == found[2] and targets.discovered == tuple(found)
        assert targets.all() is first

    def test_reload_file_relabelled_at_every_check_keeps_no_memory_per_change(
        self, tmp_path: Path
    ) -> None:
        """Given a targets file of three workers whose labels change before every check
        (so no check ever finds it unchanged), when it is read 300 times, then what the
        set keeps about its holds is no larger than the three targets: nothing piles up
        per change."""
        # Arrange
        path = tmp_path / "targets.json"
        addresses = ["127.0.0.1:1", "127.0.0.1:2", "unix:/tmp/w.sock"]
        targets = TargetSet(path=str(path))
        # Act
        for read in range(300):
            path.write_text(json.dumps([{"targets": addresses, "labels": {"g": str(read)}}]))
            assert targets.reload()
        # Assert
        assert all(t.regrouped for t in targets.all())
        assert largest_collection(targets._file, targets._file._regroupings) <= len(addresses)

    @pytest.mark.timeout(30)  # reading a FIFO or /dev/zero would hang: fail, not hang
    @pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
    async def test_refresh_special_file_keeps_last_good_set(
        self, tmp_path: Path, special: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a loaded file reached through a symlink, when the symlink is flipped
        to a FIFO or to /dev/zero, then a refresh fails at once (logged, nothing
        read, the last good targets kept), and once the symlink points at a good
        file again the next refresh loads it."""
        # Arrange
        good = tmp_path / "good.yml"
        good.write_text("- targets: ['a:1']\n")
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        link = tmp_path / "targets.yml"
        link.symlink_to(good)
        targets = TargetSet(path=str(link))
        await targets.refresh()
        # Act
        link.unlink()
        link.symlink_to(fifo if special == "fifo" else special)
        flipped = await targets.refresh(force=True)
        kept = [t.address for t in targets.all()]
        good.write_text("- targets: ['b:2']\n")
        link.unlink()
        link.symlink_to(good)
        restored = await targets.refresh()
        # Assert
        assert (flipped, kept, restored) == (False, ["a:1"], True)
        assert "not a regular file" in caplog.text
        assert [t.address for t in targets.all()] == ["b:2"]


class TestTarget:
    def test_label_dicts_built_once(self) -> None:
        """Given a target, then its label and info dicts are the same objects on every
        call (built when the target is made, not per scrape), the info one holding the
        labels too; they do not take part in equality."""
        # Arrange
        target = Target("h:1", (("pool", "a"),), info=(("uid", "u"),))
        # Act / Assert
        assert target.label_dict() is target.label_dict()
        assert target.info_dict() is target.info_dict()
        assert target.info_dict() == {"worker": "h:1", "pool": "a", "uid": "u"}
        assert target == Target("h:1", (("pool", "a"),), info=(("uid", "u"),))
        assert target != Target("h:1", (("pool", "a"),), info=(("uid", "v"),))


def big_targets_file(path: Path, count: int) -> None:
    """A YAML file_sd file of ``count`` targets, each in its own group with labels."""
    path.write_text(
        "".join(
            f"- targets: ['10.{i // 65536}.{i // 256 % 256}.{i % 256}:50051']\n"
            f"  labels: {{pool: p{i % 7}, zone: z1}}\n"
            for i in range(count)
        )
    )


class TestTargetSetOffTheLoop:
    async def test_refresh_big_file_keeps_the_loop_responsive(self, tmp_path: Path) -> None:
        """Given a file of 20,000 targets each in its own group, when it is refreshed
        (two forced reads), then a heartbeat sleeping 10 ms at a time keeps ticking
        meanwhile: at least a fifth of the ticks the elapsed time allows (a parse on
        the loop would let none through), and the set holds every target."""
        # Arrange
        path = tmp_path / "targets.yml"
        big_targets_file(path, 20_000)
        targets = TargetSet(path=str(path))
        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beating = asyncio.ensure_future(heartbeat())
        await asyncio.sleep(0.05)
        # Act
        started, before = time.monotonic(), ticks
        for _ in range(2):
            await targets.refresh(force=True)
        elapsed, during = time.monotonic() - started, ticks - before
        beating.cancel()
        # Assert
        assert len(targets.all()) == 20_000
        assert during >= max(3, elapsed / 0.01 / 5), (during, elapsed)

    async def test_watch_follows_content_changes(self, tmp_path: Path) -> None:
        """Given a watched file, when its content changes (same size, same
        modification time), then the set follows without a reload call."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("- targets: ['a:1']\n")
        targets = TargetSet(path=str(path))
        targets.reload()
        stamp = os.stat(path).st_mtime_ns
        watching = asyncio.ensure_future(targets.watch(0.02))
        # Act
        path.write_text("- targets: ['b:2']\n")
        os.utime(path, ns=(stamp, stamp))
        deadline = time.monotonic() + 10  # a hang detector, not a timing assertion
        while targets.get("b:2") is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        watching.cancel()
        # Assert
        assert [t.address for t in targets.all()] == ["b:2"]

    async def test_watch_survives_a_parser_fault(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given a watched file, when the parser fails in an unforeseen way on one
        content, then that is a failed reload (last good targets kept, success 0) and
        the watch goes on to load the next content."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("- targets: ['a:1']\n")
        targets = TargetSet(path=str(path))
        targets.reload()
        real = targets_module.parse_targets_document

        def faulty(data: bytes, *, syntax: Syntax) -> list[Target]:
            if b"b:2" in data:
                raise TypeError("a parser bug")
            return real(data, syntax=syntax)

        monkeypatch.setattr(targets_module, "parse_targets_document", faulty)
        watching = asyncio.ensure_future(targets.watch(0.02))
        # Act
        path.write_text("- targets: ['b:2']\n")
        deadline = time.monotonic() + 10  # a hang detector, not a timing assertion
        while targets.reload_success and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        kept = [t.address for t in targets.all()]
        path.write_text("- targets: ['c:3']\n")
        while targets.get("c:3") is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        watching.cancel()
        # Assert
        assert kept == ["a:1"]
        assert [t.address for t in targets.all()] == ["c:3"] and targets.reload_success

    async def test_watch_survives_no_thread_to_read_the_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given a watched file, when no thread can be started to read it (a pids
        limit), then that is a failed reload (last good targets kept, success 0), and
        once threads can be started again the watch loads the file: it ended for good
        at the first such failure, never reading the file again."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("- targets: ['a:1']\n")
        targets = TargetSet(path=str(path))
        targets.reload()
        start = threading.Thread.start

        def refuse(thread: threading.Thread) -> None:
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(threading.Thread, "start", refuse)
        watching = asyncio.ensure_future(targets.watch(0.02))
        # Act
        path.write_text("- targets: ['b:2']\n")
        deadline = time.monotonic() + 10  # a hang detector, not a timing assertion
        while targets.reload_success and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        kept, failure = [t.address for t in targets.all()], targets.failure
        monkeypatch.setattr(threading.Thread, "start", start)
        while targets.get("b:2") is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        watching.cancel()
        # Assert
        assert kept == ["a:1"] and "cannot start a thread" in str(failure)
        assert [t.address for t in targets.all()] == ["b:2"] and targets.reload_success


class TestTargetSetExporter:
    async def test_metrics_file_cut_inside_a_label_value_withheld_until_it_holds_still(
        self, aiohttp_client, start_server, tmp_path: Path
    ) -> None:
        """Given an exporter over a targets file with a real worker in pool gpu, when the
        file is read half rewritten in place, cut inside the label value (gpu read as g:
        a valid file that moves the worker into pool g, where the autoscaler would count
        it for g's floor), then the worker is probed (up 1) under its new labels but its
        idle value is withheld (pool_changed); once the grace has passed, with no further
        change to the file, the exporter's check of it releases its idle series."""
        # Arrange
        worker = await start_server()
        path = tmp_path / "targets.yml"
        whole = f"- targets: ['{worker.address}']\n  labels:\n    wool_tags: gpu\n"
        path.write_text(whole)
        targets = TargetSet(path=str(path), grace=1.0)
        targets.reload(force=True)
        prober = Prober(tls=None, timeout=5.0, concurrency=8)
        registry = CollectorRegistry(auto_describe=False)
        client = await aiohttp_client(create_app(targets, prober, registry, ExporterSettings()))
        gpu, g = (frozenset({("worker", worker.address), ("wool_tags", t)}) for t in ("gpu", "g"))
        try:
            before = samples(await (await client.get("/metrics")).text())
            # Act
            path.write_text(whole[: whole.index("gpu") + 1])
            await targets.refresh()
            cut = samples(await (await client.get("/metrics")).text())
            watching = asyncio.ensure_future(targets.watch(0.05))  # the file unchanged
            await settled(lambda: not targets.all()[0].regrouped)
            watching.cancel()
            still = samples(await (await client.get("/metrics")).text())
        finally:
            await prober.close()
        # Assert
        assert ("wool_worker_idle_seconds", gpu) in before
        assert ("wool_worker_idle_seconds", g) not in cut
        assert cut[("wool_worker_up", g)] == 1
        withheld = ("wool_exporter_probe_errors_total", frozenset({("reason", "pool_changed")}))
        assert cut[withheld] == 1
        assert ("wool_worker_idle_seconds", g) in still


def largest_collection(*owners: object) -> int:
    """The most entries any list, tuple, set or dict attribute of ``owners`` holds."""
    sizes = [
        len(value)
        for owner in owners
        for value in vars(owner).values()
        if isinstance(value, list | tuple | set | frozenset | dict)
    ]
    return max(sizes, default=0)
