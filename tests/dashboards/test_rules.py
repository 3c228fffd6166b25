"""The alert rules and the example Prometheus config, checked by real promtool."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from support.prometheus import SHIPPED_WORKER_JOBS

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "dashboards" / "prometheus"
OPERATIONS = ROOT / "docs" / "operations.md"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "Debian's prometheus package is required (scripts/ensure-prometheus)"
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, cwd=PROMETHEUS_DIR, timeout=120
    )


def rules() -> list[dict]:
    document = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


class TestAlertRules:
    def test_promtool_check_rules(self) -> None:
        """Given alerts.yml, when promtool checks it, then it passes."""
        result = promtool("check", "rules", "alerts.yml")
        assert result.returncode == 0, result.stdout + result.stderr

    def test_promtool_test_rules(self) -> None:
        """Given alerts_test.yml, when promtool runs it, then every case passes."""
        result = promtool("test", "rules", "alerts_test.yml")
        assert result.returncode == 0, result.stdout + result.stderr

    @pytest.mark.parametrize("name", sorted(SHIPPED_WORKER_JOBS))
    def test_promtool_check_example_config(self, name: str) -> None:
        """Given an example Prometheus config, when promtool checks it, then it passes."""
        result = promtool("check", "config", name)
        assert result.returncode == 0, result.stdout + result.stderr

    @pytest.mark.parametrize("name", sorted(SHIPPED_WORKER_JOBS))
    def test_promtool_check_example_config_shorter_interval(
        self, name: str, tmp_path: Path
    ) -> None:
        """Given an example Prometheus config whose only change is a global
        scrape_interval of 5s (short intervals to try the alerts), when promtool
        checks it, then it passes: no job sets a scrape_timeout over it."""
        # Arrange
        config = yaml.safe_load((PROMETHEUS_DIR / name).read_text())
        config["global"]["scrape_interval"] = "5s"
        config["rule_files"] = [str(PROMETHEUS_DIR / rule) for rule in config["rule_files"]]
        for job in config["scrape_configs"]:
            for files in job.get("file_sd_configs", []):
                files["files"] = [str(PROMETHEUS_DIR / file) for file in files["files"]]
        (tmp_path / name).write_text(yaml.safe_dump(config))
        # Act
        result = promtool("check", "config", str(tmp_path / name))
        # Assert
        assert result.returncode == 0, result.stdout + result.stderr

    def test_example_configs_are_every_mode_once(self) -> None:
        """Given the example Prometheus configs, then there is one per mode and no
        other, each with exactly its own worker job (two jobs reading the same
        workers make each of them ``conflicting``, and the autoscaler stops no one)."""
        # Act
        shipped = {
            path.name: yaml.safe_load(path.read_text())
            for path in PROMETHEUS_DIR.glob("prometheus*.yml")
        }
        # Assert
        assert set(shipped) == set(SHIPPED_WORKER_JOBS)
        for name, config in shipped.items():
            jobs = {job["job_name"] for job in config["scrape_configs"]}
            assert jobs & set(SHIPPED_WORKER_JOBS.values()) == {SHIPPED_WORKER_JOBS[name]}, name

    def test_alerts_present_annotated_and_linked(self) -> None:
        """Given the rules, then the sixteen alerts exist, each with summary, description
        and a runbook_url into its own section of docs/operations.md (the heading is
        the alert's name), and none uses keep_firing_for."""
        # Arrange
        anchors = {
            re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in OPERATIONS.read_text().splitlines()
            if line.startswith("#")
        }
        # Act
        found = {rule["alert"]: rule for rule in rules()}
        # Assert
        assert set(found) == {
            "WoolWorkerIdle",
            "WoolWorkerDown",
            "WoolWorkerFlapping",
            "WoolWorkerIdleUnsupported",
            "WoolWorkerIdleUnknown",
            "WoolExporterDown",
            "WoolExporterFlapping",
            "WoolFederationDown",
            "WoolExporterDiscoveryDown",
            "WoolExporterDiscoveryReplaced",
            "WoolExporterTargetsFileInvalid",
            "WoolAutoscalerDown",
            "WoolAutoscalerFlapping",
            "WoolAutoscalerSourceDown",
            "WoolAutoscalerCycleErrors",
            "WoolAutoscalerStopsFailing",
        }
        for rule in found.values():
            assert "keep_firing_for" not in rule
            annotations = rule["annotations"]
            assert annotations["summary"] and annotations["description"]
            path, _, anchor = annotations["runbook_url"].partition("#")
            assert path.endswith("docs/operations.md") and anchor in anchors
            assert anchor == rule["alert"].lower()

    @pytest.mark.parametrize("alert", ["WoolWorkerIdle"])
    def test_idle_alert_for_is_short(self, alert: str) -> None:
        """Given the idle alert, then its `for` is at most a minute (the gauge already
        measures elapsed time)."""
        rule = next(r for r in rules() if r["alert"] == alert)
        assert re.fullmatch(r"\d+s|1m", rule["for"])
