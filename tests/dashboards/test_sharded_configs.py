"""The sharded example Prometheus configs (dashboards/prometheus/sharded), checked by
real promtool; tests/e2e/test_sharded.py runs them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

SHARDED = Path(__file__).resolve().parents[2] / "dashboards" / "prometheus" / "sharded"


def shard(index: int) -> dict:
    return yaml.safe_load((SHARDED / f"shard-{index}.yml").read_text())


class TestShardedConfigs:
    @pytest.mark.parametrize("name", ["shard-0.yml", "shard-1.yml", "global.yml"])
    def test_promtool_check_config_passes(self, name: str) -> None:
        """Given a sharded example config, when promtool checks it (with the rule files
        it names), then it passes."""
        # Arrange
        binary = shutil.which("promtool")
        assert binary, "Debian's prometheus package is required (scripts/ensure-prometheus)"
        # Act
        result = subprocess.run(
            [binary, "check", "config", name],
            capture_output=True,
            text=True,
            cwd=SHARDED,
            timeout=120,
        )
        # Assert
        assert result.returncode == 0, result.stdout + result.stderr

    def test_shards_differ_only_in_their_number(self) -> None:
        """Given the two shard configs, when shard 1's number is set to 0 (its external
        label and the remainder its hashmod keeps), then it is shard 0's config, and
        both hash into the same number of shards."""
        # Arrange
        first, second = shard(0), shard(1)
        relabel = second["scrape_configs"][0]["relabel_configs"]
        # Act
        second["global"]["external_labels"]["shard"] = "0"
        keep = next(rule for rule in relabel if rule.get("action") == "keep")
        keep["regex"] = "0"
        # Assert
        assert second == first
        hashmod = next(rule for rule in relabel if rule.get("action") == "hashmod")
        assert hashmod["modulus"] == 2
