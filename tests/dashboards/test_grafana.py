"""The Grafana dashboard's structure (its queries run against a real Prometheus in tests/e2e)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from support.promtool import promtool_test

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "grafana" / "wool-idle.json"


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


class TestDashboard:
    def test_variables(self) -> None:
        """Given the dashboard, then it has a Prometheus datasource variable, a worker
        variable from label_values, and a threshold variable."""
        variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        assert "label_values(" in variables["worker"]["definition"]
        assert variables["threshold"]["type"] in ("textbox", "custom", "constant")

    def test_no_hard_coded_datasource(self) -> None:
        """Given every panel and target, then each uses the datasource variable."""
        text = DASHBOARD.read_text()
        uids = set(re.findall(r'"uid":\s*"([^"]*)"', text)) - {"wool-idle"}
        assert uids == {"${datasource}"}

    def test_required_panels(self) -> None:
        """Given the panels, then each view the issue asks for is there."""
        exprs = " ".join(t["expr"] for p in dashboard()["panels"] for t in p["targets"])
        for needle in (
            "wool_worker_idle_seconds",
            "sort_desc(wool_worker_idle_seconds",
            "wool_worker_up",
            "wool_worker_idle_supported",
            ">= $threshold",
            "wool_autoscaler_stops_total",
            "wool_autoscaler_blocked_total",
            "wool_exporter_scrape_duration_seconds",
            "wool_worker_probe_duration_seconds",
            "wool_autoscaler_retired_timestamp_seconds",
        ):
            assert needle in exprs, needle

    def test_provisioning_example(self) -> None:
        """Given provisioning.yml, then it is a file provider (Grafana's format)."""
        document = yaml.safe_load((DASHBOARD.parent / "provisioning.yml").read_text())
        assert document["apiVersion"] == 1
        assert document["providers"][0]["type"] == "file"


def panel_expr(title: str, ref: str = "A") -> str:
    """A panel's query with the worker variable set to every worker and the threshold
    variable to its default."""
    panel = next(p for p in dashboard()["panels"] if p["title"] == title)
    target = next(t for t in panel["targets"] if t["refId"] == ref)
    return str(target["expr"]).replace("$worker", ".*").replace("$threshold", "600")


FLEET = [
    {"series": 'wool_worker_up{worker="u:1",job="wool-idle"}', "values": "1x10"},
    {"series": 'wool_worker_up{worker="d:1",job="wool-idle"}', "values": "0x10"},
    {"series": 'wool_worker_up{worker="r:1",job="wool-idle"}', "values": "0x10"},
    {
        "series": 'wool_autoscaler_retired_timestamp_seconds{worker="r:1",wool_tags="hot"}',
        "values": "60x10",
    },
    {"series": 'wool_autoscaler_retired_timestamp_seconds{worker="x:1"}', "values": "60x10"},
]
"""Up, down, retired (still listed, down), and retired and no longer listed."""


class TestRetiredPanels:
    def test_worker_status_shows_retired_not_down(self, tmp_path: Path) -> None:
        """Given an up worker, a down one, a retired one the exporter still lists as
        down and a retired one no longer listed, when the shipped 'Worker status' query
        runs in promtool, then they are 1 (up), 0 (down), 2 (retired), 2 (retired),
        which the panel's value mappings name."""
        # Arrange
        expected = {"u:1": 1, "d:1": 0, "r:1": 2, "x:1": 2}
        samples = [{"labels": f'{{worker="{w}"}}', "value": v} for w, v in expected.items()]
        mappings = next(p for p in dashboard()["panels"] if p["title"] == "Worker status")[
            "fieldConfig"
        ]["defaults"]["mappings"][0]["options"]
        # Act
        failure = promtool_test(
            tmp_path,
            FLEET,
            [{"expr": panel_expr("Worker status"), "eval_time": "5m", "exp_samples": samples}],
        )
        # Assert
        assert failure == ""
        assert {k: v["text"] for k, v in mappings.items()} == {
            "0": "down",
            "1": "up",
            "2": "retired",
        }

    def test_counts_tell_down_from_retired(self, tmp_path: Path) -> None:
        """Given the same fleet, when the shipped counts of down and retired workers
        run, then one worker is down and two are retired."""
        # Act
        failure = promtool_test(
            tmp_path,
            FLEET,
            [
                {
                    "expr": panel_expr("Workers up / down / retired", ref),
                    "eval_time": "5m",
                    "exp_samples": [{"labels": "{}", "value": count}],
                }
                for ref, count in (("C", 1), ("D", 2))
            ],
        )
        # Assert
        assert failure == ""


def on_both_shards(name: str, worker: str, values: str) -> list[dict[str, str]]:
    """The series ``name`` of ``worker`` as a global server federates it from both
    shards: the same but for ``shard``."""
    labels = f'worker="{worker}",job="wool-idle-sd",instance="{worker}"'
    return [
        {"series": f'{name}{{{labels},shard="{shard}"}}', "values": values} for shard in ("0", "1")
    ]


RESHARDED = [
    *on_both_shards("wool_worker_up", "i:1", "1x10"),
    *on_both_shards("wool_worker_idle_supported", "i:1", "1x10"),
    *on_both_shards("wool_worker_idle_seconds", "i:1", "700x10"),
    *on_both_shards("wool_worker_up", "u:1", "1x10"),
    *on_both_shards("wool_worker_idle_supported", "u:1", "0x10"),
    *on_both_shards("wool_worker_up", "d:1", "0x10"),
    *on_both_shards("wool_worker_idle_supported", "d:1", "0x10"),
]
"""Three workers, each federated from two shards (their number just changed): one idle
past the threshold, one too old to report idle time, one down."""


class TestCountsPerWorker:
    def test_counts_count_each_worker_once(self, tmp_path: Path) -> None:
        """Given three workers each named by two series that differ only in `shard` (a
        worker on two shards while their number changes), when every shipped count of
        workers runs, then each worker counts once: 2 up, 1 unsupported, 1 idle past
        the threshold, 1 down."""
        # Arrange
        counts = [
            ("Workers up", "A", 2),
            ("Idle RPC unsupported", "A", 1),
            ("Idle past threshold", "A", 1),
            ("Workers up / down / retired", "A", 2),
            ("Workers up / down / retired", "B", 1),
            ("Workers up / down / retired", "C", 1),
            ("Workers idle past the threshold", "A", 1),
        ]
        # Act
        failure = promtool_test(
            tmp_path,
            RESHARDED,
            [
                {
                    "expr": panel_expr(title, ref),
                    "eval_time": "5m",
                    "exp_samples": [{"labels": "{}", "value": count}],
                }
                for title, ref, count in counts
            ],
        )
        # Assert
        assert failure == ""
