"""The package's public surface and the import rules of DESIGN.md."""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "wool_idle"
FORBIDDEN = {
    # part: the parts of ours it must never import
    "proto": {"worker", "exporter", "autoscaler", "demo", "options", "endpoints", "exceptions"},
    "worker": {"exporter", "autoscaler", "demo", "endpoints"},
    "exporter": {"autoscaler", "demo"},
    "autoscaler": {"exporter", "demo"},
}


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
            for name, value in vars(loaded).items()
            if not name.startswith("_")
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
            for path in (PACKAGE / part).rglob("*.py")
        }
        assert {k: v for k, v in offenders.items() if v} == {}
