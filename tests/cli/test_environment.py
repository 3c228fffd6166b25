"""``WOOL_IDLE_*`` variables no subcommand reads: exit 2 naming them."""

from __future__ import annotations

import pytest

from wool_idle.cli import main
from wool_idle.cli.environment import unread_variables

KNOWN = {"WOOL_IDLE_DRY_RUN", "WOOL_IDLE_LISTEN", "WOOL_IDLE_MAX_IDLE"}
COMMAND_LINE_ONLY = {"WOOL_IDLE_IF_IDLE_FOR": "--if-idle-for is read from the command line only"}
SCALE_ONCE = ["autoscaler", "--max-idle", "1s", "--min-workers", "0", "--once"]


class TestUnreadVariables:
    @pytest.mark.parametrize(
        ("name", "hint"),
        [
            ("WOOL_IDLE_DRYRUN", "(did you mean WOOL_IDLE_DRY_RUN?)"),
            ("wool_idle_dry_run", "(did you mean WOOL_IDLE_DRY_RUN? names are upper case)"),
            ("Wool_Idle_Max_Idle", "(did you mean WOOL_IDLE_MAX_IDLE? names are upper case)"),
            ("WOOL_IDLE_IF_IDLE_FOR", "(--if-idle-for is read from the command line only)"),
            ("WOOL_IDLE_SERVICE_HOST", "enableServiceLinks: false"),
            ("WOOL_IDLE_PORT_9478_TCP_ADDR", "enableServiceLinks: false"),
        ],
    )
    def test_unread_variables_names_it_with_a_hint(self, name: str, hint: str) -> None:
        """Given a misspelt, lower-case, command-line-only or Kubernetes service-link
        variable, then one line naming it with what was likely meant."""
        # Act
        message = unread_variables([name], KNOWN, COMMAND_LINE_ONLY)
        # Assert
        assert message is not None and "\n" not in message
        assert f"unknown environment variable (no subcommand reads it): {name} " in message
        assert hint in message

    def test_unread_variables_names_every_one_without_a_far_guess(self) -> None:
        """Given two unknown variables, one like no known name, then both are named
        (sorted) and the far one gets no suggestion."""
        # Act
        message = unread_variables(["WOOL_IDLE_ZZZ", "WOOL_IDLE_DRYRUN"], KNOWN, {})
        # Assert
        assert message == (
            "unknown environment variables (no subcommand reads it): "
            "WOOL_IDLE_DRYRUN (did you mean WOOL_IDLE_DRY_RUN?); WOOL_IDLE_ZZZ"
        )

    def test_unread_variables_known_and_foreign_names_pass(self) -> None:
        """Given only known variables (of any subcommand) and names without the prefix,
        then None."""
        # Act
        message = unread_variables(["WOOL_IDLE_LISTEN", "PATH", "WOOLIDLE_X"], KNOWN, {})
        # Assert
        assert message is None


class TestMainRefusesUnreadVariables:
    @pytest.mark.parametrize("name", ["WOOL_IDLE_DRYRUN", "wool_idle_dry_run"])
    def test_main_misspelt_dry_run_exits_2_before_anything_runs(
        self, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Given the dry-run switch misspelt or in lower case, when the autoscaler is
        started for one cycle, then it exits 2 naming the variable and the intended
        one, and never reads a source nor stops anyone (no cycle output)."""
        # Arrange
        monkeypatch.setenv(name, "true")
        # Act
        with pytest.raises(SystemExit) as exited:
            main(SCALE_ONCE)
        # Assert
        captured = capsys.readouterr()
        assert exited.value.code == 2
        assert captured.err.splitlines() == [
            f"wool-idle: error: unknown environment variable (no subcommand reads it): {name} "
            + "(did you mean WOOL_IDLE_DRY_RUN?"
            + (" names are upper case)" if name.islower() else ")")
        ]
        assert captured.out == ""

    def test_main_variables_of_other_subcommands_are_ignored(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Given an environment shared by a worker and the exporter (WOOL_IDLE_LISTEN,
        WOOL_IDLE_TARGET) that sets the autoscaler's own address too, when the
        autoscaler parses its flags (up to an error of its own, which keeps it from
        starting), then those variables are no error: each subcommand reads only its
        own."""
        # Arrange
        monkeypatch.setenv("WOOL_IDLE_LISTEN", "127.0.0.1:50051")
        monkeypatch.setenv("WOOL_IDLE_WEB_LISTEN_ADDRESS", "127.0.0.1:9479")
        monkeypatch.setenv("WOOL_IDLE_TARGET", "127.0.0.1:50051")
        # Act
        with pytest.raises(SystemExit) as exited:
            main(["autoscaler", "--max-idle", "1m", "--web.config.check"])
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert "unknown environment variable" not in err
        assert "--web.config.check: needs --web.config.file" in err

    @pytest.mark.parametrize(
        ("name", "flag"), [("WOOL_IDLE_VERSION", "--version"), ("WOOL_IDLE_HELP", "--help")]
    )
    def test_main_version_or_help_variable_says_command_line_only(
        self,
        name: str,
        flag: str,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Given WOOL_IDLE_VERSION or WOOL_IDLE_HELP set, when a daemon parses its flags,
        then it exits 2 naming the variable and saying its flag is read from the
        command line only, as every other flag without a variable does."""
        # Arrange
        monkeypatch.setenv(name, "1")
        # Act
        with pytest.raises(SystemExit) as exited:
            main(SCALE_ONCE)
        # Assert
        assert exited.value.code == 2
        assert capsys.readouterr().err.splitlines() == [
            f"wool-idle: error: unknown environment variable (no subcommand reads it): {name} "
            f"({flag} is read from the command line only)"
        ]
