"""The package's public surface and the import rules of docs/architecture.md."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "wool_idle"
FORBIDDEN = {
    # part: the parts of ours it must never import
    "contract": {"proto", "worker", "exporter", "autoscaler", "demo", "cli", "web"},
    "proto": {"worker", "exporter", "autoscaler", "demo", "cli", "web", "exceptions"},
    "worker": {"exporter", "autoscaler", "demo", "web"},
    "web": {"exporter", "autoscaler", "demo", "cli", "discovery"},
    "discovery": {"exporter", "autoscaler", "demo", "cli", "web"},
    "exporter": {"autoscaler", "demo"},
    "autoscaler": {"exporter", "demo"},
}
MAX_MODULE_LINES = 250
"""The house rule: no module in wool_idle/ is longer than this."""


def imported_parts(path: Path) -> set[str]:
    """The ``wool_idle.<part>`` names a module imports."""
    parts = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            pieces = name.split(".")
            if pieces[0] == "wool_idle" and len(pieces) > 1:
                parts.add(pieces[1])
    return parts


class TestPublicApi:
    @pytest.mark.parametrize("module", ["wool_idle", "wool_idle.worker", "wool_idle.proto"])
    def test_all_is_exactly_the_public_names(self, module: str) -> None:
        """Given a package with __all__, then every name in it exists, and every public
        name it defines (not a submodule) is in it."""
        loaded = importlib.import_module(module)
        public = {
            name
            for name in dir(loaded)
            if not name.startswith("_")
            and not isinstance(value := getattr(loaded, name), types.ModuleType)
            and not isinstance(value, types.ModuleType)
            and name != "annotations"
            and getattr(value, "__module__", "") != "typing"
        }
        assert set(loaded.__all__) - {"__version__"} == public
        assert all(hasattr(loaded, name) for name in loaded.__all__)


class TestImportRules:
    @pytest.mark.parametrize("part", sorted(FORBIDDEN))
    def test_part_imports_only_what_it_may(self, part: str) -> None:
        """Given every module of a part, then it imports none of the parts it must not
        (exporter and autoscaler never import each other; worker never imports either;
        proto imports nothing of ours)."""
        offenders = {
            str(path.relative_to(PACKAGE)): imported_parts(path) & FORBIDDEN[part]
            for path in _modules(part)
        }
        assert {k: v for k, v in offenders.items() if v} == {}

    @pytest.mark.parametrize("part", ["worker", "exporter", "autoscaler", "proto"])
    def test_contract_imports_alone_beside_every_part(self, part: str) -> None:
        """Given a fresh interpreter, when it imports the contract and then a part, then
        the contract loaded first imported nothing but the standard library."""
        # Act
        loaded = _fresh_imports(f"import wool_idle.contract; import wool_idle.{part}")
        # Assert
        assert "wool_idle.contract" in loaded
        assert f"wool_idle.{part}" in loaded

    def test_policy_imports_no_io_library(self) -> None:
        """Given a fresh interpreter, when it imports the autoscaler's policy, then no
        gRPC, protobuf, aiohttp, cloudpickle or prometheus-client module is loaded."""
        # Act
        loaded = _fresh_imports("import wool_idle.autoscaler.policy")
        # Assert
        assert "wool_idle.autoscaler.policy" in loaded
        assert sorted(m for m in loaded if m.split(".")[0] in IO_LIBRARIES) == []

    def test_contract_imports_only_the_standard_library(self) -> None:
        """Given a fresh interpreter, when it imports the contract, then no module outside
        the standard library and wool_idle is loaded."""
        # Act
        loaded = _fresh_imports("import wool_idle.contract") - _fresh_imports("pass")
        # Assert
        foreign = {m.split(".")[0] for m in loaded} - sys.stdlib_module_names - {"wool_idle"}
        assert sorted(foreign) == []


class TestModuleSize:
    def test_no_module_is_over_the_line_limit(self) -> None:
        """Given every module of the package, then none is longer than MAX_MODULE_LINES
        lines; the offenders are named."""
        # Act
        over = _modules_over_the_limit()
        # Assert
        assert over == {}


def _modules_over_the_limit() -> dict[str, int]:
    """The line count of each module of the package longer than MAX_MODULE_LINES, by
    its path from the repository's root."""
    lengths = {
        path.relative_to(PACKAGE.parent).as_posix(): len(path.read_text().splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    return {path: n for path, n in lengths.items() if n > MAX_MODULE_LINES}


IO_LIBRARIES = frozenset({"grpc", "google", "aiohttp", "cloudpickle", "prometheus_client", "yaml"})


def _modules(part: str) -> list[Path]:
    single = PACKAGE / f"{part}.py"
    return [single] if single.exists() else sorted((PACKAGE / part).rglob("*.py"))


def _fresh_imports(statement: str) -> set[str]:
    """The modules a new interpreter has loaded after running ``statement``."""
    code = f"{statement}; import sys; print('\\n'.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())
