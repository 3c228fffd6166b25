"""Every flag of every subcommand, given a bad value: exit 2, one line, the flag named.

The table is checked for completeness against the parsers themselves, so a new
flag without a bad-input case fails here.
"""

from __future__ import annotations

import argparse

import pytest

from wool_idle.cli import build_parser, main

MISSING = "/nonexistent/file.pem"
A = ["127.0.0.1:1"]  # a well-formed worker address for commands that need one
SCALE = ["autoscaler", "--max-idle", "1m"]

BAD_INPUT: list[tuple[list[str], str]] = [
    # worker
    (["worker", "--listen", "localhost"], "--listen"),
    (["worker", "--listen", "localhost:-1"], "--listen"),
    (["worker", "--listen", "unix:"], "--listen"),
    (["worker", "--tls-cert", MISSING, "--tls-key", MISSING], "--tls-cert"),
    (["worker", "--tls-key", MISSING], "--tls-key"),
    (
        [
            "worker",
            "--tls-cert",
            "/etc/hostname",
            "--tls-key",
            "/etc/hostname",
            "--tls-client-ca",
            MISSING,
        ],
        "--tls-client-ca",
    ),
    (["worker", "--grace", "1x"], "--grace"),
    (["worker", "--grace", "-1"], "--grace"),
    (["worker", "--max-in-flight", "-1"], "--max-in-flight"),
    (["worker", "--max-in-flight", "many"], "--max-in-flight"),
    (["worker", "--allow-stop", "autoscaler"], "--allow-stop"),
    (["worker", "--allow-dispatch", "caller"], "--allow-dispatch"),
    (["worker", "--log-format", "xml"], "--log-format"),
    (["worker", "--log-level", "loud"], "--log-level"),
    # idle
    (["idle", "nohost"], "target"),
    (["idle", "host:0"], "target"),
    (["idle", "host:70000"], "target"),
    (["idle", *A, "--timeout", "0"], "--timeout"),
    (["idle", *A, "--timeout", "soon"], "--timeout"),
    (["idle", *A, "--tls-ca", MISSING], "--tls-ca"),
    (["idle", *A, "--tls-cert", MISSING, "--tls-key", MISSING], "--tls-cert"),
    (["idle", *A, "--tls-key", "/etc/hostname"], "--tls-key"),
    # stop
    (["stop", "a b:1"], "target"),
    (["stop", *A, "--grace", "-5"], "--grace"),
    (["stop", *A, "--grace", "abc"], "--grace"),
    (["stop", *A, "--if-idle-for", "nan"], "--if-idle-for"),
    (["stop", *A, "--if-idle-for", "-1s"], "--if-idle-for"),
    (["stop", *A, "--timeout", "0s"], "--timeout"),
    (["stop", *A, "--tls-ca", MISSING], "--tls-ca"),
    (["stop", *A, "--tls-cert", MISSING, "--tls-key", MISSING], "--tls-cert"),
    (["stop", *A, "--tls-key", MISSING], "--tls-key"),
    # exporter
    (["exporter", "--listen", "nowhere"], "--listen"),
    (["exporter", "--target", "host"], "--target"),
    (["exporter", "--target", "host:0"], "--target"),
    (["exporter", "--targets-refresh", "0s"], "--targets-refresh"),
    (["exporter", "--timeout", "0"], "--timeout"),
    (["exporter", "--timeout", "fast"], "--timeout"),
    (["exporter", "--timeout-offset", "-1"], "--timeout-offset"),
    (["exporter", "--concurrency", "0"], "--concurrency"),
    (["exporter", "--concurrency", "lots"], "--concurrency"),
    (["exporter", "--tls-ca", MISSING], "--tls-ca"),
    (["exporter", "--tls-cert", "/etc/hostname"], "--tls-cert"),
    (["exporter", "--tls-key", "/etc/hostname"], "--tls-key"),
    (["exporter", "--web.config.file", MISSING], "--web.config.file"),
    (["exporter", "--web.config.check"], "--web.config.check"),
    (["exporter", "--log-format", "xml"], "--log-format"),
    (["exporter", "--log-level", "loud"], "--log-level"),
    # autoscaler
    (["autoscaler"], "--max-idle"),
    (["autoscaler", "--max-idle", "0"], "--max-idle"),
    (["autoscaler", "--max-idle", "-5m"], "--max-idle"),
    (["autoscaler", "--max-idle", "soon"], "--max-idle"),
    ([*SCALE, "--metrics-url", "ftp://x/metrics"], "--metrics-url"),
    ([*SCALE, "--metrics-url", "not a url"], "--metrics-url"),
    ([*SCALE, "--prometheus-url", "http://:9090"], "--prometheus-url"),
    ([*SCALE, "--prometheus-url", "http://h:99999"], "--prometheus-url"),
    ([*SCALE, "--metrics-url", "http://h/m", "--prometheus-url", "http://h"], "--prometheus-url"),
    ([*SCALE, "--selector", "pool"], "--selector"),
    ([*SCALE, "--selector", "__name__=x"], "--selector"),
    ([*SCALE, "--alert", "WoolWorkerIdle"], "--alert"),
    ([*SCALE, "--wait-count", "0"], "--wait-count"),
    ([*SCALE, "--min-workers", "-1"], "--min-workers"),
    ([*SCALE, "--min-workers", "two"], "--min-workers"),
    ([*SCALE, "--max-stops-per-cycle", "0"], "--max-stops-per-cycle"),
    ([*SCALE, "--cooldown", "-1s"], "--cooldown"),
    ([*SCALE, "--max-staleness", "0"], "--max-staleness"),
    ([*SCALE, "--grace", "-1"], "--grace"),
    ([*SCALE, "--interval", "0"], "--interval"),
    ([*SCALE, "--source-timeout", "x"], "--source-timeout"),
    ([*SCALE, "--rpc-timeout", "0ms"], "--rpc-timeout"),
    ([*SCALE, "--listen", "nowhere"], "--listen"),
    ([*SCALE, "--tls-ca", MISSING], "--tls-ca"),
    ([*SCALE, "--tls-cert", MISSING, "--tls-key", MISSING], "--tls-cert"),
    ([*SCALE, "--tls-key", MISSING], "--tls-key"),
    ([*SCALE, "--web.config.file", MISSING], "--web.config.file"),
    ([*SCALE, "--web.config.check"], "--web.config.check"),
    ([*SCALE, "--log-format", "yaml"], "--log-format"),
    ([*SCALE, "--log-level", "loud"], "--log-level"),
    # demo
    (["demo", "--workers", "1"], "--workers"),
    (["demo", "--busy", "0"], "--busy"),
    (["demo", "--workers", "3", "--busy", "3"], "--busy"),
    (["demo", "--max-idle", "0"], "--max-idle"),
    (["demo", "--duration", "-1"], "--duration"),
    (["demo", "--refresh", "0"], "--refresh"),
]

NO_BAD_VALUE = {
    # flags that take no value, or any text, so no value of theirs is malformed
    ("autoscaler", "--dry-run"),
    ("autoscaler", "--once"),
    ("exporter", "--targets-file"),  # missing/malformed files keep the last good set
    *((command, "--tls-server-name") for command in ("idle", "stop", "exporter", "autoscaler")),
}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


BAD_ENVIRONMENT = [
    ("WOOL_IDLE_TIMEOUT", "-3", ["idle", *A], "--timeout"),
    ("WOOL_IDLE_LOG_FORMAT", "xml", ["exporter"], "--log-format"),
    ("WOOL_IDLE_LOG_LEVEL", "loud", ["worker"], "--log-level"),
    ("WOOL_IDLE_TARGET", "good:1,bad", ["exporter"], "--target"),
    ("WOOL_IDLE_MAX_IDLE", "banana", ["autoscaler", "--once"], "--max-idle"),
    ("WOOL_IDLE_SELECTOR", "pool", [*SCALE], "--selector"),
]


class TestBadFlags:
    @pytest.mark.parametrize(("args", "flag"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
    def test_bad_value_exits_2_naming_flag(self, args: list[str], flag: str, capsys) -> None:
        """Given a bad value for a flag, when the command parses it, then it exits 2
        with one line on stderr that names the flag, before doing anything."""
        # Act
        with pytest.raises(SystemExit) as exited:
            main(args)
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert len(err.strip().splitlines()) == 1, err
        assert flag in err

    @pytest.mark.parametrize(
        ("variable", "value", "args", "flag"), BAD_ENVIRONMENT, ids=[v for v, *_ in BAD_ENVIRONMENT]
    )
    def test_bad_environment_value_exits_2_naming_flag(
        self, variable: str, value: str, args: list[str], flag: str, capsys, monkeypatch
    ) -> None:
        """Given a bad value in a flag's environment variable, when the command parses,
        then it exits 2 with one line naming the flag."""
        # Arrange
        monkeypatch.setenv(variable, value)
        # Act
        with pytest.raises(SystemExit) as exited:
            main(args)
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert len(err.strip().splitlines()) == 1 and flag in err

    def test_table_covers_every_flag(self) -> None:
        """Given every subcommand's parser, then each of its flags has a bad-input case
        (or is declared as having no malformed value)."""
        covered = {(args[0], flag) for args, flag in BAD_INPUT}
        missing = []
        for name, parser in subcommands().items():
            for action in parser._actions:
                for option in action.option_strings:
                    flag = option.startswith("--") and option != "--help"
                    if flag and (name, option) not in covered | NO_BAD_VALUE:
                        missing.append((name, option))
        assert missing == []
