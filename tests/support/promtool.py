"""promtool's unit tests of PromQL expressions, over synthetic series."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml


def promtool_test(directory: Path, input_series: list[dict], exprs: list[dict]) -> str:
    """Run promtool's unit test of ``exprs`` over ``input_series`` (one sample a
    minute); its output if it failed, else ''."""
    binary = shutil.which("promtool")
    assert binary, "Debian's prometheus package is required (scripts/ensure-prometheus)"
    (directory / "none.yml").write_text("groups: []\n")
    test = {
        "rule_files": ["none.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": input_series, "promql_expr_test": exprs}],
    }
    (directory / "test.yml").write_text(yaml.safe_dump(test))
    done = subprocess.run(
        [binary, "test", "rules", "test.yml"], capture_output=True, text=True, cwd=directory
    )
    return "" if done.returncode == 0 else done.stdout + done.stderr
