"""The TLS flags: a worker's server certificate, and a client's way to workers.

Every PEM file is checked at start: a certificate or CA file must hold a
certificate that parses, and a key must parse and match its certificate. A
bad file exits 2 naming its flag, rather than failing later as "cannot bind"
or as every worker unreachable.
"""

from __future__ import annotations

import argparse
import ssl

from wool_idle.cli.parser import Parser
from wool_idle.cli.values import CERTIFICATES, READABLE_FILE, TEXT
from wool_idle.files import in_memory_file
from wool_idle.worker.tls import ClientTls, ServerTls, load_key_pair, read_pem


def add_server_tls_flags(parser: Parser) -> None:
    """Add ``--tls-cert``, ``--tls-key`` and ``--tls-client-ca`` (a worker's own TLS)."""
    tls = parser.section("TLS", "serve over TLS; mutual TLS with --tls-client-ca")
    tls.add("--tls-cert", CERTIFICATES, "PEM server certificate (enables TLS)", default=None)
    tls.add("--tls-key", READABLE_FILE, "PEM key of --tls-cert", default=None)
    tls.add(
        "--tls-client-ca",
        CERTIFICATES,
        "PEM CA that client certificates must chain to (enables mutual TLS)",
        default=None,
    )


def server_tls(parser: Parser, args: argparse.Namespace) -> ServerTls | None:
    """The ``ServerTls`` the flags ask for, or None; exits 2 on a missing or bad file."""
    if not (args.tls_cert or args.tls_key or args.tls_client_ca):
        return None
    if not (args.tls_cert and args.tls_key):
        parser.error("argument --tls-cert/--tls-key: TLS needs both")
    _check_key(parser, args.tls_cert, args.tls_key)
    return ServerTls(
        cert_file=args.tls_cert, key_file=args.tls_key, client_ca_file=args.tls_client_ca
    )


def add_client_tls_flags(parser: Parser) -> None:
    """Add the flags of TLS connections to workers."""
    tls = parser.section("TLS to workers", "connect to workers over TLS")
    tls.add("--tls-ca", CERTIFICATES, "PEM CA bundle to verify workers (enables TLS)", default=None)
    tls.add("--tls-cert", CERTIFICATES, "PEM client certificate for mutual TLS", default=None)
    tls.add("--tls-key", READABLE_FILE, "PEM key of --tls-cert", default=None)
    tls.add("--tls-server-name", TEXT, "expected name in the workers' certificates", default=None)


def client_tls(parser: Parser, args: argparse.Namespace) -> ClientTls | None:
    """The ``ClientTls`` the flags ask for, or None; exits 2 on a missing or bad file."""
    if not any((args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name)):
        return None
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("argument --tls-cert/--tls-key: give both or neither")
    if args.tls_cert:
        _check_key(parser, args.tls_cert, args.tls_key)
    return ClientTls(
        ca_file=args.tls_ca,
        cert_file=args.tls_cert,
        key_file=args.tls_key,
        server_name=args.tls_server_name,
    )


def _check_key(parser: Parser, cert: str, key: str) -> None:
    """Exit 2 naming ``--tls-key`` unless ``key`` is an unencrypted PEM key that
    matches ``cert`` (which ``CERTIFICATES`` already checked)."""
    contents = {}
    for flag, path, what in (
        ("--tls-cert", cert, "TLS certificate"),
        ("--tls-key", key, "TLS key"),
    ):
        try:
            contents[flag] = read_pem(path, what)
        except OSError as error:  # changed since the flag's own check
            parser.error(f"argument {flag}: {error}")
    try:  # OpenSSL loads the bytes read and checked, never a path swapped since
        with (
            in_memory_file(contents["--tls-cert"]) as cert_copy,
            in_memory_file(contents["--tls-key"]) as key_copy,
        ):
            load_key_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), cert_copy, key_copy)
    except ssl.SSLError as error:
        reason = error.reason or "not PEM, or encrypted"
        parser.error(f"argument --tls-key: {key!r} is no key of --tls-cert {cert!r} ({reason})")
    except OSError as error:
        parser.error(f"argument --tls-key: {error}")
