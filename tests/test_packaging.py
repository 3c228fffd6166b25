"""The distribution: a wheel built from the tree ships what its users rely on."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """A wheel built (offline, with the installed setuptools) from a copy of the tree."""
    tree = tmp_path_factory.mktemp("tree")
    shutil.copytree(
        ROOT / "wool_idle", tree / "wool_idle", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    dist = tmp_path_factory.mktemp("dist")
    offline = ["--no-deps", "--no-build-isolation", "--quiet"]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(tree), *offline, "--wheel-dir", str(dist)],
        check=True,
        capture_output=True,
    )
    (built,) = dist.glob("wool_idle-*.whl")
    return zipfile.ZipFile(built)


class TestWheel:
    def test_wheel_ships_py_typed(self, wheel: zipfile.ZipFile) -> None:
        """Given the wheel, then it holds wool_idle/py.typed (PEP 561: type checkers
        use the package's own annotations)."""
        assert "wool_idle/py.typed" in wheel.namelist()

    def test_wheel_ships_the_license_pyproject_names(self, wheel: zipfile.ZipFile) -> None:
        """Given the wheel, then its metadata says Apache-2.0 and it carries the full
        Apache License 2.0 text of LICENSE."""
        # Arrange
        names = wheel.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        # Act
        text = wheel.read(license_file).decode()
        # Assert
        assert "License-Expression: Apache-2.0" in wheel.read(metadata).decode()
        assert text == (ROOT / "LICENSE").read_text()
        assert "Apache License" in text and "Version 2.0, January 2004" in text
        assert "END OF TERMS AND CONDITIONS" in text
