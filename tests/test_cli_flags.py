"""Every flag and every environment variable of every subcommand, given a bad value:
exit 2, one line, the flag named.

Both tables are checked for completeness against the parsers themselves, so a
new flag or variable without a bad-input case fails here. The environment table
is mostly derived from the flag table: the same text through the flag's variable
must fail the same way (one validation path for both).
"""

from __future__ import annotations

import pytest

from wool_idle.cli import build_parser, main
from wool_idle.cli.flag import Flag

MISSING = "/nonexistent/file.pem"
NOT_PEM = "/etc/hostname"
A = ["127.0.0.1:1"]  # a well-formed worker address for commands that need one
SCALE = ["autoscaler", "--max-idle", "1m"]
LOCAL = ["--wool-discovery", "local:pool"]  # a well-formed discovery that is not lan
ARABIC_PORT = "host:\u0668\u0660"  # "80" in Arabic-Indic digits

BAD_INPUT: list[tuple[list[str], str]] = [
    # worker
    (["worker", "--listen", "localhost"], "--listen"),
    (["worker", "--listen", "localhost:-1"], "--listen"),
    (["worker", "--listen", "unix:"], "--listen"),
    (["worker", "--listen", "local\nhost:1"], "--listen"),
    (["worker", "--tls-cert", MISSING, "--tls-key", MISSING], "--tls-cert"),
    (["worker", "--tls-cert", NOT_PEM], "--tls-cert"),
    (["worker", "--tls-key", MISSING], "--tls-key"),
    (["worker", "--tls-client-ca", MISSING], "--tls-client-ca"),
    (["worker", "--tls-client-ca", NOT_PEM], "--tls-client-ca"),
    (["worker", "--grace", "1x"], "--grace"),
    (["worker", "--grace", "-1"], "--grace"),
    (["worker", "--grace", "300y"], "--grace"),
    (["worker", "--signal-exit-code", "256"], "--signal-exit-code"),
    (["worker", "--signal-exit-code", "-1"], "--signal-exit-code"),
    (["worker", "--signal-exit-code", "SIGTERM"], "--signal-exit-code"),
    (["worker", "--signal-exit-code", "1"], "--signal-exit-code"),  # cannot listen
    (["worker", "--signal-exit-code", "2"], "--signal-exit-code"),  # a bad flag
    (["worker", "--signal-exit-code", "70"], "--signal-exit-code"),  # the loop ended
    (["worker", "--max-in-flight", "-1"], "--max-in-flight"),
    (["worker", "--max-in-flight", "many"], "--max-in-flight"),
    (["worker", "--max-in-flight", "\u0663"], "--max-in-flight"),
    (["worker", "--allow-stop", "autoscaler"], "--allow-stop"),
    (["worker", "--allow-stop", " , "], "--allow-stop"),
    (["worker", "--allow-dispatch", "caller"], "--allow-dispatch"),
    (["worker", "--allow-dispatch", "a,,b"], "--allow-dispatch"),
    (["worker", "--log.format", "xml"], "--log.format"),
    (["worker", "--log.level", "loud"], "--log.level"),
    (["worker", "--log-format", "xml"], "--log-format"),
    (["worker", "--log-level", "loud"], "--log-level"),
    # idle
    (["idle", "nohost"], "target"),
    (["idle", "host:0"], "target"),
    (["idle", "host:70000"], "target"),
    (["idle", ARABIC_PORT], "target"),
    (["idle", *A, "--timeout", "0"], "--timeout"),
    (["idle", *A, "--timeout", "soon"], "--timeout"),
    (["idle", *A, "--timeout", "11y"], "--timeout"),
    (["idle", *A, "--tls-ca", MISSING], "--tls-ca"),
    (["idle", *A, "--tls-cert", MISSING, "--tls-key", MISSING], "--tls-cert"),
    (["idle", *A, "--tls-key", NOT_PEM], "--tls-key"),
    (["idle", *A, "--tls-cert", NOT_PEM], "--tls-cert"),
    (["idle", *A, "--tls-server-name", " "], "--tls-server-name"),
    # stop
    (["stop", "a b:1"], "target"),
    (["stop", "host\n:1"], "target"),
    (["stop", *A, "--grace", "-5"], "--grace"),
    (["stop", *A, "--grace", "abc"], "--grace"),
    (["stop", *A, "--if-idle-for", "nan"], "--if-idle-for"),
    (["stop", *A, "--if-idle-for", "-1s"], "--if-idle-for"),
    (["stop", *A, "--timeout", "0s"], "--timeout"),
    (["stop", *A, "--tls-ca", NOT_PEM], "--tls-ca"),
    (["stop", *A, "--tls-cert", MISSING, "--tls-key", MISSING], "--tls-cert"),
    (["stop", *A, "--tls-key", MISSING], "--tls-key"),
    (["stop", *A, "--tls-cert", NOT_PEM], "--tls-cert"),
    (["stop", *A, "--tls-server-name", ""], "--tls-server-name"),
    # exporter
    (["exporter", "--web.listen-address", "nowhere"], "--web.listen-address"),
    (["exporter", "--listen", "nowhere"], "--listen"),
    (["exporter", "--target", "host"], "--target"),
    (["exporter", "--target", "host:0"], "--target"),
    (["exporter", "--target", "a:1,,b:2"], "--target"),
    (["exporter", "--targets-file", ""], "--targets-file"),
    (["exporter", "--targets-refresh", "0s"], "--targets-refresh"),
    (["exporter", "--timeout", "0"], "--timeout"),
    (["exporter", "--timeout", "fast"], "--timeout"),
    (["exporter", "--timeout-offset", "-1"], "--timeout-offset"),
    (["exporter", "--concurrency", "0"], "--concurrency"),
    (["exporter", "--concurrency", "lots"], "--concurrency"),
    (["exporter", "--probe.adhoc-limit", "0"], "--probe.adhoc-limit"),
    (["exporter", "--probe.adhoc-limit", "1e4"], "--probe.adhoc-limit"),
    (["exporter", "--tls-ca", MISSING], "--tls-ca"),
    (["exporter", "--tls-cert", MISSING], "--tls-cert"),
    (["exporter", "--tls-key", NOT_PEM], "--tls-key"),
    (["exporter", "--tls-server-name", "a\tb"], "--tls-server-name"),
    (["exporter", "--wool-discovery", "pool"], "--wool-discovery"),
    (["exporter", "--wool-discovery", "dns:pool"], "--wool-discovery"),
    (["exporter", "--wool-discovery", "local:"], "--wool-discovery"),
    (["exporter", "--wool-discovery", "local:a/b"], "--wool-discovery"),
    (["exporter", "--wool-discovery", "lan:a,local:"], "--wool-discovery"),
    (["exporter", "--wool-discovery.poll-interval", "0"], "--wool-discovery.poll-interval"),
    (["exporter", "--wool-discovery.poll-interval", "often"], "--wool-discovery.poll-interval"),
    (["exporter", "--wool-discovery.lan-interface", "eth0"], "--wool-discovery.lan-interface"),
    (
        ["exporter", "--wool-discovery.lan-interface", "10.0.0.1:5353"],
        "--wool-discovery.lan-interface",
    ),
    (
        ["exporter", *LOCAL, "--wool-discovery.lan-interface", "127.0.0.1"],
        "--wool-discovery.lan-interface",
    ),
    (["exporter", "--web.config.file", MISSING], "--web.config.file"),
    (["exporter", "--web.config.check"], "--web.config.check"),
    (["exporter", "--web.config.file", NOT_PEM], "--web.config.file"),
    (["exporter", "--log.format", "xml"], "--log.format"),
    (["exporter", "--log.level", "loud"], "--log.level"),
    (["exporter", "--log-format", "xml"], "--log-format"),
    (["exporter", "--log-level", "loud"], "--log-level"),
    # autoscaler
    (["autoscaler"], "--max-idle"),
    (["autoscaler", "--max-idle", "0"], "--max-idle"),
    (["autoscaler", "--max-idle", "-5m"], "--max-idle"),
    (["autoscaler", "--max-idle", "soon"], "--max-idle"),
    (["autoscaler", "--max-idle", "1000y"], "--max-idle"),
    ([*SCALE, "--metrics-url", "ftp://x/metrics"], "--metrics-url"),
    ([*SCALE, "--metrics-url", "not a url"], "--metrics-url"),
    ([*SCALE, "--prometheus-url", "http://:9090"], "--prometheus-url"),
    ([*SCALE, "--prometheus-url", "http://h:99999"], "--prometheus-url"),
    ([*SCALE, "--prometheus-url", "http://h:9090/?a=b"], "--prometheus-url"),  # query
    ([*SCALE, "--prometheus-url", "http://h:9090/p?"], "--prometheus-url"),
    ([*SCALE, "--prometheus-url", "http://h:9090/#x"], "--prometheus-url"),
    ([*SCALE, "--metrics-url", "http://h/m", "--prometheus-url", "http://h"], "--prometheus-url"),
    ([*SCALE, "--selector", "pool"], "--selector"),
    ([*SCALE, "--selector", "__name__=x"], "--selector"),
    ([*SCALE, "--selector", "pool=a,"], "--selector"),
    ([*SCALE, "--selector", "pool=~(hot"], "--selector"),
    ([*SCALE, "--selector", "pool!~a(?=b)"], "--selector"),
    ([*SCALE, "--selector", "pool=~[[:alpha:]]"], "--selector"),
    ([*SCALE, "--selector", "pool~=a"], "--selector"),
    ([*SCALE, "--selector", "wool_tags=gpu,hot"], "--selector"),
    ([*SCALE, "--selector", "pool=\udcff"], "--selector"),  # an undecodable argv byte
    ([*SCALE, "--grace", "0." + "0" * 47 + "1"], "--grace"),  # a 32-bit float's 0
    ([*SCALE, "--prometheus-url", "http://p:9090", "--alert", "Idle\udcff"], "--alert"),
    ([*SCALE, "--group-by", "__name__"], "--group-by"),
    ([*SCALE, "--group-by", "wool-tags"], "--group-by"),
    ([*SCALE, "--group-by", "a,,b"], "--group-by"),
    ([*SCALE, "--group-by", "zone,zone"], "--group-by"),
    ([*SCALE, "--min-age", "-1m"], "--min-age"),
    ([*SCALE, "--min-age", "young"], "--min-age"),
    ([*SCALE, "--wool-discovery", "pool"], "--wool-discovery"),
    ([*SCALE, "--wool-discovery", "nfs:ns"], "--wool-discovery"),
    ([*SCALE, "--wool-discovery", "local:a/b"], "--wool-discovery"),
    ([*SCALE, "--alert", "WoolWorkerIdle"], "--alert"),
    ([*SCALE, "--source-timeout", "x"], "--source-timeout"),
    ([*SCALE, "--source-max-bytes", "0"], "--source-max-bytes"),
    ([*SCALE, "--source-max-bytes", "64MiB"], "--source-max-bytes"),
    ([*SCALE, "--wait-count", "0"], "--wait-count"),
    ([*SCALE, "--min-workers", "-1"], "--min-workers"),
    ([*SCALE, "--min-workers", "two"], "--min-workers"),
    ([*SCALE, "--max-stops-per-cycle", "0"], "--max-stops-per-cycle"),
    ([*SCALE, "--cooldown", "-1s"], "--cooldown"),
    ([*SCALE, "--max-staleness", "0"], "--max-staleness"),
    ([*SCALE, "--grace", "-1"], "--grace"),
    ([*SCALE, "--rpc-timeout", "0ms"], "--rpc-timeout"),
    ([*SCALE, "--tls-ca", MISSING], "--tls-ca"),
    ([*SCALE, "--tls-cert", MISSING, "--tls-key", MISSING], "--tls-cert"),
    ([*SCALE, "--tls-key", MISSING], "--tls-key"),
    ([*SCALE, "--tls-cert", NOT_PEM], "--tls-cert"),
    ([*SCALE, "--tls-server-name", "\n"], "--tls-server-name"),
    ([*SCALE, "--interval", "0"], "--interval"),
    ([*SCALE, "--state-file", "/nonexistent/state.json"], "--state-file"),
    ([*SCALE, "--state-file", "/etc"], "--state-file"),
    ([*SCALE, "--state-file", ""], "--state-file"),
    ([*SCALE, "--web.listen-address", "nowhere"], "--web.listen-address"),
    ([*SCALE, "--listen", "nowhere"], "--listen"),
    ([*SCALE, "--web.config.file", MISSING], "--web.config.file"),
    ([*SCALE, "--web.config.check"], "--web.config.check"),
    ([*SCALE, "--web.config.file", NOT_PEM], "--web.config.file"),
    ([*SCALE, "--http.config.file", MISSING], "--http.config.file"),
    ([*SCALE, "--http.config.file", NOT_PEM], "--http.config.file"),
    ([*SCALE, "--log.format", "yaml"], "--log.format"),
    ([*SCALE, "--log.level", "loud"], "--log.level"),
    ([*SCALE, "--log-format", "yaml"], "--log-format"),
    ([*SCALE, "--log-level", "loud"], "--log-level"),
    # demo
    (["demo", "--hot", "0"], "--hot"),
    (["demo", "--cold", "many"], "--cold"),
    (["demo", "--client-after", "-1s"], "--client-after"),
    (["demo", "--duration", "10s", "--client-after", "10s"], "--client-after"),
    (["demo", "--max-idle", "0"], "--max-idle"),
    (["demo", "--duration", "-1"], "--duration"),
    (["demo", "--refresh", "0"], "--refresh"),
]

NO_BAD_VALUE = {
    # switches: they take no value on the command line (their variables have cases below)
    ("autoscaler", "--dry-run"),
    ("autoscaler", "--once"),
}

# Values no flag takes on the command line: booleans, and lists as one text.
BAD_ENVIRONMENT: list[tuple[str, str, list[str], str]] = [
    ("WOOL_IDLE_DRY_RUN", '"true"', SCALE, "--dry-run"),
    ("WOOL_IDLE_DRY_RUN", "enabled", SCALE, "--dry-run"),
    ("WOOL_IDLE_DRY_RUN", "", SCALE, "--dry-run"),
    ("WOOL_IDLE_ONCE", "'1'", SCALE, "--once"),
    ("WOOL_IDLE_ONCE", "y", SCALE, "--once"),
    ("WOOL_IDLE_ALLOW_STOP", "", ["worker"], "--allow-stop"),
    ("WOOL_IDLE_ALLOW_DISPATCH", ",", ["worker"], "--allow-dispatch"),
    ("WOOL_IDLE_TARGET", "good:1,bad", ["exporter"], "--target"),
    ("WOOL_IDLE_WOOL_DISCOVERY", "local:a,,lan:b", ["exporter"], "--wool-discovery"),
    (
        "WOOL_IDLE_WOOL_DISCOVERY_LAN_INTERFACE",
        "::1,lo",
        ["exporter"],
        "--wool-discovery.lan-interface",
    ),
    ("WOOL_IDLE_SELECTOR", " , ", SCALE, "--selector"),
    ("WOOL_IDLE_MAX_IDLE", "banana", ["autoscaler", "--once"], "--max-idle"),
]


def parsers() -> dict[str, list[Flag]]:
    return {name: parser.flags for name, parser in build_parser().subcommands.items()}


def flag_named(command: str, option: str) -> Flag | None:
    return next((f for f in parsers()[command] if option in (f.name, *f.aliases)), None)


def derived_environment() -> list[tuple[str, str, list[str], str]]:
    """Each flag case (primary spelling) whose bad value comes last, moved into the
    flag's variable."""
    cases = []
    for args, named in BAD_INPUT:
        option = args[-2] if len(args) >= 3 else ""
        flag = flag_named(args[0], option)
        if flag is not None and option == named == flag.name and flag.variable:
            cases.append((flag.variable, args[-1], args[:-2], named))
    return cases


ENVIRONMENT = derived_environment() + BAD_ENVIRONMENT


def run_failing(args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.timeout(30)  # a value wrongly accepted may start a daemon: fail, not hang
class TestBadFlags:
    @pytest.mark.parametrize(("args", "flag"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
    def test_bad_value_exits_2_naming_flag(self, args: list[str], flag: str, capsys) -> None:
        """Given a bad value for a flag, when the command parses it, then it exits 2
        with one line on stderr that names the flag, before doing anything."""
        # Act
        err = run_failing(args, capsys)
        # Assert
        assert flag in err
        assert err.startswith(f"wool-idle {args[0]}: error:")

    @pytest.mark.parametrize(
        ("variable", "value", "args", "flag"),
        ENVIRONMENT,
        ids=[f"{v}={value!r} {' '.join(a)}" for v, value, a, _ in ENVIRONMENT],
    )
    def test_bad_environment_value_exits_2_naming_flag(
        self, variable: str, value: str, args: list[str], flag: str, capsys, monkeypatch
    ) -> None:
        """Given a bad value in a flag's environment variable, when the command parses,
        then it exits 2 with one line naming the flag (and the variable, when the value
        itself is bad) and the subcommand in use."""
        # Arrange
        monkeypatch.setenv(variable, value)
        # Act
        err = run_failing(args, capsys)
        # Assert
        assert flag in err
        assert err.startswith(f"wool-idle {args[0]}: error:")
        if "(from " in err:
            assert f"(from {variable})" in err

    @pytest.mark.parametrize(("variable", "value", "args", "flag"), BAD_ENVIRONMENT)
    def test_bad_environment_value_names_the_variable(
        self, variable: str, value: str, args: list[str], flag: str, capsys, monkeypatch
    ) -> None:
        """Given a boolean or list variable with a value outside its set, when parsed,
        then the one line names the flag and the variable."""
        # Arrange
        monkeypatch.setenv(variable, value)
        # Act
        err = run_failing(args, capsys)
        # Assert
        assert f"argument {flag}" in err and f"(from {variable})" in err

    def test_flag_table_covers_every_flag(self) -> None:
        """Given every subcommand's parser, then each spelling of each flag has a
        bad-input case (or is a switch, which takes no value)."""
        covered = {(args[0], flag) for args, flag in BAD_INPUT} | NO_BAD_VALUE
        missing = [
            (name, option)
            for name, flags in parsers().items()
            for flag in flags
            for option in (flag.name, *flag.aliases)
            if (name, option) not in covered
        ]
        assert missing == []

    def test_environment_table_covers_every_variable(self) -> None:
        """Given every subcommand's parser, then each environment variable of each of
        its flags has a bad-value case."""
        covered = {(args[0], variable) for variable, _, args, _ in ENVIRONMENT}
        missing = [
            (name, flag.variable)
            for name, flags in parsers().items()
            for flag in flags
            if flag.variable and (name, flag.variable) not in covered
        ]
        assert missing == []
