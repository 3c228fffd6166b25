"""deploy/Containerfile, checked as far as this machine allows (it has no container
engine): the sources it copies are enough to build the package, it runs as the
user the Kubernetes manifests declare, and its ENTRYPOINT, run as PID 1 of a PID
namespace of its own (as a container runtime runs it), ends on SIGTERM."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, Final

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"


EXIT_WAIT = 30.0
"""Seconds a container that was sent SIGTERM gets to end before the test gives up."""
HOLD_START = """\
import os, pathlib, time
gate = pathlib.Path(os.environ["HOLD_START_GATE"])
gate.with_suffix(".started").touch()
while not gate.exists():
    time.sleep(0.01)
"""
"""A ``sitecustomize`` that holds the interpreter in its start (no handler of ours
installed yet) until the test creates the gate file, and says it got there."""


def instructions(name: str) -> list[list[str]]:
    """The arguments of every ``NAME`` instruction of the Containerfile."""
    return [
        shlex.split(line)[1:]
        for line in CONTAINERFILE.read_text().splitlines()
        if line.startswith(f"{name} ")
    ]


def entrypoint_here() -> list[str]:
    """The ENTRYPOINT's command line on this machine: ``wool-idle`` is this
    interpreter's ``-m wool_idle`` (the console script runs the same ``run``), every
    other program the one installed here (a missing one fails the test)."""
    (line,) = [
        raw.removeprefix("ENTRYPOINT ")
        for raw in CONTAINERFILE.read_text().splitlines()
        if raw.startswith("ENTRYPOINT ")
    ]
    command: list[str] = []
    for word in json.loads(line):
        if word == "wool-idle":
            command += [sys.executable, "-m", "wool_idle"]
        elif word.startswith("-"):
            command.append(word)
        else:
            found = shutil.which(os.path.basename(word))
            if found is None:
                pytest.fail(f"{word} is not installed: scripts/ensure-prometheus", pytrace=False)
            command.append(found)
    return command


NEW_PID_NAMESPACE: Final = ("--user", "--map-root-user", "--pid", "--fork", "--mount-proc")
"""``unshare`` flags for a new PID namespace, as a container runtime makes one; the user
namespace lets a user who is not root make it too (the kernel treats the PID 1 of
any PID namespace alike)."""


def first_child(process: subprocess.Popen[bytes]) -> int:
    """The pid of the first child of ``process`` (waits until it has one; fails if it
    exits first, as ``unshare`` does where it may not make namespaces)."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    while not (found := children.read_text().split()):
        assert process.poll() is None, f"{process.args[0]} exited {process.returncode}"
        time.sleep(0.01)
    return int(found[0])


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

    def test_entrypoint_as_pid_1_ends_on_sigterm_during_start(
        self, tmp_path: Path, unshare: str
    ) -> None:
        """Given the ENTRYPOINT running a worker as PID 1 of a new PID namespace (what a
        container runtime does), when SIGTERM comes while the process starts (a pod
        deleted or rolled right after it was created), then the container ends, with
        the status of a process SIGTERM ended. The kernel drops a signal sent to a PID
        1 that has no handler for it: Python as PID 1 never got it, served on, and
        ended only by SIGKILL once the pod's grace ran out (a worker losing the tasks
        it took meanwhile, an autoscaler the stops it was sending)."""
        # Arrange
        gate = tmp_path / "gate"
        (tmp_path / "sitecustomize.py").write_text(HOLD_START)
        path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
        command = [*entrypoint_here(), "worker", "--listen", "127.0.0.1:0"]
        runtime = subprocess.Popen(
            [unshare, *NEW_PID_NAMESPACE, *command],
            env={**os.environ, "PYTHONPATH": path, "HOLD_START_GATE": str(gate)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            pid_1 = first_child(runtime)
            while not gate.with_suffix(".started").exists():
                assert runtime.poll() is None, f"exited {runtime.returncode} before its start"
                time.sleep(0.01)
            # Act
            os.kill(pid_1, signal.SIGTERM)
            gate.touch()
            status = runtime.wait(timeout=EXIT_WAIT)
        finally:
            runtime.kill()  # unshare's child, PID 1, ends with it (and all in it)
            runtime.wait()
        # Assert
        assert status == 128 + signal.SIGTERM
