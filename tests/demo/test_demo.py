"""``wool-idle demo`` run non-interactively, as the README runs it: a real wool fleet."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import uuid
from pathlib import Path

import pytest
from support.processes import processes_with_marker, run_cli, spawn_cli
from support.waiting import eventually

from wool_idle.autoscaler.policy import Reading
from wool_idle.demo.fleet import ClientCounts
from wool_idle.demo.table import Board


def summary_line(stdout: str, start: str) -> str:
    """The demo's summary line that begins with ``start`` (the last such line: the
    table's footer may begin alike)."""
    return [line for line in stdout.splitlines() if line.startswith(start)][-1]


def stop_left_behind(marker: str) -> None:
    """SIGTERM the processes carrying ``marker`` that a failed run left (a pool then
    drops its workers and its resource tracker unlinks their shared memory), and
    SIGKILL those still there after a while."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in processes_with_marker(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        eventually(lambda: not processes_with_marker(marker), timeout=25)


class TestDemo:
    @pytest.mark.e2e
    def test_demo_retires_idle_keeps_every_tag_and_loses_no_task(self) -> None:
        """Given the demo with a short max-idle, the client starting after the first
        retirements, when it runs to the end, then it exits 0, at least one idle
        worker was retired, a worker of each tag is left, the wool client's tasks all
        completed (none failed), and no process it started (or they started) is left."""
        # Arrange
        marker = f"WOOLIDLE_DEMO_TEST={uuid.uuid4()}"  # not WOOL_IDLE_*: unknown ones exit 2
        name, value = marker.split("=")
        args = ["demo", "--max-idle", "3s", "--client-after", "8s", "--duration", "14s"]
        # Act
        result = run_cli(args, timeout=150, env={name: value})
        # Assert
        assert result.returncode == 0, result.stdout + result.stderr
        out = result.stdout
        retired = summary_line(out, "retired idle workers: ")
        left = summary_line(out, "workers left: ")
        counts = summary_line(out, "wool client on hot: ")
        submitted, completed, failed = map(
            int, re.fullmatch(r".*submitted=(\d+) completed=(\d+) failed=(\d+)", counts).groups()
        )
        assert int(retired.split()[3]) >= 1
        assert re.search(r"\bcold 1 \(", left) and re.search(r"\bhot 1 \(", left)
        assert failed == 0 and submitted == completed > 0
        assert summary_line(out, "child processes left: ").startswith("child processes left: none")
        assert processes_with_marker(marker) == []
        shutil.rmtree(summary_line(out, "logs: ").removeprefix("logs: "))

    @pytest.mark.e2e
    def test_demo_child_not_ready_stops_the_rest_and_exits_1(self) -> None:
        """Given an environment that makes the exporter exit at start (a bad
        WOOL_IDLE_CONCURRENCY, which the children inherit), when the demo runs, then it
        says which process did not start, stops the wool processes already started,
        leaves no process behind and exits 1."""
        # Arrange
        marker = f"WOOLIDLE_DEMO_TEST={uuid.uuid4()}"  # not WOOL_IDLE_*: unknown ones exit 2
        name, value = marker.split("=")
        # Act
        result = run_cli(["demo"], timeout=120, env={name: value, "WOOL_IDLE_CONCURRENCY": "x"})
        # Assert
        assert result.returncode == 1, result.stdout + result.stderr
        assert "did not start: wool-idle exporter exited with status 2" in result.stderr
        assert "child processes left: none" in result.stdout
        assert processes_with_marker(marker) == []
        shutil.rmtree(summary_line(result.stdout, "logs: ").removeprefix("logs: "))

    @pytest.mark.e2e
    def test_demo_hangup_stops_every_child(self) -> None:
        """Given the demo running with every process up, when its terminal hangs up
        (SIGHUP: the window closed), then it stops every process it started (they are
        in sessions of their own, which no hangup reaches) and says none is left."""
        # Arrange
        marker = f"WOOLIDLE_DEMO_TEST={uuid.uuid4()}"  # not WOOL_IDLE_*: unknown ones exit 2
        name, value = marker.split("=")
        demo = spawn_cli(["demo", "--duration", "0"], env={**os.environ, name: value})
        try:
            assert demo.stdout is not None
            for line in demo.stdout:
                if line.startswith("autoscaler: "):  # the banner: every process is up
                    break
            # Act
            demo.send_signal(signal.SIGHUP)
            out, _ = demo.communicate(timeout=120)
            left = processes_with_marker(marker)
        finally:
            demo.kill()
            demo.communicate()
            stop_left_behind(marker)
        # Assert
        assert left == []
        assert summary_line(out, "child processes left: ").startswith("child processes left: none")
        shutil.rmtree(summary_line(out, "logs: ").removeprefix("logs: "))

    def test_demo_rejects_client_after_not_below_duration(self) -> None:
        """Given --client-after equal to --duration, when the demo starts, then it exits 2
        naming --client-after, before starting anything."""
        # Act
        result = run_cli(["demo", "--client-after", "10s", "--duration", "10s"])
        # Assert
        assert result.returncode == 2
        assert result.stderr.startswith("wool-idle demo: error: argument --client-after")

    def test_demo_without_wool_exits_2_saying_what_to_install(self, tmp_path: Path) -> None:
        """Given an interpreter where the wool package cannot be imported, when the demo
        starts, then it exits 2 with one line naming the extra to install."""
        # Arrange
        (tmp_path / "wool").mkdir()
        (tmp_path / "wool" / "__init__.py").write_text("raise ImportError('no wool here')\n")
        # Act
        result = run_cli(["demo"], env={"PYTHONPATH": str(tmp_path)})
        # Assert
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "pip install 'wool-idle[wool]'" in result.stderr


class TestBoard:
    def test_rows_states_and_decisions(self) -> None:
        """Given readings, then decisions, and a later reading without two workers, when
        rows are built, then each state follows: retired (stopped by the autoscaler,
        even once no longer listed), gone (no longer listed), down, unknown (no
        value), busy (idle < 0.5 s: between tasks), idle; a decision older than the
        ttl behind the newest shows as none, a retirement always shows."""
        # Arrange
        board = Board(decision_ttl=2.0)
        first = ["r:1", "g:1", "d:1", "u:1", "b:1", "i:1"]
        board.read_exporter(Reading(w, 9.0, group=("hot",)) for w in first)
        board.read_decisions(
            [
                {"time": 100.0, "worker": "r:1", "verdict": "stop", "result": "stopped"},
                {"time": 100.0, "worker": "b:1", "verdict": "min_workers", "result": None},
                {"time": 105.0, "worker": "i:1", "verdict": "min_workers", "result": None},
            ]
        )
        # Act
        board.read_exporter(
            [
                Reading("d:1", None, up=False, group=("hot",)),
                Reading("u:1", None, group=("hot",)),
                Reading("b:1", 0.004, group=("hot",)),
                Reading("i:1", 12.0, group=("hot",)),
            ]
        )
        rows = board.rows()
        # Assert
        assert [(r.worker, r.tags, r.state, r.decision) for r in rows] == [
            ("r:1", "hot", "retired", "stopped"),
            ("g:1", "hot", "gone", "-"),
            ("d:1", "hot", "down", "-"),
            ("u:1", "hot", "unknown", "-"),
            ("b:1", "hot", "busy", "-"),
            ("i:1", "hot", "idle", "min_workers"),
        ]
        assert board.left() == {"hot": ["u:1", "b:1", "i:1"]}

    def test_left_groups_up_workers_by_tags(self) -> None:
        """Given workers of two tags, one retired and one down, when asked what is left,
        then the up, unretired workers by tags, tags sorted."""
        # Arrange
        board = Board(decision_ttl=2.0)
        board.read_exporter(
            [
                Reading("h1:1", 1.0, group=("hot",)),
                Reading("h2:1", 1.0, group=("hot",)),
                Reading("c1:1", 1.0, up=False, group=("cold",)),
                Reading("c2:1", 1.0, group=("cold",)),
            ]
        )
        board.read_decisions([{"time": 1.0, "worker": "h1:1", "result": "stopped"}])
        # Act
        left = board.left()
        # Assert
        assert left == {"cold": ["c2:1"], "hot": ["h2:1"]}


class TestClientCounts:
    def test_read_takes_counts_and_ignores_other_lines(self) -> None:
        """Given the client's ready line, a counts line and a malformed one, when read in
        turn, then the counts are those of the well-formed JSON line."""
        # Arrange
        counts = ClientCounts()
        # Act
        lines = [
            b"client on hot workers of ns\n",
            b'{"submitted": 3, "completed": 2, "failed": 1}\n',
            b'{"submitted": "x", "completed": 2, "failed": 1}\n',
            b'{"submitted": 4}\n',
            b"[1]\n",
        ]
        for line in lines:
            counts.read(line)
        # Assert
        assert (counts.submitted, counts.completed, counts.failed) == (3, 2, 1)
