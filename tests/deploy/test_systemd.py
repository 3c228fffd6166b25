"""The systemd units in deploy/systemd: ``systemd-analyze verify`` says nothing at all
about them (pointed at the venv's real ``wool-idle``), they are hardened, a retired
worker (exit 0) stays stopped, ExecReload exists exactly where SIGHUP reloads something,
and the example configuration is what the CLI accepts."""

from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import bcrypt
import pytest
from support.metrics import fetch, samples
from support.processes import run_cli, spawn_cli
from support.waiting import eventually
from support.worker_shutdown import worker_shutdown_at_most

from wool_idle.autoscaler.actuator import STOP_REPLY_WAIT, ActionSettings
from wool_idle.autoscaler.daemon import exit_wait
from wool_idle.cli.values import DURATION
from wool_idle.worker.server import CLOSE_GRACE

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
CONFIG = UNITS / "etc" / "wool-idle"
SHIPPED_BINARY = "/usr/local/bin/wool-idle"
WORKER = "wool-idle-worker@.service"
EXPORTER = "wool-idle-exporter.service"
AUTOSCALER = "wool-idle-autoscaler.service"
INSTANCE = "50051"
DROP_IN = "local-wool-discovery.conf"
UNIX_DROP_IN = "unix-socket-worker.conf"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
ParseEnvironment = Callable[[str, dict[str, str]], argparse.Namespace]  # conftest fixture


def directives(path: Path) -> dict[str, list[str]]:
    """The ``Key=value`` lines of a unit file, every value of a key in order."""
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def environment_file(path: Path) -> dict[str, str]:
    """An EnvironmentFile= as systemd reads these (``NAME=value``, ``#`` comments)."""
    lines = path.read_text().splitlines()
    pairs = [line.partition("=") for line in lines if line.strip() and not line.startswith("#")]
    return {name: value for name, _, value in pairs}


def wool_idle_binary() -> str:
    """The venv's real ``wool-idle`` executable."""
    binary = Path(sys.executable).parent / "wool-idle"
    assert os.access(binary, os.X_OK), f"{binary} missing: make .venv/.installed"
    return str(binary)


def render_units(directory: Path, *, drop_in: bool = False) -> list[str]:
    """Copy the units into ``directory`` with ExecStart pointing at the venv's
    ``wool-idle`` (systemd-analyze verify needs it to exist), the worker as instance
    50051 and, with ``drop_in``, the drop-ins: local-wool under the exporter, the Unix
    socket under the worker; return the unit names to verify."""
    for name in (WORKER, EXPORTER, AUTOSCALER):
        text = (UNITS / name).read_text()
        assert f"ExecStart={SHIPPED_BINARY} " in text, name
        (directory / name).write_text(text.replace(SHIPPED_BINARY, wool_idle_binary()))
    (directory / WORKER.replace("@", f"@{INSTANCE}")).symlink_to(WORKER)
    if drop_in:
        (directory / f"{EXPORTER}.d").mkdir()
        shutil.copy(UNITS / DROP_IN, directory / f"{EXPORTER}.d" / DROP_IN)
        (directory / f"{WORKER}.d").mkdir()
        shutil.copy(UNITS / UNIX_DROP_IN, directory / f"{WORKER}.d" / UNIX_DROP_IN)
    return [f"./{WORKER.replace('@', f'@{INSTANCE}')}", f"./{EXPORTER}", f"./{AUTOSCALER}"]


def verify(systemd_analyze: str, directory: Path, units: list[str]) -> str:
    """``systemd-analyze verify`` of ``units``: its exit status and every line it wrote."""
    result = subprocess.run(
        [systemd_analyze, "verify", *units],
        capture_output=True,
        text=True,
        cwd=directory,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return f"rc={result.returncode}\n{result.stdout}{result.stderr}"


class TestUnits:
    @pytest.mark.parametrize("drop_in", [False, True], ids=["units", "with-drop-ins"])
    def test_verify_says_nothing(self, tmp_path: Path, systemd_analyze: str, drop_in: bool) -> None:
        """Given the three units (and the drop-ins: local-wool under the exporter, the
        Unix socket under the worker), when
        systemd-analyze verifies them, then it exits 0 and prints nothing at all (it
        only warns, with exit 0, about an unknown key or a bad value)."""
        # Arrange
        units = render_units(tmp_path, drop_in=drop_in)
        # Act
        said = verify(systemd_analyze, tmp_path, units)
        # Assert
        assert said == "rc=0\n", said

    def test_verify_reports_a_typo(self, tmp_path: Path, systemd_analyze: str) -> None:
        """Given the exporter unit with a misspelt key, when it is verified, then the
        verification says so (the check above can fail)."""
        # Arrange
        units = render_units(tmp_path)
        unit = tmp_path / EXPORTER
        unit.write_text(unit.read_text().replace("ProtectSystem=", "ProtectSystm="))
        # Act
        said = verify(systemd_analyze, tmp_path, units)
        # Assert
        assert "ProtectSystm" in said

    @pytest.mark.parametrize("unit", [WORKER, EXPORTER, AUTOSCALER])
    def test_security_exposure_is_low(
        self, tmp_path: Path, systemd_analyze: str, unit: str
    ) -> None:
        """Given a unit, when systemd-analyze scores its sandboxing offline, then the
        overall exposure is at most 2.0 (of 10; "OK")."""
        # Arrange
        render_units(tmp_path)
        # Act
        result = subprocess.run(
            [systemd_analyze, "security", "--offline=true", "--threshold=20", f"./{unit}"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        # Assert
        assert result.returncode == 0, result.stdout[-400:] + result.stderr

    @pytest.mark.parametrize("unit", [WORKER, EXPORTER, AUTOSCALER])
    def test_unit_hardened_and_restarts_only_on_failure(self, unit: str) -> None:
        """Given a unit, then it runs as the wool-idle account (never root) with a
        read-only system, no home, a private /tmp and no new privileges; it restarts
        only on failure (a retired worker's exit 0 leaves it stopped) and never after
        exit 2 (a bad configuration); its configuration is a required env file."""
        # Act
        found = directives(UNITS / unit)
        # Assert
        assert found["User"] == ["wool-idle"] and found["Group"] == ["wool-idle"]
        for key, value in {
            "ProtectSystem": "strict",
            "ProtectHome": "yes",
            "PrivateTmp": "yes",
            "NoNewPrivileges": "yes",
            "Restart": "on-failure",
            "RestartPreventExitStatus": "2",
        }.items():
            assert found[key] == [value], key
        assert len(found["EnvironmentFile"]) == 1
        assert found["EnvironmentFile"][0].startswith("/etc/wool-idle/")

    @pytest.mark.parametrize("unit", [WORKER, EXPORTER, AUTOSCALER])
    def test_unit_restarts_a_daemon_an_early_sighup_ended(self, unit: str) -> None:
        """Given a unit, then a death by SIGHUP forces a restart: a daemon ignores
        SIGHUP only once its flags are parsed, so one sent before (`systemctl reload`
        right after the start, logrotate) ends it, and Restart=on-failure alone counts
        SIGHUP among the clean exits: the unit would stay dead, a worker as if retired."""
        # Act
        forced = " ".join(directives(UNITS / unit).get("RestartForceExitStatus", [])).split()
        # Assert
        assert "SIGHUP" in forced

    def test_worker_timeout_stop_outlasts_its_drain(self) -> None:
        """Given the worker unit and its example configuration, then systemd waits
        longer on stop than the worker's whole shutdown on SIGTERM takes (grace, the
        wait for cancelled tasks, the server's close grace, the clean-up time), so a
        stop never kills tasks that were promised their grace."""
        # Arrange
        grace = environment_file(CONFIG / f"worker-{INSTANCE}.env")["WOOL_IDLE_GRACE"]
        # Act
        timeout = directives(UNITS / WORKER)["TimeoutStopSec"][0]
        # Assert
        assert DURATION.parse(timeout) > worker_shutdown_at_most(DURATION.parse(grace))

    def test_worker_stop_signals_the_worker_alone(self) -> None:
        """Given the worker unit, then `systemctl stop` sends SIGTERM to the worker
        process only (KillMode=mixed): the default sends it to every process of the
        unit, so a task's own subprocess or process pool would die at once instead of
        finishing within the grace the worker drains its tasks for."""
        # Act
        found = directives(UNITS / WORKER)
        # Assert
        assert found.get("KillMode") == ["mixed"]

    def test_autoscaler_timeout_stop_outlasts_its_shutdown(self) -> None:
        """Given the autoscaler unit and its environment file, then systemd waits on
        stop longer than the autoscaler's shutdown can take (the stops under way at the
        default rpc timeout, the wait for a stop's reply, the wait for stops still going
        on at the file's grace, the HTTP server's close), so no stop call is cut short."""
        timeout = directives(UNITS / "wool-idle-autoscaler.service")["TimeoutStopSec"][0]
        grace = DURATION.parse(environment_file(CONFIG / "autoscaler.env")["WOOL_IDLE_GRACE"])
        least = ActionSettings().rpc_timeout + STOP_REPLY_WAIT + exit_wait(grace) + CLOSE_GRACE
        assert DURATION.parse(timeout) > least

    def test_autoscaler_state_file_is_in_its_state_directory(self) -> None:
        """Given the autoscaler unit and its environment file, then the state file is
        in the unit's StateDirectory (the one directory it may write under
        ProtectSystem=strict, kept across restarts)."""
        # Arrange
        found = directives(UNITS / AUTOSCALER)
        state_file = environment_file(CONFIG / "autoscaler.env")["WOOL_IDLE_STATE_FILE"]
        # Act
        directory = PurePosixPath("/var/lib") / found["StateDirectory"][0]
        # Assert
        assert PurePosixPath(state_file).parent == directory

    def test_unix_socket_worker_listens_in_its_runtime_directory(
        self, parse_environment: ParseEnvironment
    ) -> None:
        """Given the worker unit with the Unix-socket drop-in, then the worker (instance
        50051) listens on a socket the CLI accepts, inside the instance's own
        RuntimeDirectory (the one place ProtectSystem=strict lets it create one)."""
        # Arrange
        found = directives(UNITS / UNIX_DROP_IN)
        listen = dict(line.partition("=")[::2] for line in found["Environment"])
        expanded = listen["WOOL_IDLE_LISTEN"].replace("%i", INSTANCE)  # as systemd does
        runtime = PurePosixPath("/run") / found["RuntimeDirectory"][0].replace("%i", INSTANCE)
        # Act
        args = parse_environment("worker", {"WOOL_IDLE_LISTEN": expanded})
        socket = PurePosixPath(args.listen.removeprefix("unix:"))
        # Assert
        assert args.listen.startswith("unix:/")
        assert socket.parent == runtime

    def test_sysusers_creates_the_account(self, tmp_path: Path, systemd_sysusers: str) -> None:
        """Given the sysusers.d file, when systemd-sysusers applies it to an empty root,
        then it creates the system account the units run as, with no login shell, and
        reports nothing but that."""
        # Arrange
        (tmp_path / "etc").mkdir()
        # Act
        result = subprocess.run(
            [systemd_sysusers, f"--root={tmp_path}", "-"],
            input=(UNITS / "wool-idle.sysusers.conf").read_text(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        # Assert
        assert result.returncode == 0, result.stderr
        assert all(line.startswith("Creating ") for line in result.stderr.splitlines())
        accounts = {
            line.split(":")[0]: line.split(":")
            for line in (tmp_path / "etc" / "passwd").read_text().splitlines()
        }
        assert accounts["wool-idle"][-1] == "/usr/sbin/nologin"
        assert 0 < int(accounts["wool-idle"][2]) < 1000


class TestConfiguration:
    @pytest.mark.parametrize(
        ("subcommand", "unit", "env_file", "listen"),
        [
            ("worker", WORKER, f"worker-{INSTANCE}.env", f"127.0.0.1:{INSTANCE}"),
            ("exporter", EXPORTER, "exporter.env", "127.0.0.1:9478"),
            ("autoscaler", AUTOSCALER, "autoscaler.env", "127.0.0.1:9479"),
        ],
    )
    def test_example_environment_is_valid_configuration(
        self,
        parse_environment: ParseEnvironment,
        subcommand: str,
        unit: str,
        env_file: str,
        listen: str,
    ) -> None:
        """Given a unit's Environment= defaults (instance 50051) overridden by its
        example env file, as systemd combines them, when the CLI parses them, then every
        variable is one the subcommand reads, the whole is accepted (no exit 2), and it
        listens where the docs say; the unit reads that env file."""
        # Arrange
        found = directives(UNITS / unit)
        defaults = dict(line.partition("=")[::2] for line in found.get("Environment", []))
        combined = {name: value.replace("%i", INSTANCE) for name, value in defaults.items()}
        combined |= environment_file(CONFIG / env_file)
        # Act
        args = parse_environment(subcommand, combined)
        # Assert
        assert (getattr(args, "web_listen_address", None) or args.listen) == listen
        assert found["EnvironmentFile"] == ["/etc/wool-idle/" + env_file.replace(INSTANCE, "%i")]

    @pytest.mark.parametrize("drop_in", [False, True], ids=["unit", "with-local-wool-drop-in"])
    @pytest.mark.parametrize("unit", [EXPORTER, AUTOSCALER])
    def test_unit_identity_reads_the_installed_configuration(
        self, unit: str, drop_in: bool
    ) -> None:
        """Given how docs/deploy.md installs /etc/wool-idle (mode 640, one group) and a
        daemon's unit, alone or with the local-wool drop-in (which runs it as the wool
        pool's user), then the group of the files is the unit's group or one of its
        supplementary groups: otherwise the daemon cannot read its targets file, web
        config or TLS files (EnvironmentFile= alone is read by systemd, as root)."""
        # Arrange
        install = re.search(
            r"install -m (\d+) -g (\S+) deploy/systemd/etc/wool-idle/\*", DEPLOY_DOC.read_text()
        )
        assert install is not None
        mode, group = install.groups()
        assert int(mode, 8) & 0o004 == 0  # not world-readable: the group must match
        found = directives(UNITS / unit)
        if drop_in:
            found |= directives(UNITS / DROP_IN)
        # Act
        groups = {*found["Group"], *" ".join(found.get("SupplementaryGroups", [])).split()}
        # Assert
        assert group in groups, f"{unit} runs with groups {sorted(groups)}"

    def test_example_targets_file_names_workers(self) -> None:
        """Given the example exporter configuration, then it points at the example
        targets file's installed path."""
        env = environment_file(CONFIG / "exporter.env")
        assert env["WOOL_IDLE_TARGETS_FILE"] == "/etc/wool-idle/targets.yml"
        assert (CONFIG / "targets.yml").is_file()


def _ready(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line, process.stderr.read() if process.stderr else "no ready line"
    return line


class TestReload:
    def test_exporter_sighup_rereads_targets(self, tmp_path: Path) -> None:
        """Given a running exporter whose targets file changed (and that would not look
        again for an hour), when it gets SIGHUP (the unit's ExecReload), then it serves
        the new targets and keeps running."""
        # Arrange
        assert directives(UNITS / EXPORTER)["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
        targets = tmp_path / "targets.yml"
        targets.write_text("- targets: ['127.0.0.1:1']\n")
        process = spawn_cli(
            ["exporter", "--listen", "127.0.0.1:0", "--targets-file", str(targets),
             "--targets-refresh", "1h", "--timeout", "1s"]
        )  # fmt: skip
        try:
            url = _ready(process)
            targets.write_text("- targets: ['127.0.0.1:1', '127.0.0.1:2']\n")
            # Act
            process.send_signal(signal.SIGHUP)
            count = None
            deadline = time.monotonic() + 60
            while count != 2 and time.monotonic() < deadline:
                count = samples(fetch(url)).get(("wool_exporter_targets", frozenset()))
            # Assert
            assert count == 2
            assert process.poll() is None
        finally:
            process.terminate()
            process.wait(timeout=30)

    def test_worker_sighup_is_ignored_without_exec_reload(self) -> None:
        """Given a running worker (nothing to reload: its TLS files are re-read by
        themselves), when it gets SIGHUP (logrotate, a closed terminal), then it logs
        that it ignores it and keeps serving, and SIGTERM still ends it cleanly (exit 0).
        Its unit has no ExecReload, so `systemctl reload` refuses rather than pretending
        to reload."""
        # Arrange
        assert "ExecReload" not in directives(UNITS / WORKER)
        process = spawn_cli(["worker", "--listen", "127.0.0.1:0"])
        try:
            address = _ready(process)
            assert process.stderr is not None
            # Act
            process.send_signal(signal.SIGHUP)
            logged = any("SIGHUP ignored, nothing to reload" in line for line in process.stderr)
            serving = run_cli(["idle", address]).returncode == 0
            process.terminate()
            status = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        # Assert
        assert (logged, serving, status) == (True, True, 0)

    @pytest.mark.parametrize(
        ("unit", "args"),
        [
            (AUTOSCALER, ["autoscaler", "--max-idle", "1h", "--interval", "1h",
                          "--metrics-url", "http://127.0.0.1:9/metrics", "--dry-run"]),
            (EXPORTER, ["exporter", "--target", "127.0.0.1:9"]),
        ],
        ids=["autoscaler", "exporter"],
    )  # fmt: skip
    def test_sighup_rereads_the_web_config(
        self, tmp_path: Path, unit: str, args: list[str]
    ) -> None:
        """Given a running autoscaler or exporter whose web config gains user bob, when
        it gets SIGHUP (the unit's ExecReload), then it logs that it read every followed
        file again, bob is let in, and it keeps serving."""
        # Arrange
        assert directives(UNITS / unit)["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
        web = tmp_path / "web.yml"
        web.write_text(basic_auth_users("alice"))
        process = spawn_cli([*args, "--listen", "127.0.0.1:0", "--web.config.file", str(web)])
        lines: list[str] = []
        try:
            url = _ready(process)
            threading.Thread(target=collect, args=(process, lines), daemon=True).start()
            web.write_text(basic_auth_users("alice", "bob"))
            # Act
            process.send_signal(signal.SIGHUP)
            reloaded = eventually(
                lambda: any("every followed file read again" in line for line in lines), 60
            )
            request = urllib.request.Request(url.replace("/metrics", "/-/healthy"))
            request.add_header("Authorization", "Basic " + base64.b64encode(b"bob:b").decode())
            with urllib.request.urlopen(request, timeout=10) as answer:
                status = answer.status
            # Assert
            assert (reloaded, status, process.poll()) == (True, 200, None)
        finally:
            process.terminate()
            process.wait(timeout=60)


def collect(process: subprocess.Popen[str], lines: list[str]) -> None:
    """Append each line ``process`` writes to stderr to ``lines``, until it closes."""
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line)


def basic_auth_users(*users: str) -> str:
    """A web config letting ``users`` in, each with the password of its initial."""
    hashes = (bcrypt.hashpw(user[0].encode(), bcrypt.gensalt(rounds=4)).decode() for user in users)
    entries = "".join(f"  {user}: '{hashed}'\n" for user, hashed in zip(users, hashes, strict=True))
    return f"basic_auth_users:\n{entries}"
