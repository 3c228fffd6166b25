"""Fixtures of the deployment tests: the tools they run, the rendered kustomization,
and the validators of every kind in it.

A missing tool fails the test that needs it (never a skip), saying what to install.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.prometheus_operator import v1 as operator

from wool_idle.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZATION = ROOT / "deploy" / "kubernetes"
OPERATOR_API = "monitoring.coreos.com/v1"
OPERATOR_KINDS = {
    "ServiceMonitor": operator.ServiceMonitor,
    "PrometheusRule": operator.PrometheusRule,
}

Manifest = dict[str, Any]
Validate = Callable[[Manifest, str], None]


def require_tool(name: str, install: str) -> str:
    """The path of executable ``name``; fails the test, saying ``install``, if missing."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: {install}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def kubectl() -> str:
    return require_tool("kubectl", "install kubectl >= 1.27 (it embeds kustomize v5, used offline)")


@pytest.fixture(scope="session")
def systemd_analyze() -> str:
    return require_tool("systemd-analyze", "apt-get install systemd")


@pytest.fixture(scope="session")
def systemd_sysusers() -> str:
    return require_tool("systemd-sysusers", "apt-get install systemd")


@pytest.fixture(scope="session")
def unshare() -> str:
    return require_tool("unshare", "apt-get install util-linux")


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_tool("promtool", "apt-get install prometheus (scripts/ensure-prometheus)")


@pytest.fixture(scope="session")
def render(kubectl: str) -> Callable[[Path], list[Manifest]]:
    """Render a kustomization directory with ``kubectl kustomize`` (offline); any
    warning fails the render."""

    def rendered(directory: Path) -> list[Manifest]:
        result = subprocess.run(
            [kubectl, "kustomize", str(directory)],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 0 and not result.stderr, result.stderr
        return [document for document in yaml.safe_load_all(result.stdout) if document]

    return rendered


@pytest.fixture(scope="session")
def manifests(render: Callable[[Path], list[Manifest]]) -> list[Manifest]:
    """The objects of ``deploy/kubernetes`` as ``kubectl kustomize`` renders them."""
    return render(KUSTOMIZATION)


def strict(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that lists its
    properties and says nothing of others (what kubernetes-validate's strict mode does).

    A CRD pattern is a Go regular expression; the one Go-only form in these schemas,
    a flag group after ``^`` (``^(?i)...``), is moved in front for Python's ``re``.
    """
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    tightened = {key: strict(value) for key, value in schema.items()}
    pattern = tightened.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^(?i)"):
        tightened["pattern"] = "(?i)^" + pattern.removeprefix("^(?i)")
    if "properties" in tightened and "additionalProperties" not in tightened:
        tightened["additionalProperties"] = False
    return tightened


@pytest.fixture(scope="session")
def operator_validators() -> dict[str, jsonschema.protocols.Validator]:
    """A strict JSON Schema validator per prometheus-operator kind, from the schema of
    the package's models (generated from the operator's CRDs)."""
    validators = {}
    for kind, model in OPERATOR_KINDS.items():
        schema = strict(model.model_json_schema())
        schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind"})
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        validators[kind] = validator_class(schema)
    return validators


@pytest.fixture(scope="session")
def validate(operator_validators: dict[str, jsonschema.protocols.Validator]) -> Validate:
    """Validate one object against Kubernetes ``version``: core kinds with
    kubernetes-validate in strict mode, prometheus-operator kinds against their
    strict CRD schema. Raises ``kubernetes_validate.ValidationError`` or
    ``jsonschema.ValidationError``, and ``kubernetes_validate.SchemaNotFoundError``
    for a kind neither knows."""

    def check(manifest: Manifest, version: str) -> None:
        if manifest.get("apiVersion") == OPERATOR_API and manifest.get("kind") in OPERATOR_KINDS:
            error = jsonschema.exceptions.best_match(
                operator_validators[manifest["kind"]].iter_errors(manifest)
            )
            if error is not None:
                raise error
            return
        kubernetes_validate.validate(manifest, version, strict=True)

    return check


ParseEnvironment = Callable[[str, dict[str, str]], argparse.Namespace]


@pytest.fixture
def parse_environment(monkeypatch: pytest.MonkeyPatch) -> ParseEnvironment:
    """Parse ``wool-idle COMMAND`` configured only by the given WOOL_IDLE_* variables,
    as the CLI does at start; fails on a variable the command does not know and on a
    value or combination it rejects (exit 2)."""
    for name in [name for name in os.environ if name.startswith("WOOL_IDLE_")]:
        monkeypatch.delenv(name)

    def parse(command: str, environment: dict[str, str]) -> argparse.Namespace:
        known = {flag.variable for flag in build_parser().subcommands[command].flags}
        unknown = sorted(set(environment) - known)
        assert not unknown, f"wool-idle {command} reads no {unknown}"
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        try:  # a parser built as at start, once the environment is set
            return build_parser().parse_args([command])
        except SystemExit as exit_:
            pytest.fail(f"wool-idle {command} exits {exit_.code} with {environment}")

    return parse
