"""Real wool packages, in virtualenvs of their own (cached) or the tests' own; real workers."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from filelock import FileLock

import wool_idle

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "interop"
"""The scripts run by a wool virtualenv's Python."""
# Not a WOOL_IDLE_* name: wool-idle refuses those no subcommand reads.
CACHE = Path(os.environ.get("WOOLIDLE_INTEROP_CACHE", ROOT / ".cache" / "wool-venvs"))
WOOL_WITH_IDLE = "0.15.7"
WOOL_BEFORE_IDLE = "0.13.1"


@dataclass(frozen=True)
class WoolEnv:
    version: str
    python: str


def wool_env(version: str, *, with_wool_idle: bool = False) -> WoolEnv:
    """A virtualenv with ``wool==version`` (and wool-idle), made once and cached; with
    wool-idle, the tests' own interpreter when it has that wool and this checkout's
    wool-idle (``make`` installs both: no second install of the same packages)."""
    if with_wool_idle and _running_python_has(version):
        return WoolEnv(version, sys.executable)
    name = f"wool-{version}" + ("-with-wool-idle" if with_wool_idle else "")
    directory = CACHE / name
    python = directory / "bin" / "python"
    stamp = directory / ".installed"
    # wool-idle's dependencies change with pyproject.toml: reinstall when it does.
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(CACHE / f"{name}.lock"):  # pytest-xdist's processes make it once
        if not stamp.exists() or (with_wool_idle and stamp.read_text() != wanted):
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(directory)], check=True)
            packages = [f"wool=={version}"] + (["-e", str(ROOT)] if with_wool_idle else [])
            subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", *packages],
                check=True,
                timeout=900,
            )
            stamp.write_text(wanted)
    return WoolEnv(version, str(python))


def _running_python_has(version: str) -> bool:
    """Whether the interpreter running the tests has ``wool==version`` and the
    wool-idle of this checkout."""
    try:
        wool_version = metadata.version("wool")
    except metadata.PackageNotFoundError:
        return False
    return wool_version == version and Path(wool_idle.__file__).resolve().is_relative_to(ROOT)


@dataclass
class WoolWorker:
    address: str
    pid: int
    launcher: subprocess.Popen[str]

    def exited(self) -> bool:
        return not Path(f"/proc/{self.pid}").exists() or _zombie(self.pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def start_wool_worker(env: WoolEnv) -> WoolWorker:
    launcher = subprocess.Popen(
        [env.python, str(SCRIPTS / "wool_launch.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert launcher.stdout is not None
    line = launcher.stdout.readline().split()
    assert len(line) == 2, "wool worker did not start"
    return WoolWorker(line[0], int(line[1]), launcher)
