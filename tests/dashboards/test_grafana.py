"""The Grafana dashboard's structure (its queries run against a real Prometheus in tests/e2e)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

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
        ):
            assert needle in exprs, needle

    def test_provisioning_example(self) -> None:
        """Given provisioning.yml, then it is a file provider (Grafana's format)."""
        document = yaml.safe_load((DASHBOARD.parent / "provisioning.yml").read_text())
        assert document["apiVersion"] == 1
        assert document["providers"][0]["type"] == "file"
