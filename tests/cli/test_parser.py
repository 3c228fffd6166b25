"""The command-line mechanism: environment per subcommand, aliases, defaults from the
settings dataclasses, grouped help, --version."""

from __future__ import annotations

import importlib.metadata

import pytest

import wool_idle
from wool_idle.autoscaler.daemon import ActionSettings
from wool_idle.autoscaler.policy import PolicySettings
from wool_idle.autoscaler.settings import DaemonSettings, SourceSettings
from wool_idle.cli import build_parser, main
from wool_idle.cli.parser import settings_from
from wool_idle.contract import DEFAULT_GRACE
from wool_idle.exporter.app import ExporterSettings
from wool_idle.exporter.settings import DaemonSettings as ExporterDaemonSettings
from wool_idle.logs import LogSettings
from wool_idle.web.site import AUTOSCALER_LISTEN, EXPORTER_LISTEN

SUBCOMMANDS = ["worker", "idle", "stop", "exporter", "autoscaler", "demo"]


def parse(args: list[str]):
    return build_parser().parse_args(args)


class TestEnvironmentPerSubcommand:
    def test_parse_args_ignores_variables_of_other_subcommands(self, monkeypatch) -> None:
        """Given a shared environment with a bad WOOL_IDLE_TARGET (an exporter flag),
        when `worker` is parsed, then it parses; when `exporter` is, it exits 2 naming
        the exporter and the variable."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_TARGET", "garbage")
        # Act
        worker = parse(["worker"])
        with pytest.raises(SystemExit) as exited:
            parse(["exporter"])
        # Assert
        assert worker.command == "worker"
        assert exited.value.code == 2

    def test_parse_args_error_names_the_subcommand_in_use(self, monkeypatch, capsys) -> None:
        """Given bad WOOL_IDLE_TIMEOUT, when `exporter` is parsed, then the error is
        the exporter's."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_TIMEOUT", "soon")
        # Act
        with pytest.raises(SystemExit):
            parse(["exporter"])
        # Assert
        assert capsys.readouterr().err.startswith(
            "wool-idle exporter: error: argument --timeout (from WOOL_IDLE_TIMEOUT)"
        )

    @pytest.mark.parametrize(
        "command",
        [
            ["idle", "127.0.0.1:1", "--timeout", "2s"],
            ["stop", "127.0.0.1:1", "--grace", "30s", "--timeout", "50s"],
        ],
    )
    def test_parse_args_client_commands_take_rpc_values_from_command_line_only(
        self, command: list[str], monkeypatch
    ) -> None:
        """Given an environment shared with a worker and the daemons (WOOL_IDLE_GRACE=0
        for a worker's fast restart, a short WOOL_IDLE_TIMEOUT for the exporter), when
        `idle` or `stop` is parsed with its RPC flags on the command line, then those
        are its values: neither variable is theirs (0 would cancel in-flight tasks)."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_GRACE", "0")
        monkeypatch.setenv("WOOL_IDLE_TIMEOUT", "1ms")
        # Act
        parsed = parse(command)
        # Assert
        if command[0] == "stop":
            assert (parsed.grace, parsed.timeout, parsed.if_idle_for) == (DEFAULT_GRACE, 50.0, None)
        else:
            assert parsed.timeout == 2.0

    @pytest.mark.parametrize(
        ("command", "variable", "flag"),
        [
            (["stop", "127.0.0.1:1"], "WOOL_IDLE_GRACE", "--grace"),
            (["stop", "127.0.0.1:1", "--grace", "30s"], "WOOL_IDLE_TIMEOUT", "--timeout"),
            (["idle", "127.0.0.1:1"], "WOOL_IDLE_TIMEOUT", "--timeout"),
        ],
    )
    def test_parse_args_client_command_refuses_variable_it_read_in_0_1_0(
        self, command: list[str], variable: str, flag: str, monkeypatch, capsys
    ) -> None:
        """Given a variable wool-idle 0.1.0's `idle` or `stop` read for a flag
        (`WOOL_IDLE_GRACE=forever wool-idle stop` drained without limit), and the
        flag not on the command line, when parsed, then it exits 2 naming the
        variable and the flag: taking the default instead would silently cancel
        in-flight tasks after 30 s."""
        # Arrange
        monkeypatch.setenv(variable, "forever" if flag == "--grace" else "60s")
        # Act
        with pytest.raises(SystemExit) as exited:
            parse(command)
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert variable in err
        assert f"give {flag} on the command line" in err

    def test_parse_args_list_with_blanks_after_commas(self, monkeypatch) -> None:
        """Given targets `a, b` (a blank after the comma) in the variable, when parsed,
        then both targets, stripped."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_TARGET", "127.0.0.1:1, 127.0.0.1:2")
        # Act
        parsed = parse(["exporter"])
        # Assert
        assert parsed.target == ["127.0.0.1:1", "127.0.0.1:2"]

    def test_parse_args_list_flag_repeated_and_comma_separated(self) -> None:
        """Given --target twice, once with a comma-separated list, then every target."""
        # Act
        parsed = parse(["exporter", "--target", "127.0.0.1:1, 127.0.0.1:2", "--target", "h:3"])
        # Assert
        assert parsed.target == ["127.0.0.1:1", "127.0.0.1:2", "h:3"]

    @pytest.mark.parametrize("source", ["environment", "command line"])
    def test_parse_args_blank_allow_list_refused_alike(
        self, source: str, monkeypatch, capsys
    ) -> None:
        """Given `--allow-stop " , "` in the variable or on the command line, when
        parsed, then both exit 2 at parsing naming --allow-stop (a blank list never
        means "anyone may stop")."""
        # Arrange
        args = ["worker"]
        if source == "environment":
            monkeypatch.setenv("WOOL_IDLE_ALLOW_STOP", " , ")
        else:
            args += ["--allow-stop", " , "]
        # Act
        with pytest.raises(SystemExit) as exited:
            parse(args)
        # Assert
        assert exited.value.code == 2
        assert "argument --allow-stop" in capsys.readouterr().err

    @pytest.mark.parametrize(("word", "expected"), [("TRUE", True), (" on ", True), ("0", False)])
    def test_parse_args_boolean_variable(self, word: str, expected: bool, monkeypatch) -> None:
        """Given WOOL_IDLE_DRY_RUN set to a word of the documented sets, then the switch
        follows it."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_DRY_RUN", word)
        # Act
        parsed = parse(["autoscaler", "--max-idle", "1m"])
        # Assert
        assert parsed.dry_run is expected

    @pytest.mark.parametrize("word", ['"true"', "enabled", ""])
    def test_parse_args_boolean_variable_outside_the_sets(self, word: str, monkeypatch) -> None:
        """Given WOOL_IDLE_DRY_RUN quoted as an env file would, or a synonym, or empty,
        when parsed, then exit 2 (it never falls back to real stops)."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_DRY_RUN", word)
        # Act
        with pytest.raises(SystemExit) as exited:
            parse(["autoscaler", "--max-idle", "1m"])
        # Assert
        assert exited.value.code == 2

    def test_parse_args_command_line_wins_over_environment(self, monkeypatch) -> None:
        """Given WOOL_IDLE_INTERVAL and --interval, then the flag's value."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_INTERVAL", "1m")
        # Act
        parsed = parse(["autoscaler", "--max-idle", "1m", "--interval", "5s"])
        # Assert
        assert parsed.interval == 5.0

    def test_parse_args_required_flag_from_environment(self, monkeypatch) -> None:
        """Given WOOL_IDLE_MAX_IDLE, when `autoscaler` is parsed without --max-idle,
        then the variable fills the required flag."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_MAX_IDLE", "10m")
        # Act
        parsed = parse(["autoscaler"])
        # Assert
        assert parsed.max_idle == 600.0

    def test_parse_args_exclusive_flags_across_sources(self, monkeypatch, capsys) -> None:
        """Given WOOL_IDLE_PROMETHEUS_URL and --metrics-url, then exit 2: one source only."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_PROMETHEUS_URL", "http://prometheus:9090")
        # Act
        with pytest.raises(SystemExit) as exited:
            parse(["autoscaler", "--max-idle", "1m", "--metrics-url", "http://e/metrics"])
        # Assert
        assert exited.value.code == 2
        assert "--prometheus-url: not allowed with argument --metrics-url" in (
            capsys.readouterr().err
        )


class TestUnknownFlags:
    @pytest.mark.parametrize(
        ("args", "line"),
        [
            (
                ["exporter", "--target-file", "t.yml"],
                "wool-idle exporter: error: unrecognized arguments: --target-file t.yml "
                "(did you mean --targets-file?)",
            ),
            (
                ["autoscaler", "--max-idle", "1m", "--metric-url=http://e/metrics"],
                "wool-idle autoscaler: error: unrecognized arguments: "
                "--metric-url=http://e/metrics (did you mean --metrics-url?)",
            ),
            (
                ["worker", "--bogus"],
                "wool-idle worker: error: unrecognized arguments: --bogus",
            ),
        ],
        ids=["close", "close_with_value", "nothing_close"],
    )
    def test_parse_args_unknown_flag_names_the_subcommand_and_likely_flag(
        self, args: list[str], line: str, capsys
    ) -> None:
        """Given a misspelt flag, when parsed, then exit 2 with one line from the
        subcommand in use (not the bare ``wool-idle``) naming the flag likely meant,
        as an unknown variable does; with nothing close, no guess."""
        # Act
        with pytest.raises(SystemExit) as exited:
            parse(args)
        # Assert
        assert exited.value.code == 2
        assert capsys.readouterr().err == line + "\n"


class TestAliases:
    @pytest.mark.parametrize("command", [["exporter"], ["autoscaler", "--max-idle", "1m"]])
    @pytest.mark.parametrize(
        ("old", "new", "value", "dest"),
        [
            ("--listen", "--web.listen-address", "127.0.0.1:0", "web_listen_address"),
            ("--log-level", "--log.level", "debug", "log_level"),
            ("--log-format", "--log.format", "json", "log_format"),
        ],
    )
    def test_parse_args_old_spelling_is_an_alias(
        self, command: list[str], old: str, new: str, value: str, dest: str
    ) -> None:
        """Given the old spelling of a renamed flag, then the same value as the new one."""
        # Act
        by_old = parse([*command, old, value])
        by_new = parse([*command, new, value])
        # Assert
        assert getattr(by_old, dest) == getattr(by_new, dest) == value

    @pytest.mark.parametrize(
        ("command", "default"),
        [(["exporter"], EXPORTER_LISTEN), (["autoscaler", "--max-idle", "1m"], AUTOSCALER_LISTEN)],
    )
    def test_parse_args_worker_listen_variable_is_not_the_web_address(
        self, command: list[str], default: str, monkeypatch
    ) -> None:
        """Given WOOL_IDLE_LISTEN (the worker's gRPC address, in an environment shared
        with it) and the daemon's own WOOL_IDLE_WEB_LISTEN_ADDRESS, when an HTTP daemon
        is parsed, then its web address is its own: the old alias variable does not
        feed --web.listen-address, so the daemon never binds the worker's socket."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_LISTEN", "unix:/run/wool/worker.sock")
        monkeypatch.setenv("WOOL_IDLE_WEB_LISTEN_ADDRESS", default)
        # Act
        parsed = parse(command)
        # Assert
        assert parsed.web_listen_address == default

    @pytest.mark.parametrize("command", [["exporter"], ["autoscaler", "--max-idle", "1m"]])
    def test_parse_args_worker_listen_variable_alone_refused_by_http_daemon(
        self, command: list[str], monkeypatch, capsys
    ) -> None:
        """Given WOOL_IDLE_LISTEN alone (wool-idle 0.1.0's exporter and autoscaler
        listened there: a unit written for it), when an HTTP daemon is parsed, then it
        exits 2 naming the variable and WOOL_IDLE_WEB_LISTEN_ADDRESS, never listening
        on its default address instead."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_LISTEN", "0.0.0.0:9500")
        # Act
        with pytest.raises(SystemExit) as exited:
            parse(command)
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert "WOOL_IDLE_LISTEN is set" in err
        assert "give --web.listen-address or WOOL_IDLE_WEB_LISTEN_ADDRESS" in err


class TestDefaults:
    def test_autoscaler_defaults_are_the_settings_defaults(self) -> None:
        """Given `autoscaler --max-idle 1m` and nothing else, when its settings are built
        from the flags, then they equal the dataclasses' own defaults."""
        # Act
        args = parse(["autoscaler", "--max-idle", "1m"])
        # Assert
        assert settings_from(args, PolicySettings) == PolicySettings(max_idle=60.0)
        assert settings_from(args, ActionSettings) == ActionSettings()
        assert settings_from(args, SourceSettings) == SourceSettings()
        assert settings_from(args, DaemonSettings) == DaemonSettings()
        assert settings_from(args, LogSettings) == LogSettings()

    def test_exporter_defaults_are_the_settings_defaults(self) -> None:
        """Given `exporter` alone, then its settings equal the dataclasses' defaults."""
        # Act
        args = parse(["exporter"])
        # Assert
        assert settings_from(args, ExporterSettings) == ExporterSettings()
        assert settings_from(args, ExporterDaemonSettings) == ExporterDaemonSettings()

    def test_max_staleness_fills_max_staleness(self) -> None:
        """Given --max-staleness, then PolicySettings.max_staleness (one name end to end)."""
        # Act
        args = parse(["autoscaler", "--max-idle", "1m", "--max-staleness", "90s"])
        # Assert
        assert settings_from(args, PolicySettings).max_staleness == 90.0


class TestHelp:
    @pytest.mark.parametrize(
        ("command", "sections", "defaults"),
        [
            (
                ["exporter"],
                ["targets:", "scrape:", "TLS to workers:", "web:", "logging:"],
                [
                    "(default: 5s)",
                    "(default: 500ms)",
                    "(default: 256)",
                    "(default: 127.0.0.1:9478)",
                ],
            ),
            (
                ["autoscaler"],
                ["source:", "policy:", "stop:", "TLS to workers:", "cycles:", "web:", "logging:"],
                ["(default: 30s)", "(default: 5m)", "(default: 1m)", "(default: 127.0.0.1:9479)"],
            ),
        ],
    )
    def test_help_grouped_with_defaults(
        self, command: list[str], sections: list[str], defaults: list[str], capsys
    ) -> None:
        """Given a daemon's --help, then its flags are grouped under titled sections,
        with DURATION placeholders and their defaults."""
        # Act
        with pytest.raises(SystemExit) as exited:
            main([*command, "--help"])
        # Assert
        out = capsys.readouterr().out
        assert exited.value.code == 0
        assert all(f"\n{section}\n" in out for section in sections), out
        words = " ".join(out.split())  # argparse wraps help text at the terminal's width
        assert all(default in words for default in defaults), out
        assert "--timeout DURATION" in out or "--interval DURATION" in out
        assert "--web.listen-address ADDRESS, --listen ADDRESS" in out


class TestVersion:
    @pytest.mark.parametrize("command", [[], *([c] for c in SUBCOMMANDS)])
    def test_version_on_every_command(self, command: list[str], capsys) -> None:
        """Given --version at the top level or on any subcommand, then it prints
        `wool-idle <version>` and exits 0."""
        # Act
        with pytest.raises(SystemExit) as exited:
            main([*command, "--version"])
        # Assert
        assert exited.value.code == 0
        assert capsys.readouterr().out == f"wool-idle {wool_idle.__version__}\n"

    def test_version_has_one_source(self) -> None:
        """Given the installed distribution, then its version is wool_idle.__version__
        (pyproject.toml reads it from there)."""
        assert importlib.metadata.version("wool-idle") == wool_idle.__version__
