"""TLS settings for worker servers and worker clients, loaded from PEM files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc


def read_pem(path: str | Path, what: str) -> bytes:
    """Return the bytes of ``path``; ``OSError`` names ``what`` and the path."""
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise OSError(f"cannot read {what} {str(path)!r}: {error.strerror}") from None


@dataclass(frozen=True, kw_only=True)
class ServerTls:
    """A worker's certificate and key; with ``client_ca``, clients must present
    a certificate signed by it (mutual TLS)."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """Load the files and build gRPC server credentials."""
        key = read_pem(self.key_file, "TLS key")
        cert = read_pem(self.cert_file, "TLS certificate")
        root = read_pem(self.client_ca_file, "client CA") if self.client_ca_file else None
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=root, require_client_auth=root is not None
        )


@dataclass(frozen=True, kw_only=True)
class ClientTls:
    """How a client verifies workers (``ca_file``, else the system roots) and,
    for mutual TLS, the certificate it presents. Hashable, so it keys the
    channel pool."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("a client certificate needs both cert_file and key_file")

    def credentials(self) -> grpc.ChannelCredentials:
        """Load the files and build gRPC channel credentials."""
        return grpc.ssl_channel_credentials(
            root_certificates=read_pem(self.ca_file, "CA") if self.ca_file else None,
            private_key=read_pem(self.key_file, "client key") if self.key_file else None,
            certificate_chain=read_pem(self.cert_file, "client certificate")
            if self.cert_file
            else None,
        )

    def channel_options(self) -> list[tuple[str, str]]:
        """The channel options this setting needs (the server-name override)."""
        if self.server_name is None:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]
