"""The exporter-toolkit web configuration file."""

from __future__ import annotations

import ssl
from pathlib import Path

import bcrypt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wool_idle.web.config import WebConfig, WebConfigError, load_web_config, parse_web_config

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$")


class TestParseWebConfig:
    def test_parse_tls_and_users(self, tls_material, tmp_path: Path) -> None:
        """Given a file with TLS (relative paths) and a user, when loaded, then the TLS
        context requires verified client certificates at TLS 1.2+ and the user's hash
        is kept."""
        # Arrange
        for name, source in (
            ("s.crt", tls_material.server.cert),
            ("s.key", tls_material.server.key),
            ("ca.crt", tls_material.ca),
        ):
            (tmp_path / name).write_bytes(Path(source).read_bytes())
        path = tmp_path / "web.yml"
        path.write_text(
            "tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n"
            "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
            f"  min_version: TLS12\nbasic_auth_users:\n  prometheus: '{HASH}'\n"
        )
        # Act
        config = load_web_config(str(path))
        # Assert
        assert config.ssl_context is not None
        assert config.ssl_context.verify_mode is ssl.CERT_REQUIRED
        assert config.ssl_context.minimum_version is ssl.TLSVersion.TLSv1_2
        assert config.users == {"prometheus": HASH.encode()}

    def test_parse_empty_file(self) -> None:
        """Given an empty file, when parsed, then no TLS and no users."""
        assert parse_web_config("", Path(".")) == WebConfig()

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("[1, 2]", "mapping"),
            ("tls_server_config: {cert_file: a}", "cert_file and key_file"),
            ("tls_server_config: {cert_file: /nonexistent, key_file: /nonexistent}", "cannot load"),
            (
                "tls_server_config: {cert_file: a, key_file: b, client_auth_type: Maybe}",
                "client_auth_type",
            ),
            (
                "tls_server_config: {cert_file: a, key_file: b, "
                "client_auth_type: RequireAndVerifyClientCert}",
                "client_ca_file",
            ),
            ("tls_server_config: {cert_file: a, key_file: b, cipher_suites: []}", "unsupported"),
            ("tls_server_config: []", "mapping"),
            ("http_server_config: {http2: true}", "unsupported"),
            ("basic_auth_users: {alice: plaintext}", "bcrypt"),
            ("basic_auth_users: [alice]", "mapping"),
            ("basic_auth_users: {'a:b': '$2y$10$abc'}", "user name"),
            ("tls_server_config: {cert_file: 1, key_file: b}", "string"),
            ("a: [", "YAML"),
        ],
    )
    def test_parse_rejects(self, text: str, message: str) -> None:
        """Given an invalid file, when parsed, then WebConfigError says what is wrong."""
        with pytest.raises(WebConfigError, match=message):
            parse_web_config(text, Path("/"))

    def test_load_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(WebConfigError, match="cannot read"):
            load_web_config(str(tmp_path / "missing.yml"))

    @given(st.text(max_size=300))
    @settings(max_examples=300)
    def test_parse_fuzz(self, text: str) -> None:
        """Given arbitrary text, when parsed, then a WebConfig or WebConfigError only."""
        try:
            config = parse_web_config(text, Path("/nonexistent"))
        except WebConfigError:
            return
        assert isinstance(config, WebConfig)
