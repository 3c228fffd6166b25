"""Prometheus's HTTP client configuration, read strictly."""

from __future__ import annotations

import base64
import os
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wool_idle.web.client_config import (
    ClientConfigError,
    HttpClientConfig,
    parse_client_config,
)
from wool_idle.web.live_client_config import LiveClientConfig


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def config_dir(tmp_path: Path, tls_material) -> Path:
    """A directory with a CA, a client certificate and key, and secret files."""
    shutil.copy(tls_material.ca, tmp_path / "ca.crt")
    shutil.copy(tls_material.clients["autoscaler"].cert, tmp_path / "client.crt")
    shutil.copy(tls_material.clients["autoscaler"].key, tmp_path / "client.key")
    (tmp_path / "pw").write_text("  s3cret \n")
    (tmp_path / "token").write_text("tok\n")
    return tmp_path


class TestParseClientConfig:
    def test_parse_basic_auth_password_file_read_on_every_use(self, config_dir: Path) -> None:
        """Given basic_auth with a password_file (relative), when the header is made,
        then it carries the file's content without blanks, read again each time."""
        # Arrange
        config = parse_client_config("basic_auth: {username: alice, password_file: pw}", config_dir)
        assert config.credentials is not None
        # Act
        first = config.credentials.header()
        (config_dir / "pw").write_text("rotated\n")
        second = config.credentials.header()
        # Assert
        assert first == basic("alice", "s3cret")
        assert second == basic("alice", "rotated")

    @pytest.mark.parametrize(
        ("content", "header"),
        [
            ("basic_auth: {username: bob, password: '0123'}", basic("bob", "0123")),
            ("basic_auth: {}", basic("", "")),
            ("authorization: {credentials: abc}", "Bearer abc"),
            ("authorization: {type: Token, credentials_file: token}", "Token tok"),
            ("bearer_token: legacy", "Bearer legacy"),
            ("bearer_token_file: token", "Bearer tok"),
        ],
    )
    def test_parse_credentials(self, content: str, header: str, config_dir: Path) -> None:
        """Given each way to authenticate, then the Authorization header Prometheus sends."""
        config = parse_client_config(content, config_dir)
        assert config.credentials is not None and config.credentials.header() == header

    def test_parse_tls_config(self, config_dir: Path) -> None:
        """Given a full tls_config, then a client context that verifies with the CA,
        holds the client certificate, and keeps the versions asked for."""
        # Act
        config = parse_client_config(
            "tls_config: {ca_file: ca.crt, cert_file: client.crt, key_file: client.key,"
            " server_name: localhost, min_version: TLS12, max_version: TLS13}",
            config_dir,
        )
        # Assert
        context = config.ssl_context
        assert context is not None
        assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
        assert [c["subject"] for c in context.get_ca_certs()] != []
        assert context.minimum_version is ssl.TLSVersion.TLSv1_2

    def test_parse_insecure_skip_verify(self, config_dir: Path) -> None:
        config = parse_client_config("tls_config: {insecure_skip_verify: true}", config_dir)
        assert config.ssl_context is not None
        assert config.ssl_context.verify_mode is ssl.CERT_NONE

    def test_parse_defaults(self) -> None:
        """Given an empty file, then no credentials, no TLS settings, redirects
        followed (as Prometheus's defaults)."""
        assert parse_client_config("", Path("/")) == HttpClientConfig()

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            ("foo: 1", r"line 1: unknown key foo"),
            ("basic_auth: {username: a, passwd: x}", r"unknown key basic_auth\.passwd"),
            ("tls_config: {ca: x}", r"unknown key tls_config\.ca"),
            ("basic_auth: {username: a}\nbasic_auth: {username: b}", "line 2: basic_auth is given"),
            ("basic_auth: {username: a, username: b}", r"basic_auth\.username is given twice"),
            ("basic_auth: {password: a, password_file: pw}", "basic_auth.password and basic"),
            ("authorization: {credentials: a, credentials_file: token}", "credentials and"),
            ("bearer_token: a\nbearer_token_file: token", "bearer_token and bearer_token_file"),
            ("basic_auth: {username: a}\nauthorization: {credentials: b}", "at most one way"),
            ("bearer_token: a\nauthorization: {credentials: b}", "at most one way"),
            ("authorization: {type: basic, credentials: x}", "use basic_auth"),
            ("basic_auth: {password_file: missing}", "basic_auth.password_file .*missing"),
            ("authorization: {credentials_file: /nonexistent}", r"credentials_file '/nonexist"),
            ("tls_config: {ca_file: missing.crt}", r"tls_config\.ca_file .*missing\.crt"),
            ("tls_config: {ca_file: pw}", r"tls_config\.ca_file .*not valid PEM"),
            ("tls_config: {cert_file: client.crt}", "cert_file and key_file go together"),
            ("tls_config: {key_file: client.key}", "cert_file and key_file go together"),
            ("tls_config: {cert_file: client.crt, key_file: pw}", r"cert_file/key_file"),
            ("tls_config: {min_version: TLS1.2}", r"tls_config\.min_version: unknown TLS"),
            ("tls_config: {min_version: TLS13, max_version: TLS12}", "below min_version"),
            ("tls_config: {insecure_skip_verify: 'yes'}", "must be true or false"),
            ("follow_redirects: maybe", "follow_redirects must be true or false"),
            ("oauth2: {client_id: x}", "oauth2 is not supported"),
            ("proxy_url: http://proxy:3128", "proxy_url is not supported"),
            ("no_proxy: localhost", "unknown key no_proxy"),
            ("http_headers: {X: {values: [a]}}", "unknown key http_headers"),
            ("[1]", "mapping"),
            ("{{{", "not valid YAML"),
        ],
    )
    def test_parse_rejects(self, content: str, message: str, config_dir: Path) -> None:
        """Given an invalid file, then ClientConfigError names the key (and line)."""
        with pytest.raises(ClientConfigError, match=message):
            parse_client_config(content, config_dir)

    def test_parse_error_never_shows_a_secret(self, config_dir: Path) -> None:
        """Given a file whose error is next to an inline password, then the message
        names keys only."""
        with pytest.raises(ClientConfigError) as raised:
            parse_client_config("basic_auth: {password: hunter2, extra: x}", config_dir)
        assert "hunter2" not in str(raised.value)

    def test_parse_repr_never_shows_a_secret(self, config_dir: Path) -> None:
        """Given inline secrets, then the config's repr (what a log of it would show)
        holds neither."""
        for content in ("basic_auth: {password: hunter2}", "bearer_token: hunter2"):
            assert "hunter2" not in repr(parse_client_config(content, config_dir))

    def test_load_relative_to_the_file(self, config_dir: Path, tmp_path_factory) -> None:
        """Given a file naming files by relative paths, when loaded from another
        working directory, then they are found beside the file."""
        # Arrange
        path = config_dir / "http.yml"
        path.write_text("basic_auth: {username: a, password_file: pw}\n")
        # Act
        config = LiveClientConfig.load(str(path)).current
        # Assert
        assert config.credentials is not None
        assert config.credentials.header() == basic("a", "s3cret")

    def test_load_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(ClientConfigError, match="cannot read"):
            LiveClientConfig.load(str(tmp_path / "missing.yml"))

    @pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
    def test_load_special_file_refused_at_once(self, special: str, tmp_path: Path) -> None:
        """Given a FIFO nobody writes to, or an endless device, as the config file, when
        loaded, then ClientConfigError says it is not a regular file (no hang, no
        unbounded read)."""
        # Arrange
        path = tmp_path / "fifo" if special == "fifo" else Path(special)
        if special == "fifo":
            os.mkfifo(path)
        # Act / Assert
        with pytest.raises(ClientConfigError, match="not a regular file"):
            LiveClientConfig.load(str(path))

    def test_parse_password_file_turned_fifo_fails_that_read(self, config_dir: Path) -> None:
        """Given a password_file replaced by a FIFO after start, when the header is made,
        then OSError names the key and the file at once (that read of the source fails;
        nothing waits for a writer)."""
        # Arrange
        config = parse_client_config("basic_auth: {username: a, password_file: pw}", config_dir)
        assert config.credentials is not None
        (config_dir / "pw").unlink()
        os.mkfifo(config_dir / "pw")
        # Act / Assert
        with pytest.raises(OSError, match=r"password_file .*a FIFO, not a regular file"):
            config.credentials.header()

    def test_parse_password_file_not_utf8_error_never_shows_a_byte_of_it(
        self, config_dir: Path
    ) -> None:
        """Given a password_file rewritten after start with a byte that is not UTF-8,
        when the header is made, then OSError names the key and the file and says it
        is not UTF-8 text, showing neither that byte nor where it is."""
        # Arrange
        config = parse_client_config("basic_auth: {username: a, password_file: pw}", config_dir)
        assert config.credentials is not None
        (config_dir / "pw").write_bytes(b"hunter\xe92")
        # Act
        with pytest.raises(OSError) as raised:
            config.credentials.header()
        # Assert
        assert str(raised.value).endswith("/pw': not UTF-8 text"), raised.value
        assert "0xe9" not in str(raised.value) and "position" not in str(raised.value)

    @given(st.text(max_size=300))
    @settings(max_examples=300)
    def test_parse_fuzz(self, content: str) -> None:
        """Given arbitrary text, when parsed, then a config or ClientConfigError only."""
        try:
            config = parse_client_config(content, Path("/nonexistent"))
        except ClientConfigError:
            return
        assert isinstance(config, HttpClientConfig)


TLS_FILES = "ca_file: ca.crt, cert_file: client.crt, key_file: client.key"

# (name, http_config content, accepted): promtool check config (the same keys inline in
# a scrape config of Prometheus 2.42) and wool-idle agree.
AGREED: list[tuple[str, str, bool]] = [
    ("ok_basic_password", "basic_auth: {username: u, password: p}", True),
    ("ok_basic_password_file", "basic_auth: {username: u, password_file: pw}", True),
    ("ok_basic_no_username", "basic_auth: {password: p}", True),
    ("ok_authorization", "authorization: {type: Bearer, credentials: t}", True),
    ("ok_authorization_no_type", "authorization: {credentials_file: token}", True),
    ("ok_authorization_custom_type", "authorization: {type: Token, credentials: t}", True),
    ("ok_bearer_legacy", "bearer_token: t", True),
    ("ok_bearer_file_legacy", "bearer_token_file: token", True),
    (
        "ok_tls_full",
        f"tls_config: {{{TLS_FILES}, server_name: localhost, min_version: TLS12}}",
        True,
    ),
    ("ok_tls_insecure", "tls_config: {insecure_skip_verify: true}", True),
    ("ok_switches", "follow_redirects: false\nenable_http2: no", True),
    ("bad_unknown_top", "foo: 1", False),
    ("bad_basic_unknown", "basic_auth: {username: u, passwd: p}", False),
    ("bad_basic_both", "basic_auth: {username: u, password: p, password_file: pw}", False),
    ("bad_authorization_both", "authorization: {credentials: t, credentials_file: token}", False),
    ("bad_authorization_basic", "authorization: {type: basic, credentials: t}", False),
    ("bad_authorization_basic_case", "authorization: {type: BASIC, credentials: t}", False),
    (
        "bad_authorization_and_basic",
        "basic_auth: {username: u}\nauthorization: {credentials: t}",
        False,
    ),
    ("bad_bearer_both", "bearer_token: t\nbearer_token_file: token", False),
    ("bad_bearer_and_basic", "bearer_token: t\nbasic_auth: {username: u}", False),
    ("bad_bearer_and_authorization", "bearer_token: t\nauthorization: {credentials: t}", False),
    ("bad_tls_min_version", "tls_config: {min_version: TLS1.2}", False),
    ("bad_tls_cert_no_key", "tls_config: {cert_file: client.crt}", False),
    ("bad_tls_key_no_cert", "tls_config: {key_file: client.key}", False),
    ("bad_tls_unknown", "tls_config: {ca: x}", False),
    ("bad_follow_text", "follow_redirects: maybe", False),
    ("bad_http2_quoted", 'enable_http2: "no"', False),
    ("bad_no_proxy_not_in_2_42", "no_proxy: localhost", False),
    ("bad_http_headers_not_in_2_42", "http_headers: {X: {values: [a]}}", False),
    ("bad_duplicate_section", "basic_auth: {username: a}\nbasic_auth: {username: b}", False),
    ("bad_duplicate_inner", "basic_auth: {username: a, username: b}", False),
]

# (name, content): promtool check config accepts, wool-idle refuses at start, on purpose
# (Prometheus fails later, at run time, or wool-idle does not implement the key).
DIVERGENT: list[tuple[str, str]] = [
    ("missing_password_file", "basic_auth: {username: u, password_file: nope}"),
    ("missing_ca_file", "tls_config: {ca_file: nope.crt}"),
    ("max_version_below_min", "tls_config: {min_version: TLS13, max_version: TLS12}"),
    ("oauth2", "oauth2: {client_id: c, client_secret: s, token_url: 'http://127.0.0.1:9/t'}"),
    ("proxy_url", "proxy_url: 'http://127.0.0.1:3128'"),
]


def promtool_accepts(directory: Path, rows: list[tuple[str, str]]) -> dict[str, bool]:
    """Each row's content as the http_config of a scrape config: does promtool
    check config accept it?"""
    paths = {}
    for name, content in rows:
        inline = "".join(f"    {line}\n" for line in content.splitlines())
        paths[name] = directory / f"prometheus-{name}.yml"
        paths[name].write_text(
            "scrape_configs:\n  - job_name: j\n"
            f"    static_configs: [{{targets: ['127.0.0.1:9']}}]\n{inline}"
        )
    promtool = shutil.which("promtool")
    assert promtool, "Debian's promtool is required (scripts/ensure-prometheus)"
    run = subprocess.run(
        [promtool, "check", "config", *map(str, paths.values())], capture_output=True, text=True
    )
    return {name: f"SUCCESS: {path} is valid" in run.stdout for name, path in paths.items()}


def accepted(content: str, directory: Path) -> bool:
    try:
        parse_client_config(content, directory)
    except ClientConfigError:
        return False
    return True


class TestPromtoolAgreement:
    def test_parse_client_config_agrees_with_promtool(self, config_dir: Path) -> None:
        """Given every row of the table, when promtool check config reads it as a
        scrape config's http_config and wool-idle reads it as --http.config.file,
        then both accept it or both refuse it, as the table says."""
        # Act
        promtool = promtool_accepts(config_dir, [(name, content) for name, content, _ in AGREED])
        ours = {name: accepted(content, config_dir) for name, content, _ in AGREED}
        # Assert
        table = {name: verdict for name, _, verdict in AGREED}
        assert promtool == table
        assert ours == table

    def test_parse_client_config_divergences_are_stricter(self, config_dir: Path) -> None:
        """Given the rows where wool-idle differs on purpose, then promtool accepts
        them and wool-idle refuses them."""
        promtool = promtool_accepts(config_dir, DIVERGENT)
        assert all(promtool.values()), promtool
        assert not any(accepted(content, config_dir) for _, content in DIVERGENT)
