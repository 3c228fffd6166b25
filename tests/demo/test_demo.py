"""``wool-idle demo`` run non-interactively, as the README runs it."""

from __future__ import annotations

import uuid
from pathlib import Path

from support.processes import run_cli

from wool_idle.demo import table


def processes_with_marker(marker: str) -> list[int]:
    """PIDs of live processes whose environment carries ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


class TestDemo:
    def test_demo_retires_idle_keeps_busy_leaves_nothing(self) -> None:
        """Given the demo with a short max-idle and duration, when it runs to the end,
        then it exits 0, at least one idle worker was retired, no busy worker was, and
        no child process is left."""
        # Arrange
        marker = f"WOOL_IDLE_DEMO_TEST={uuid.uuid4()}"
        name, value = marker.split("=")
        # Act
        result = run_cli(
            [
                "demo",
                "--workers",
                "3",
                "--busy",
                "1",
                "--max-idle",
                "2s",
                "--duration",
                "10s",
                "--refresh",
                "1s",
            ],
            timeout=120,
            env={name: value},
        )
        # Assert
        assert result.returncode == 0, result.stderr
        summary = {line.split(":")[0]: line for line in result.stdout.splitlines()}
        retired = int(summary["retired idle workers"].split(":")[1].split()[0])
        assert retired >= 1
        assert summary["busy workers retired"].startswith("busy workers retired: 0;")
        assert "exporter metrics:   http://127.0.0.1:" in result.stdout
        assert processes_with_marker(marker) == []

    def test_demo_rejects_busy_not_below_workers(self) -> None:
        """Given --busy equal to --workers, when the demo starts, then exit 2 naming --busy."""
        # Act
        result = run_cli(["demo", "--workers", "2", "--busy", "2"])
        # Assert
        assert result.returncode == 2 and "--busy" in result.stderr


class TestTable:
    def test_rows_states(self) -> None:
        """Given idle values, exits and decisions, when rows are built, then each
        worker's state follows: stopped, busy (idle < 0.5 s: between tasks), idle,
        unknown (no value)."""
        # Act
        rows = table.rows(
            {"a:1": "busy", "b:1": "idle", "c:1": "idle", "d:1": "idle", "e:1": "busy"},
            {"c:1": True},
            {"a:1": 0.0, "b:1": 4.0, "e:1": 0.004},
            table.last_decisions([{"worker": "c:1", "result": "stopped", "verdict": "stop"}]),
        )
        # Assert
        assert [(r.state, r.decision) for r in rows] == [
            ("busy", "-"),
            ("idle", "-"),
            ("stopped", "stopped"),
            ("unknown", "-"),
            ("busy", "-"),
        ]
