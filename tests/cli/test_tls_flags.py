"""The TLS flags: every PEM file is checked at start, a bad one exits 2 naming its flag."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from wool_idle.cli import build_parser, main
from wool_idle.cli.tls_flags import client_tls, server_tls
from wool_idle.worker.tls import ClientTls, ServerTls

GARBAGE_PEM = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
GARBAGE_KEY = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"


@pytest.fixture
def bad_files(tmp_path: Path, tls_material) -> dict[str, str]:
    """PEM-looking files that do not parse, an encrypted key, and the server certificate
    with a NUL byte after it (OpenSSL reads past it; gRPC would refuse it)."""
    paths = {"cert": tmp_path / "bad.crt", "key": tmp_path / "bad.key", "text": tmp_path / "t"}
    paths["cert"].write_text(GARBAGE_PEM)
    paths["key"].write_text(GARBAGE_KEY)
    paths["text"].write_text("not PEM at all\n")
    os.mkfifo(tmp_path / "fifo")  # opening it for reading would wait for a writer
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    nul_cert = tmp_path / "nul.crt"
    nul_cert.write_bytes(Path(tls_material.server.cert).read_bytes() + b"\0")
    files = {**paths, "encrypted": encrypted, "fifo": tmp_path / "fifo", "nul_cert": nul_cert}
    return {name: str(path) for name, path in files.items()}


def server_cases(m, bad: dict[str, str]) -> list[tuple[list[str], str]]:
    cert, key, ca = m.server.cert, m.server.key, m.ca
    return [
        (["--tls-cert", bad["cert"], "--tls-key", key], "--tls-cert"),
        (["--tls-cert", bad["text"], "--tls-key", key], "--tls-cert"),
        (["--tls-cert", cert, "--tls-key", bad["key"]], "--tls-key"),
        (["--tls-cert", cert, "--tls-key", bad["encrypted"]], "--tls-key"),
        (["--tls-cert", cert, "--tls-key", m.clients["exporter"].key], "--tls-key"),
        (["--tls-cert", cert, "--tls-key", key, "--tls-client-ca", bad["cert"]], "--tls-client-ca"),
        (["--tls-cert", key, "--tls-key", cert, "--tls-client-ca", ca], "--tls-cert"),
        (["--tls-cert", bad["fifo"], "--tls-key", key], "--tls-cert"),
        (["--tls-cert", cert, "--tls-key", bad["fifo"]], "--tls-key"),
        (["--tls-cert", bad["nul_cert"], "--tls-key", key], "--tls-cert"),
        (["--tls-key", bad["fifo"]], "--tls-key"),
        (["--tls-cert", cert, "--tls-key", key, "--tls-client-ca", bad["fifo"]], "--tls-client-ca"),
    ]


def client_cases(m, bad: dict[str, str]) -> list[tuple[list[str], str]]:
    cert, key, ca = m.clients["exporter"].cert, m.clients["exporter"].key, m.ca
    return [
        (["--tls-ca", bad["cert"]], "--tls-ca"),
        (["--tls-ca", bad["text"]], "--tls-ca"),
        (["--tls-ca", ca, "--tls-cert", bad["cert"], "--tls-key", key], "--tls-cert"),
        (["--tls-ca", ca, "--tls-cert", cert, "--tls-key", bad["key"]], "--tls-key"),
        (["--tls-ca", ca, "--tls-cert", cert, "--tls-key", m.server.key], "--tls-key"),
        (["--tls-ca", bad["fifo"]], "--tls-ca"),
        (["--tls-ca", ca, "--tls-cert", bad["fifo"], "--tls-key", key], "--tls-cert"),
        (["--tls-ca", ca, "--tls-cert", cert, "--tls-key", bad["fifo"]], "--tls-key"),
    ]


def exits_2_naming(args: list[str], flag: str, capsys) -> bool:
    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    return exited.value.code == 2 and len(err.splitlines()) == 1 and f"argument {flag}" in err


@pytest.mark.timeout(60)  # a FIFO read would hang: fail, not hang
class TestServerTls:
    def test_server_tls_bad_pem_exits_2_naming_flag(self, tls_material, bad_files, capsys) -> None:
        """Given a worker whose certificate, key or client CA file does not parse (or the
        key is encrypted or belongs to another certificate, or a file is a FIFO), when it
        starts, then it exits 2 naming that flag instead of failing to bind (or hanging)."""
        # Arrange
        cases = server_cases(tls_material, bad_files)
        # Act
        outcomes = [
            exits_2_naming(["worker", "--listen", "127.0.0.1:0", *flags], flag, capsys)
            for flags, flag in cases
        ]
        # Assert
        assert outcomes == [True] * len(cases)

    def test_server_tls_good_files(self, tls_material) -> None:
        """Given matching certificate, key and client CA, then the ServerTls of them."""
        # Arrange
        m = tls_material
        parser = build_parser()
        flags = ["--tls-cert", m.server.cert, "--tls-key", m.server.key, "--tls-client-ca", m.ca]
        args = parser.parse_args(["worker", *flags])
        # Act
        tls = server_tls(args.parser, args)
        # Assert
        assert tls == ServerTls(cert_file=m.server.cert, key_file=m.server.key, client_ca_file=m.ca)


@pytest.mark.timeout(60)  # a FIFO read would hang: fail, not hang
class TestClientTls:
    @pytest.mark.parametrize("command", [["idle"], ["stop"]])
    def test_client_tls_bad_pem_exits_2_naming_flag(
        self, command: list[str], tls_material, bad_files, capsys
    ) -> None:
        """Given a client whose CA, certificate or key file does not parse (or the key
        is another certificate's, or a file is a FIFO), when it starts, then it exits 2
        naming that flag instead of reporting the worker unreachable (or hanging)."""
        # Arrange
        cases = client_cases(tls_material, bad_files)
        prefix = [*command, "127.0.0.1:1", "--timeout", "1s"]
        # Act
        outcomes = [exits_2_naming([*prefix, *flags], flag, capsys) for flags, flag in cases]
        # Assert
        assert outcomes == [True] * len(cases)

    def test_client_tls_good_files(self, tls_material) -> None:
        """Given a CA and a matching client certificate and key, then their ClientTls."""
        # Arrange
        m, client = tls_material, tls_material.clients["autoscaler"]
        flags = ["--tls-ca", m.ca, "--tls-cert", client.cert, "--tls-key", client.key]
        args = build_parser().parse_args(["exporter", *flags])
        # Act
        tls = client_tls(args.parser, args)
        # Assert
        assert tls == ClientTls(ca_file=m.ca, cert_file=client.cert, key_file=client.key)
