"""The PrometheusRule generator (``python -m deploy.prometheus_rule``): the committed
manifest follows ``dashboards/prometheus/alerts.yml``, its groups pass the rules'
promtool tests, and a malformed rules file exits 2 naming the file and the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from wool_idle.exporter.strict_yaml import load_yaml

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "dashboards" / "prometheus" / "alerts.yml"
ALERTS_TEST = ROOT / "dashboards" / "prometheus" / "alerts_test.yml"
COMMITTED = ROOT / "deploy" / "kubernetes" / "prometheusrule.yaml"

GOOD_RULE = "      - alert: A\n        expr: up == 0\n"
MALFORMED = [
    # (rules file text, what the error line must name)
    ("groups:\n  - name: g\n    rules:\n      - alert: A\n        for: 5m\n", "groups[0].rules[0]"),
    ("groups:\n  - name: g\n    rules:\n      - alert: A\n        exp: up\n", "'exp'"),
    ("groups:\n  - name: g\n    rules:\n      - alert: A\n        alert: B\n", "'alert'"),
    ("groups:\n  - name: g\n    rules:\n      - expr: up\n", "groups[0].rules[0]"),
    ("groups:\n  - name: g\n    rules:\n      - alert: A\n        record: r\n", "'record'"),
    ("groups:\n  - name: g\n    rules:\n" + GOOD_RULE + "        labels: [a]\n", "labels"),
    (
        "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: up\n        for: 1m\n",
        "groups[0].rules[0].for",
    ),
    ("groups:\n  - name: g\n    limit: many\n    rules:\n" + GOOD_RULE, "groups[0].limit"),
    ("groups:\n  - rules:\n" + GOOD_RULE, "'name'"),
    ("groups:\n  - name: g\n    rules: {}\n", "groups[0].rules"),
    ("groups:\n  - name: g\n  - name: g\n", "groups[1].name"),
    ("groups: {}\n", "groups"),
    ("grups: []\n", "'grups'"),
    ("groups: [\n", "line 2"),
]


def generate(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the generator as documented, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "deploy.prometheus_rule", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


class TestPrometheusRuleGenerator:
    def test_main_committed_rule_is_generated_from_alerts(self) -> None:
        """Given alerts.yml, when the generator renders it, then the result is byte for
        byte the committed prometheusrule.yaml (rerun the generator after editing
        alerts.yml: `python -m deploy.prometheus_rule`)."""
        # Act
        result = generate("--output", "-")
        # Assert
        assert result.returncode == 0, result.stderr
        assert result.stdout == COMMITTED.read_text(), (
            "deploy/kubernetes/prometheusrule.yaml drifted from alerts.yml: "
            "run `python -m deploy.prometheus_rule`"
        )

    def test_main_changed_alerts_change_the_rule(self, tmp_path: Path) -> None:
        """Given alerts.yml with its first rule's expression changed, when the generator
        renders it, then the manifest differs from the committed one and carries the
        new expression (so the drift check above can fail)."""
        # Arrange
        document = load_yaml(ALERTS.read_bytes())
        rule = document["groups"][0]["rules"][0]
        rule["expr"] = f"({rule['expr']}) * 2"
        changed = tmp_path / "alerts.yml"
        changed.write_text(yaml.safe_dump(document, sort_keys=False))
        # Act
        result = generate("--rules", str(changed), "--output", "-")
        # Assert
        assert result.returncode == 0, result.stderr
        assert result.stdout != COMMITTED.read_text()
        generated = yaml.safe_load(result.stdout)["spec"]["groups"][0]["rules"][0]
        assert generated["expr"] == rule["expr"]

    def test_main_groups_are_the_rules_as_written(self, tmp_path: Path) -> None:
        """Given alerts.yml and a rules file with a multi-line expression, when the
        generator renders them, then the manifest's spec.groups read back equal to the
        groups as Prometheus reads them (every value as written)."""
        # Arrange
        multiline = tmp_path / "multiline.yml"
        multiline.write_text(
            "groups:\n  - name: g\n    interval: 1m\n    rules:\n"
            "      - alert: A\n        expr: |\n          up == 0\n          and on() vector(1)\n"
            "        for: 0\n        labels:\n          severity: 'yes'\n"
        )
        for source in (ALERTS, multiline):
            # Act
            result = generate("--rules", str(source), "--output", "-")
            # Assert
            assert result.returncode == 0, result.stderr
            generated = yaml.safe_load(result.stdout)
            assert generated["spec"]["groups"] == load_yaml(source.read_bytes())["groups"]
            assert generated["kind"] == "PrometheusRule"

    def test_main_rule_groups_pass_the_promtool_tests(self, tmp_path: Path, promtool: str) -> None:
        """Given the committed PrometheusRule, when its spec.groups are written as a rules
        file and alerts_test.yml is run against it, then promtool passes every case."""
        # Arrange
        groups = yaml.safe_load(COMMITTED.read_text())["spec"]["groups"]
        (tmp_path / "rule-groups.yml").write_text(yaml.safe_dump({"groups": groups}))
        tests = yaml.safe_load(ALERTS_TEST.read_text())
        assert tests["rule_files"] == ["alerts.yml"], "alerts_test.yml reads other rule files"
        tests["rule_files"] = ["rule-groups.yml"]
        (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
        # Act
        result = subprocess.run(
            [promtool, "test", "rules", "tests.yml"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        # Assert
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS" in result.stdout

    @pytest.mark.parametrize(("text", "key"), MALFORMED)
    def test_main_malformed_rules_exit_2_naming_file_and_key(
        self, tmp_path: Path, text: str, key: str
    ) -> None:
        """Given a malformed rules file, when the generator reads it, then it exits 2
        with one line naming the file and the key, and writes nothing."""
        # Arrange
        rules = tmp_path / "bad-alerts.yml"
        rules.write_text(text)
        output = tmp_path / "out.yaml"
        # Act
        result = generate("--rules", str(rules), "--output", str(output))
        # Assert
        assert result.returncode == 2, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert str(rules) in lines[0] and key in lines[0], lines[0]
        assert not output.exists()

    def test_main_missing_rules_file_exits_2_naming_it(self, tmp_path: Path) -> None:
        """Given a rules path where no file is, when the generator runs, then it exits 2
        with one line naming the path."""
        # Arrange
        missing = tmp_path / "nowhere.yml"
        # Act
        result = generate("--rules", str(missing), "--output", str(tmp_path / "out.yaml"))
        # Assert
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and str(missing) in result.stderr
