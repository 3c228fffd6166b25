"""The web flags of the HTTP daemons: ``--web.config.file`` and its check, the listen address."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.processes import COMMAND
from support.tls import encrypt_key_file

from wool_idle.cli import build_parser, main

DAEMONS = [["exporter"], ["autoscaler", "--max-idle", "1m"]]


@pytest.mark.timeout(60)  # reading a FIFO or /dev/zero would hang or eat memory: fail
class TestWebConfig:
    @pytest.mark.parametrize("daemon", DAEMONS, ids=lambda d: d[0])
    @pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
    def test_web_config_special_file_exits_2_naming_flag(
        self, daemon: list[str], special: str, tmp_path: Path, capsys
    ) -> None:
        """Given --web.config.file naming a FIFO or /dev/zero, when the daemon checks
        its config, then it exits 2 at once with one line naming the flag and saying
        the file is not a regular file."""
        # Arrange
        path = str(tmp_path / "fifo") if special == "fifo" else special
        if special == "fifo":
            os.mkfifo(path)
        # Act
        with pytest.raises(SystemExit) as exited:
            main([*daemon, "--web.config.file", path, "--web.config.check"])
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert len(err.splitlines()) == 1
        assert "argument --web.config.file" in err and "not a regular file" in err

    @pytest.mark.parametrize("daemon", DAEMONS, ids=lambda d: d[0])
    def test_web_config_nested_too_deeply_exits_2_naming_flag(
        self, daemon: list[str], tmp_path: Path, capsys
    ) -> None:
        """Given --web.config.file nested deeper than YAML's parser recurses, when the
        daemon checks its config, then it exits 2 with one line naming the flag (not a
        RecursionError traceback)."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text("a: " + "[" * 50000 + "]" * 50000 + "\n")
        # Act
        with pytest.raises(SystemExit) as exited:
            main([*daemon, "--web.config.file", str(path), "--web.config.check"])
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert len(err.splitlines()) == 1
        assert "argument --web.config.file" in err and "nested too deeply" in err

    @pytest.mark.parametrize("daemon", DAEMONS, ids=lambda d: d[0])
    @pytest.mark.parametrize(
        ("cert_file", "reason"),
        [
            ("fifo", "a FIFO, not a regular file"),
            ('"a\\0b"', "NUL character in the path"),
            ('"\\ud800"', "the path is not valid Unicode"),
        ],
        ids=["fifo", "nul", "lone-surrogate"],
    )
    def test_web_config_certificate_file_refused_exits_2(
        self, daemon: list[str], cert_file: str, reason: str, tmp_path: Path, capsys
    ) -> None:
        """Given a web config naming a FIFO (OpenSSL would wait for a writer) or a path
        no file can have (a NUL, a lone surrogate) as its certificate, when the daemon
        checks its config, then it exits 2 at once with one line naming the flag and
        the reason."""
        # Arrange
        os.mkfifo(tmp_path / "fifo")
        path = tmp_path / "web.yml"
        path.write_text(f"tls_server_config: {{cert_file: {cert_file}, key_file: fifo}}\n")
        # Act
        with pytest.raises(SystemExit) as exited:
            main([*daemon, "--web.config.file", str(path), "--web.config.check"])
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert len(err.splitlines()) == 1
        assert "argument --web.config.file" in err and reason in err

    @pytest.mark.parametrize("daemon", DAEMONS, ids=lambda d: d[0])
    def test_web_config_encrypted_key_exits_2_without_asking_for_a_password(
        self, daemon: list[str], tls_material, tmp_path: Path
    ) -> None:
        """Given a web config whose key is encrypted, and the daemon's standard input
        an open pipe (a supervisor's, `docker run -i`), when the daemon checks its
        config, then it exits 2 naming the key file, rather than asking for the
        password there and waiting."""
        # Arrange
        key = tmp_path / "server.key"
        shutil.copy(tls_material.server.key, key)
        encrypt_key_file(str(key))
        path = tmp_path / "web.yml"
        path.write_text(
            f"tls_server_config: {{cert_file: {tls_material.server.cert}, key_file: {key}}}\n"
        )
        command = [*COMMAND, *daemon, "--web.config.file", str(path), "--web.config.check"]
        # Act
        with subprocess.Popen(
            command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as checking:
            try:
                _, err = checking.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                checking.kill()
                _, err = checking.communicate()
        # Assert
        assert checking.returncode == 2, err
        assert "not valid PEM, or encrypted" in err and str(key) in err
        assert "pass phrase" not in err

    def test_web_config_check_needs_no_max_idle(self, tmp_path: Path, capsys) -> None:
        """Given a valid web config, when the autoscaler checks it without --max-idle
        (which only the run needs), then it prints OK and exits 0; without the check,
        leaving --max-idle out still exits 2 naming it."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text("http_server_config: {headers: {X-Frame-Options: deny}}\n")
        # Act
        with pytest.raises(SystemExit) as checked:
            main(["autoscaler", "--web.config.file", str(path), "--web.config.check"])
        out = capsys.readouterr().out
        with pytest.raises(SystemExit) as run:
            main(["autoscaler", "--web.config.file", str(path)])
        err = capsys.readouterr().err
        # Assert
        assert (checked.value.code, out) == (0, f"{path}: OK\n")
        assert run.value.code == 2
        assert "the following arguments are required: --max-idle" in err


class TestWebListenAddress:
    @pytest.mark.parametrize("daemon", DAEMONS, ids=lambda d: d[0])
    @pytest.mark.parametrize("host", ["unix-abstract", "vsock"])
    def test_web_listen_address_host_named_like_a_grpc_scheme(
        self, daemon: list[str], host: str
    ) -> None:
        """Given --web.listen-address on a host named like a scheme a gRPC server reads,
        when the daemon's flags are parsed, then it is taken as that host (aiohttp reads
        no scheme; it was refused, exit 2, as if gRPC would serve the endpoints), while
        a worker's --listen still refuses it."""
        # Act
        args = build_parser().parse_args([*daemon, "--web.listen-address", f"{host}:9100"])
        # Assert
        assert args.web_listen_address == f"{host}:9100"
        with pytest.raises(SystemExit):
            build_parser().parse_args(["worker", "--listen", f"{host}:9100"])
