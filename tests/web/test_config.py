"""The exporter-toolkit web configuration file, checked against promtool itself."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import bcrypt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wool_idle.web.config import WebConfig, WebConfigError, parse_web_config
from wool_idle.web.live_config import LiveWebConfig

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$")
SALTED = "nC5n5gVTNe3SfdG6ODUXWeFIyZDnpdMnUo1vXVmvFLC5zMwMa6vr."
CERTS = "cert_file: server.crt, key_file: server.key"
HEADERS_OK = (
    "http_server_config:\n  headers:\n    Strict-Transport-Security: max-age=31536000\n"
    "    X-Content-Type-Options: nosniff\n    X-Frame-Options: deny\n"
    "    X-XSS-Protection: '1; mode=block'\n    Content-Security-Policy: \"default-src 'self'\"\n"
)

# (name, file content, accepted): promtool check web-config and wool-idle agree.
# Rows 01-41 came from a survey of exporter-toolkit's checks (28 is in DIVERGENT); 42- were added.
AGREED: list[tuple[str, str, bool]] = [
    ("01_empty", "", True),
    ("02_users_only", f"basic_auth_users: {{alice: '$2b$10${SALTED}'}}", True),
    ("03_tls_ok", f"tls_server_config: {{{CERTS}}}", True),
    (
        "04_tls_mtls",
        f"tls_server_config: {{{CERTS}, client_auth_type: RequireAndVerifyClientCert, "
        "client_ca_file: ca.crt}",
        True,
    ),
    ("05_headers_ok", HEADERS_OK, True),
    ("06_http2_false", "http_server_config: {http2: false}", True),
    ("07_unknown_top", "foo: 1", False),
    ("08_unknown_tls", f"tls_server_config: {{{CERTS}, ca_file: ca.crt}}", False),
    ("09_unknown_http", "http_server_config: {http3: true}", False),
    ("10_header_forbidden", "http_server_config: {headers: {X-Custom: a}}", False),
    ("11_header_badvalue", "http_server_config: {headers: {X-Frame-Options: allow}}", False),
    ("12_header_case", "http_server_config: {headers: {x-frame-options: deny}}", False),
    ("13_header_value_case", "http_server_config: {headers: {X-Frame-Options: DENY}}", False),
    ("14_bad_bcrypt", "basic_auth_users: {alice: plaintext}", False),
    (
        "15_missing_cert",
        "tls_server_config: {cert_file: /nonexistent.crt, key_file: server.key}",
        False,
    ),
    ("16_cert_no_key", "tls_server_config: {cert_file: server.crt}", False),
    ("17_ca_no_authtype", f"tls_server_config: {{{CERTS}, client_ca_file: ca.crt}}", False),
    ("18_bad_authtype", f"tls_server_config: {{{CERTS}, client_auth_type: Maybe}}", False),
    ("19_bad_minver", f"tls_server_config: {{{CERTS}, min_version: TLS1.2}}", False),
    (
        "20_ciphers_curves",
        f"tls_server_config: {{{CERTS}, cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256], "
        "curve_preferences: [X25519], min_version: TLS12, max_version: TLS13, "
        "prefer_server_cipher_suites: true}",
        True,
    ),
    ("21_bad_cipher", f"tls_server_config: {{{CERTS}, cipher_suites: [RC4]}}", False),
    (
        "22_auth_without_tls",
        "tls_server_config: {client_auth_type: RequireAndVerifyClientCert, client_ca_file: ca.crt}",
        False,
    ),
    ("23_http2_string", 'http_server_config: {http2: "no"}', False),
    (
        "24_mismatched_keypair",
        "tls_server_config: {cert_file: server.crt, key_file: other.key}",
        False,
    ),
    (
        "25_users_null_tls_null",
        "tls_server_config:\nhttp_server_config:\nbasic_auth_users:\n",
        True,
    ),
    ("26_empty_user_hash", 'basic_auth_users: {alice: ""}', False),
    ("27_header_empty_value", 'http_server_config: {headers: {X-Content-Type-Options: ""}}', False),
    ("29_http2_yaml11_no", "http_server_config: {http2: no}", True),
    ("30_hash_2y", f"basic_auth_users: {{alice: '$2y$10${SALTED}'}}", True),
    ("31_hash_2a", f"basic_auth_users: {{alice: '$2a$10${SALTED}'}}", True),
    ("32_hash_2x", f"basic_auth_users: {{alice: '$2x$10${SALTED}'}}", True),
    ("33_hash_cost3", f"basic_auth_users: {{alice: '$2b$03${SALTED}'}}", False),
    ("34_hash_cost32", f"basic_auth_users: {{alice: '$2b$32${SALTED}'}}", False),
    ("35_dup_key", "basic_auth_users: {alice: x}\nbasic_auth_users: {bob: y}\n", False),
    ("36_header_hsts_any", "http_server_config: {headers: {Strict-Transport-Security: any}}", True),
    ("37_headers_not_map", "http_server_config: {headers: [X-Frame-Options]}", False),
    ("38_user_list", "basic_auth_users: [alice]", False),
    ("39_not_yaml", "{{{", False),
    ("40_on", "http_server_config: {http2: on}", True),
    ("41_dupinner", "http_server_config: {http2: off, http2: on}", False),
    ("42_min_version_only_is_plain_http", "tls_server_config: {min_version: TLS13}", True),
    (
        "43_require_old_alias",
        f"tls_server_config: {{{CERTS}, client_auth_type: RequireClientCert}}",
        True,
    ),
    (
        "44_verify_without_ca",
        f"tls_server_config: {{{CERTS}, client_auth_type: VerifyClientCertIfGiven}}",
        True,
    ),
    (
        "45_tls13_cipher_only",
        f"tls_server_config: {{{CERTS}, cipher_suites: [TLS_AES_128_GCM_SHA256]}}",
        True,
    ),
    (
        "46_every_curve",
        f"tls_server_config: {{{CERTS}, "
        "curve_preferences: [CurveP256, CurveP384, CurveP521, X25519]}",
        True,
    ),
    ("47_bad_curve", f"tls_server_config: {{{CERTS}, curve_preferences: [P256]}}", False),
    (
        "48_cipher_alias_not_go",
        f"tls_server_config: {{{CERTS}, cipher_suites: [AES128-SHA]}}",
        False,
    ),
    (
        "49_dup_user",
        f"basic_auth_users:\n  alice: '$2y$10${SALTED}'\n  alice: '$2y$10${SALTED}'\n",
        False,
    ),
    (
        "50_dup_header",
        "http_server_config:\n  headers: {X-Frame-Options: deny, X-Frame-Options: deny}\n",
        False,
    ),
    ("51_user_with_colon", f"basic_auth_users: {{'a:b': '$2y$10${SALTED}'}}", True),
    ("52_number_hash", "basic_auth_users: {alice: 123}", False),
    (
        "53_header_number_value",
        "http_server_config: {headers: {Strict-Transport-Security: 1}}",
        True,
    ),
    ("54_key_no_cert", "tls_server_config: {key_file: server.key}", False),
    (
        "55_prefer_string",
        f"tls_server_config: {{{CERTS}, prefer_server_cipher_suites: 'yes'}}",
        False,
    ),
    (
        "56_missing_client_ca",
        f"tls_server_config: {{{CERTS}, client_auth_type: RequireAndVerifyClientCert, "
        "client_ca_file: nope.crt}",
        False,
    ),
    ("57_hash_cost0", f"basic_auth_users: {{alice: '$2b$00${SALTED}'}}", False),
    ("58_hash_cost99", f"basic_auth_users: {{alice: '$2y$99${SALTED}'}}", False),
    ("59_hash_cost4", f"basic_auth_users: {{alice: '$2b$04${SALTED}'}}", True),
    ("60_hash_cost31", f"basic_auth_users: {{alice: '$2y$31${SALTED}'}}", True),
    ("63_path_nul", 'tls_server_config: {cert_file: "a\\0b", key_file: server.key}', False),
    (
        "64_path_lone_surrogate",
        'tls_server_config: {cert_file: "\\ud800", key_file: server.key}',
        False,
    ),
    (
        "65_header_lone_surrogate",
        'http_server_config: {headers: {Content-Security-Policy: "\\ud800"}}',
        False,
    ),
]

# (name, content, why): promtool accepts, wool-idle refuses, on purpose.
DIVERGENT: list[tuple[str, str, str]] = [
    (
        "28_maxver_lt_min",
        f"tls_server_config: {{{CERTS}, min_version: TLS13, max_version: TLS12}}",
        "every handshake would fail: refused at start instead",
    ),
    (
        "61_hash_salt_unused_bits",
        f"basic_auth_users: {{alice: '$2y$10${SALTED[:21]}f{SALTED[22:]}'}}",
        "the salt's last character sets bits bcrypt does not use: Go ignores them, "
        "Python's bcrypt refuses the hash, so every login would fail",
    ),
    (
        "62_hash_final_newline",
        f'basic_auth_users: {{alice: "$2y$10${SALTED}\\n"}}',
        "a hash with a final newline: promtool does not read hashes, and no login could "
        "ever match it",
    ),
]


@pytest.fixture
def config_dir(tmp_path: Path, tls_material) -> Path:
    """A directory with a server certificate and key, a CA, and a key of another pair."""
    for name, source in (
        ("server.crt", tls_material.server.cert),
        ("server.key", tls_material.server.key),
        ("ca.crt", tls_material.ca),
        ("other.key", tls_material.clients["exporter"].key),
    ):
        shutil.copy(source, tmp_path / name)
    return tmp_path


def promtool_verdicts(paths: list[Path]) -> dict[Path, bool]:
    """``promtool check web-config`` on every file: accepted or not, by file."""
    promtool = shutil.which("promtool")
    assert promtool, "Debian's promtool is required (scripts/ensure-prometheus)"
    run = subprocess.run(
        [promtool, "check", "web-config", *map(str, paths)], capture_output=True, text=True
    )
    output = run.stdout + run.stderr
    verdicts = {}
    for path in paths:
        accepted, refused = f"{path} SUCCESS" in output, f"{path} FAILED" in output
        assert accepted != refused, output
        verdicts[path] = accepted
    return verdicts


def ours(path: Path) -> bool:
    try:
        LiveWebConfig.load(str(path))
    except WebConfigError:
        return False
    return True


class TestPromtoolAgreement:
    def test_web_config_agrees_with_promtool(self, config_dir: Path) -> None:
        """Given every file of the table, when promtool check web-config and wool-idle
        read it, then both accept it or both refuse it, as the table says."""
        # Arrange
        paths = {}
        for name, content, _ in AGREED:
            paths[name] = config_dir / f"{name}.yml"
            paths[name].write_text(content)
        # Act
        promtool = promtool_verdicts(list(paths.values()))
        # Assert
        table = {name: accepted for name, _, accepted in AGREED}
        assert {name: promtool[p] for name, p in paths.items()} == table
        assert {name: ours(p) for name, p in paths.items()} == table

    def test_web_config_divergences_are_stricter(self, config_dir: Path) -> None:
        """Given the files where wool-idle differs on purpose, then promtool accepts
        them and wool-idle refuses them (never the other way round)."""
        # Arrange
        paths = []
        for name, content, _ in DIVERGENT:
            paths.append(config_dir / f"{name}.yml")
            paths[-1].write_text(content)
        # Act
        promtool = promtool_verdicts(paths)
        # Assert
        assert all(promtool[p] for p in paths)
        assert not any(ours(p) for p in paths)


class TestParseWebConfig:
    def test_parse_tls_and_users(self, config_dir: Path) -> None:
        """Given a file with TLS (relative paths) and a user, when loaded, then the TLS
        context requires verified client certificates at TLS 1.2+ and the user's hash
        is kept."""
        # Arrange
        path = config_dir / "web.yml"
        path.write_text(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
            "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
            f"  min_version: TLS12\nbasic_auth_users:\n  prometheus: '{HASH}'\n"
        )
        # Act
        config = LiveWebConfig.load(str(path)).current
        # Assert
        assert config.ssl_context is not None
        assert config.ssl_context.verify_mode is ssl.CERT_REQUIRED
        assert config.ssl_context.minimum_version is ssl.TLSVersion.TLSv1_2
        assert config.ssl_context.maximum_version is ssl.TLSVersion.TLSv1_3
        assert config.users == {"prometheus": HASH.encode()}

    def test_parse_http_server_config(self) -> None:
        """Given headers (and http2), then the headers are kept as written."""
        # Act
        config = parse_web_config(HEADERS_OK + "  http2: false\n", Path("/"))
        # Assert
        assert config.headers["X-Frame-Options"] == "deny"
        assert config.headers["X-XSS-Protection"] == "1; mode=block"
        assert len(config.headers) == 5

    def test_parse_empty_file(self) -> None:
        """Given an empty file, when parsed, then no TLS, no users, no headers."""
        assert parse_web_config("", Path(".")) == WebConfig()

    def test_parse_ciphers_curve_and_versions_applied(self, config_dir: Path) -> None:
        """Given Go cipher names, curves and versions, then the context allows those
        TLS 1.2 suites only, the first curve, and the versions asked for."""
        # Arrange
        content = (
            f"tls_server_config: {{{CERTS}, cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
            " TLS_RSA_WITH_AES_256_CBC_SHA], curve_preferences: [CurveP384, X25519],"
            " min_version: TLS12, max_version: TLS12, prefer_server_cipher_suites: false}"
        )
        # Act
        context = parse_web_config(content, config_dir).ssl_context
        # Assert
        assert context is not None
        tls12 = {c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"}
        assert tls12 == {"ECDHE-RSA-AES128-GCM-SHA256", "AES256-SHA"}
        assert context.maximum_version is ssl.TLSVersion.TLSv1_2
        assert not context.options & ssl.OP_CIPHER_SERVER_PREFERENCE

    def test_parse_tls13_suites_only_means_tls13(self, config_dir: Path) -> None:
        """Given only TLS 1.3 suites (not configurable, as in Go), then TLS 1.2 is off:
        no TLS 1.2 suite of the list exists to use."""
        content = f"tls_server_config: {{{CERTS}, cipher_suites: [TLS_AES_256_GCM_SHA384]}}"
        context = parse_web_config(content, config_dir).ssl_context
        assert context is not None and context.minimum_version is ssl.TLSVersion.TLSv1_3

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            ("[1, 2]", "mapping"),
            ("tls_server_config: {cert_file: a}", "missing key_file"),
            ("tls_server_config: {key_file: a}", "missing cert_file"),
            (
                "tls_server_config: {cert_file: /nonexistent, key_file: /nonexistent}",
                "cert_file/key_file '/nonexistent': No such file",
            ),
            (
                "tls_server_config: {cert_file: server.crt, key_file: /}",
                "cert_file/key_file '/': a directory, not a regular file",
            ),
            (f"tls_server_config: {{{CERTS}, client_auth_type: Maybe}}", "client_auth_type"),
            (f"tls_server_config: {{{CERTS}, cipher_suites: [RC4]}}", "unknown cipher 'RC4'"),
            ("http_server_config: {http3: true}", r"unknown key http_server_config\.http3"),
            ("http_server_config: {headers: {X-Custom: a}}", "'X-Custom' can not be configured"),
            ("http_server_config: {headers: {X-Frame-Options: allow}}", "deny, sameorigin"),
            (
                'http_server_config: {headers: {Content-Security-Policy: "a\\nb"}}',
                "control character",
            ),
            ("basic_auth_users: {alice: plaintext}", r"basic_auth_users\.alice: not a bcrypt"),
            (f"basic_auth_users: {{alice: '$2y$03${SALTED}'}}", "cost outside 4..31"),
            (
                f"basic_auth_users: {{alice: '$2y$10${SALTED[:21]}f{SALTED[22:]}'}}",
                r"basic_auth_users\.alice: bcrypt cannot read this hash",
            ),
            ("basic_auth_users: [alice]", "mapping"),
            ("a: [", "YAML"),
        ],
    )
    def test_parse_rejects(self, content: str, message: str, config_dir: Path) -> None:
        """Given an invalid file, when parsed, then WebConfigError says what is wrong."""
        with pytest.raises(WebConfigError, match=message):
            parse_web_config(content, config_dir)

    def test_load_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(WebConfigError, match="cannot read"):
            LiveWebConfig.load(str(tmp_path / "missing.yml"))

    @given(st.text(max_size=300))
    @settings(max_examples=300)
    def test_parse_fuzz(self, content: str) -> None:
        """Given arbitrary text, when parsed, then a WebConfig or WebConfigError only."""
        try:
            config = parse_web_config(content, Path("/nonexistent"))
        except WebConfigError:
            return
        assert isinstance(config, WebConfig)
