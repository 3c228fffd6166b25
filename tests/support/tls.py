"""A throw-away certificate authority with server and client certificates."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class CertFiles:
    cert: str
    key: str


@dataclass(frozen=True)
class TlsMaterial:
    ca: str
    server: CertFiles
    clients: dict[str, CertFiles]
    other_ca: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(
    directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> CertFiles:
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return CertFiles(str(cert_path), str(key_path))


def _certificate(
    subject: str,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    key: ec.EllipticCurvePrivateKey,
    sans: list[x509.GeneralName] | None,
    is_ca: bool,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _authority(directory: Path, stem: str) -> tuple[x509.Name, ec.EllipticCurvePrivateKey, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(f"{stem} test CA")
    cert = _certificate(f"{stem} test CA", name, key, key, None, is_ca=True)
    return name, key, _write(directory, stem, cert, key).cert


def make_tls_material(directory: Path, client_identities: tuple[str, ...]) -> TlsMaterial:
    """A CA, a server certificate for localhost/127.0.0.1, and one client
    certificate per identity (the identity is the certificate's DNS SAN)."""
    ca_name, ca_key, ca_path = _authority(directory, "ca")
    _, _, other_ca = _authority(directory, "other-ca")
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    server = _write(
        directory,
        "server",
        _certificate("localhost", ca_name, ca_key, server_key, server_sans, is_ca=False),
        server_key,
    )
    clients = {}
    for identity in client_identities:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(identity, ca_name, ca_key, key, [x509.DNSName(identity)], is_ca=False)
        clients[identity] = _write(directory, f"client-{identity}", cert, key)
    return TlsMaterial(ca=ca_path, server=server, clients=clients, other_ca=other_ca)


def client_flags(material: TlsMaterial, identity: str) -> list[str]:
    """The wool-idle client TLS flags presenting ``identity``'s certificate."""
    files = material.clients[identity]
    return ["--tls-ca", material.ca, "--tls-cert", files.cert, "--tls-key", files.key]


def issue(ca: str, files: CertFiles, names: tuple[str, ...]) -> int:
    """Write a new certificate and key to ``files`` (replacing what is there) for
    the DNS ``names`` and 127.0.0.1, signed by the CA whose certificate is
    ``ca`` (its key lies beside it, ``.key``); return the new serial number."""
    ca_cert = x509.load_pem_x509_certificate(Path(ca).read_bytes())
    ca_key = serialization.load_pem_private_key(Path(ca).with_suffix(".key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in names]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = _certificate(names[0], ca_cert.subject, ca_key, key, sans, is_ca=False)
    directory = Path(files.cert).parent
    written = _write(directory, "issued", cert, key)
    Path(written.key).replace(files.key)
    Path(written.cert).replace(files.cert)
    return cert.serial_number


def encrypt_key_file(path: str, password: bytes = b"secret") -> None:
    """Rewrite the PEM key in ``path`` encrypted with ``password``."""
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    Path(path).write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password),
        )
    )
