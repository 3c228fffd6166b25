"""deploy/Containerfile, checked as far as this machine allows (it has no container
engine): the sources it copies are enough to build the package, and it runs as the
user the Kubernetes manifests declare."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"


def instructions(name: str) -> list[list[str]]:
    """The arguments of every ``NAME`` instruction of the Containerfile."""
    return [
        shlex.split(line)[1:]
        for line in CONTAINERFILE.read_text().splitlines()
        if line.startswith(f"{name} ")
    ]


class TestContainerfile:
    def test_copy_builds_the_package(self, tmp_path: Path) -> None:
        """Given only the files the Containerfile copies into /src, when pip builds a
        wheel from them, then it builds without a missing file, with the protocol files,
        the README and the license file pyproject's license-files names inside (a file
        the build needs but the Containerfile forgets fails here; setuptools only warns
        of a license-files pattern that matches nothing, until it fails the build)."""
        # Arrange
        source = tmp_path / "src"
        source.mkdir()
        for *paths, destination in instructions("COPY"):
            assert destination.startswith("/src/"), destination
            for path in paths:
                target = source / destination.removeprefix("/src/")
                if (ROOT / path).is_dir():
                    shutil.copytree(
                        ROOT / path, target, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    shutil.copy(ROOT / path, target)
        # Act
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--wheel-dir", str(tmp_path / "wheels"), str(source)],
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        # Assert
        assert result.returncode == 0, result.stderr[-2000:]
        assert "cannot be found" not in result.stderr, result.stderr[-2000:]
        assert "did not match any files" not in result.stderr, result.stderr[-2000:]
        (wheel,) = (tmp_path / "wheels").glob("wool_idle-*.whl")
        contents = zipfile.ZipFile(wheel)
        assert "wool_idle/proto/worker.proto" in contents.namelist()
        dist_info = f"{wheel.name.split('-py3')[0]}.dist-info"
        metadata = contents.read(f"{dist_info}/METADATA").decode()
        assert "# wool-idle" in metadata  # the README, as the long description
        assert f"{dist_info}/licenses/LICENSE" in contents.namelist()

    def test_user_is_the_manifests_user(self, manifests: list[dict[str, Any]]) -> None:
        """Given the Containerfile's USER and every pod's securityContext, then they
        name the same unprivileged user and group."""
        # Arrange
        (user,) = instructions("USER")
        # Act
        declared = {
            f"{m['spec']['template']['spec']['securityContext']['runAsUser']}:"
            f"{m['spec']['template']['spec']['securityContext']['runAsGroup']}"
            for m in manifests
            if m["kind"] in ("Deployment", "Job")
        }
        # Assert
        assert declared == {user[0]}
        assert not user[0].startswith("0:")
