"""The planner's marks kept across restarts, on the real file system."""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
import types
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter
from support.processes import run_python

from wool_idle.autoscaler import memory as memory_module
from wool_idle.autoscaler import wall_clock
from wool_idle.autoscaler.memory import StopMemory
from wool_idle.autoscaler.planner import PolicyPlanner
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.retired import RetiredWorkers
from wool_idle.autoscaler.state_file import Marks, Retired, StateFile, Written
from wool_idle.autoscaler.verdicts import StopResult, Verdict

WORKER = "127.0.0.1:50051"
OTHER = "127.0.0.1:50052"
RETIRED = "127.0.0.1:50053"


def memory_of(path: Path) -> StopMemory:
    """A ``StopMemory`` of a new planner (no floor) on the state file at ``path``."""
    planner = PolicyPlanner(PolicySettings(max_idle=60.0, min_workers=0))
    errors = Counter("state_write_errors", "", registry=CollectorRegistry())
    return StopMemory(StateFile(path), planner, errors, RetiredWorkers())


class TestStopMemory:
    async def test_recall_skips_malformed_retired_marks_and_keeps_the_stop_marks(
        self, tmp_path: Path, caplog
    ) -> None:
        """Given a state file with a worker retiring, one retired mark well formed and
        one malformed, when a new process recalls it, then the worker counts retiring
        (no hold: the stop marks were read), the good retired mark is shown with its
        time, and the malformed one is left out and logged by name."""
        # Arrange
        path = tmp_path / "state.json"
        now = time.time()
        retired = {"ok:1": {"at": now - 60.0, "labels": {}}, "bad:1": {"at": "soon"}}
        document = json.loads(Marks(retiring={WORKER: now - 1.0}).to_json())
        path.write_text(json.dumps({**document, "retired": retired}))
        memory = memory_of(path)
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            memory.recall()
        plan = await memory.planner.plan([Reading(WORKER, 900.0)], time.monotonic())
        # Assert
        assert [d.verdict for d in plan.decisions] == [Verdict.RETIRING]
        assert memory.retired.marks() == {"ok:1": Retired(now - 60.0, {})}
        assert "1 retired mark(s) malformed" in caplog.text and "'bad:1'" in caplog.text
        assert "none is sent" not in caplog.text

    async def test_save_keeps_retired_marks_and_writes_only_on_a_change(
        self, tmp_path: Path
    ) -> None:
        """Given a process that recalled a file holding a retired mark, when it saves
        with nothing changed, then the file is not written again; once the mark ends
        (a new worker at the address) and it saves, then the file no longer holds it."""
        # Arrange
        path = tmp_path / "state.json"
        StateFile(path).save(Marks(retired={WORKER: Retired(time.time() - 60.0, {})}))
        memory = memory_of(path)
        memory.recall()
        written = path.stat().st_ino
        # Act
        await memory.save()
        rewritten = path.stat().st_ino != written
        kept = set(StateFile(path).load().retired)
        memory.retired.forget(WORKER)
        await memory.save()
        # Assert
        assert (rewritten, kept) == (False, {WORKER})
        assert StateFile(path).load().retired == {}

    async def test_save_follows_a_wall_clock_set_forward(self, tmp_path: Path, monkeypatch) -> None:
        """Given an autoscaler started with its wall clock an hour behind (before NTP
        synced) that stopped a worker, when the clock is set right and the marks are
        saved again, then a restart reads the worker as retiring: its mark is in the
        clock of now, not an hour old."""
        # Arrange
        offset = [-3600.0]
        wall = types.SimpleNamespace(time=lambda: time.time() + offset[0], monotonic=time.monotonic)
        monkeypatch.setattr(wall_clock, "time", wall)  # the wall clock: a boundary
        path = tmp_path / "state.json"
        StateFile(path).save(Marks())
        earlier = memory_of(path)
        earlier.recall()
        earlier.planner.record(WORKER, StopResult.STOPPED, time.monotonic())
        await earlier.save()
        # Act
        offset[0] = 0.0
        await earlier.save()
        monkeypatch.undo()
        restarted = memory_of(path)
        restarted.recall()
        plan = await restarted.planner.plan([Reading(WORKER, 900.0)], time.monotonic())
        # Assert
        assert [d.verdict for d in plan.decisions] == [Verdict.RETIRING]

    async def test_recall_reads_the_marks_by_the_clock_since_boot(self, tmp_path: Path) -> None:
        """Given a state file written 10 s ago by the clock since boot, in this boot,
        with a worker retiring since just before, another cooling down for 5 minutes
        and a third retired a minute before, and the wall clock set a day forward since
        (``date -s``, NTP, while the autoscaler was down), when a new process recalls
        it, then every mark holds as 10 s old (retiring, cooling down, shown retired),
        never as a day old."""
        # Arrange
        path = tmp_path / "state.json"
        boot = wall_clock.since_boot()
        assert boot is not None  # Linux
        at = time.time() - 86400.0 - 10.0
        StateFile(path).save(
            Marks(
                retiring={WORKER: at - 1.0},
                cooldown_until={OTHER: at + 300.0},
                retired={RETIRED: Retired(at - 60.0, {})},
                written=Written(at, boot[0], boot[1] - 10.0),
            )
        )
        memory = memory_of(path)
        # Act
        memory.recall()
        readings = [Reading(WORKER, 900.0), Reading(OTHER, 900.0)]
        plan = await memory.planner.plan(readings, time.monotonic())
        # Assert
        assert {d.worker: d.verdict for d in plan.decisions} == {
            WORKER: Verdict.RETIRING,
            OTHER: Verdict.COOLDOWN,
        }
        assert set(memory.retired.marks()) == {RETIRED}

    async def test_before_stop_no_thread_to_write_fails_then_recovers(
        self, tmp_path: Path, monkeypatch
    ) -> None:
        """Given no thread can be started (a pids limit) when a stop is to be written
        down, then the write fails as an ``OSError`` (the stop is not sent) and is
        counted; once threads can be started again, the next stop is written down."""
        # Arrange
        path = tmp_path / "state.json"
        planner = PolicyPlanner(PolicySettings(max_idle=60.0, min_workers=0))
        registry = CollectorRegistry()
        errors = Counter("state_write_errors", "", registry=registry)
        memory = StopMemory(StateFile(path), planner, errors, RetiredWorkers())
        memory.recall()
        start = threading.Thread.start

        def refuse(thread: threading.Thread) -> None:
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(threading.Thread, "start", refuse)
        # Act
        try:
            await memory.before_stop(WORKER)
        except OSError as error:
            refused: Exception | None = error
        else:
            refused = None
        monkeypatch.setattr(threading.Thread, "start", start)
        await memory.before_stop(OTHER)
        # Assert
        assert "cannot start a thread to write it" in str(refused)
        assert registry.get_sample_value("state_write_errors_total") == 1
        assert set(StateFile(path).load().retiring) == {OTHER}

    async def test_save_hung_on_the_file_system_lets_go_of_the_writes_that_timed_out(
        self, tmp_path: Path, monkeypatch
    ) -> None:
        """Given a state file whose write hangs in the file system (a save that never
        returns, as a hung mount cannot be made here), when the marks change and are
        saved again and again (a cycle's worth each), each write timing out, then the
        writes that timed out are let go: the marks they held are not kept (one more
        was kept each cycle for as long as the mount hung), and each is counted."""
        # Arrange
        release = threading.Event()

        class HungFileSystem(StateFile):
            def save(self, marks: Marks) -> None:
                release.wait()

        monkeypatch.setattr(memory_module, "WRITE_TIMEOUT", 0.001)
        monkeypatch.setattr(memory_module.log, "disabled", True)  # the capture keeps records
        planner = PolicyPlanner(PolicySettings(max_idle=60.0, min_workers=0))
        registry = CollectorRegistry()
        errors = Counter("state_write_errors", "", registry=registry)
        memory = StopMemory(HungFileSystem(tmp_path / "s.json"), planner, errors, RetiredWorkers())
        saves = 300
        gc.collect()
        before = sum(isinstance(o, Marks) for o in gc.get_objects())
        # Act
        try:
            for n in range(saves):
                planner.record(f"127.0.0.1:{n + 1}", StopResult.STOPPED, time.monotonic())
                await memory.save()
            gc.collect()
            held = sum(isinstance(o, Marks) for o in gc.get_objects()) - before
        finally:
            release.set()
        # Assert
        assert registry.get_sample_value("state_write_errors_total") == saves
        assert held < saves / 3

    def test_save_hung_on_the_file_system_never_holds_up_the_exit(self, tmp_path: Path) -> None:
        """Given a process whose write of the state file hangs in the file system (a
        frozen or unanswering mount: here a save that never returns, as one cannot be
        made without root), when its write times out and the process then leaves, then
        it exits: the hung writer thread is not waited for (SIGTERM could not end such
        a daemon)."""
        # Arrange
        script = (
            "import asyncio, sys, threading, time\n"
            "from prometheus_client import CollectorRegistry, Counter\n"
            "from wool_idle.autoscaler import memory\n"
            "from wool_idle.autoscaler.planner import PolicyPlanner\n"
            "from wool_idle.autoscaler.retired import RetiredWorkers\n"
            "from wool_idle.autoscaler.policy import PolicySettings\n"
            "from wool_idle.autoscaler.state_file import StateFile\n"
            "from wool_idle.autoscaler.verdicts import StopResult\n"
            "class HungFileSystem(StateFile):\n"
            "    def save(self, marks):\n"
            "        threading.Event().wait()\n"
            "memory.WRITE_TIMEOUT = 0.1\n"
            "planner = PolicyPlanner(PolicySettings(max_idle=60.0))\n"
            "planner.record('127.0.0.1:1', StopResult.STOPPED, time.monotonic())\n"
            "registry = CollectorRegistry()\n"
            "errors = Counter('e', '', registry=registry)\n"
            "stop_memory = memory.StopMemory(\n"
            "    HungFileSystem(sys.argv[1]), planner, errors, RetiredWorkers()\n"
            ")\n"
            "asyncio.run(stop_memory.save())\n"
            "print(f\"failed writes: {registry.get_sample_value('e_total'):g}\")\n"
        )
        # Act
        result = run_python(script, str(tmp_path / "state.json"))
        # Assert
        assert result.returncode == 0, result.stderr
        assert result.stdout == "failed writes: 1\n"
