"""Each benchmark runs in its quick mode and prints its ratios (never a timing assert)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = [
    "exporter_fanout",
    "exporter_scale",
    "blackbox",
    "scrapers",
    "worker",
    "autoscaler_cycle",
    "envelopes",
    "discovery_scan",
]

pytestmark = pytest.mark.e2e


class TestBenchmarks:
    @pytest.mark.parametrize("name", BENCHMARKS)
    def test_quick_mode_runs_and_prints_ratios(self, name: str) -> None:
        """Given a benchmark, when run with --quick, then it exits 0 and its last
        section is its ratios."""
        # Act
        result = subprocess.run(
            [sys.executable, "-m", f"bench.{name}", "--quick"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        # Assert
        assert result.returncode == 0, result.stderr
        lines = result.stdout.strip().splitlines()
        assert lines[0].startswith("machine:")
        ratio_header = max(i for i, line in enumerate(lines) if line.startswith("ratios"))
        assert ratio_header < len(lines) - 1
        assert all("x" in line or ":" in line for line in lines[ratio_header + 1 :])
