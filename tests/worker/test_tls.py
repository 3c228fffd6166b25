"""TLS files read again: the worker's certificate and client CA on every handshake,
the last good files kept when new ones are bad."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import ssl
from pathlib import Path

import pytest
from support.tls import CertFiles, TlsMaterial, encrypt_key_file, issue, make_tls_material
from support.waiting import eventually

from wool_idle.exceptions import TransientRpcError
from wool_idle.worker import ClientTls, LocalWorker, ServerTls, WorkerConnection
from wool_idle.worker.tls import UTF8_BOM, PemPaths


@pytest.fixture
def material(tmp_path: Path) -> TlsMaterial:
    """TLS files of this test alone (the tests rewrite them)."""
    return make_tls_material(tmp_path, ("caller",))


def peer_serial(address: str, ca: str) -> int:
    """Handshake with ``address`` as a plain TLS client; the serial it was shown."""
    port = int(address.rpartition(":")[2])
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        certificate = tls.getpeercert()
    assert certificate is not None
    return int(str(certificate["serialNumber"]), 16)


def server_tls(material: TlsMaterial, client_ca: str | None = None) -> ServerTls:
    return ServerTls(
        cert_file=material.server.cert, key_file=material.server.key, client_ca_file=client_ca
    )


class TestServerTls:
    async def test_credentials_next_handshake_presents_rotated_certificate(
        self, material: TlsMaterial
    ) -> None:
        """Given a worker process serving TLS from files, when the files are
        rewritten with a new certificate from the same CA, then the next handshake
        presents the new certificate and clients keep getting answers."""
        # Arrange
        flags = ["--tls-cert", material.server.cert, "--tls-key", material.server.key]
        worker = LocalWorker("localhost:0", extra_args=flags, tls=ClientTls(ca_file=material.ca))
        address = await worker.start()
        try:
            before = await asyncio.to_thread(peer_serial, address, material.ca)
            # Act
            serial = issue(material.ca, material.server, ("rotated.localhost", "localhost"))
            after = await asyncio.to_thread(peer_serial, address, material.ca)
            async with WorkerConnection(address, tls=ClientTls(ca_file=material.ca)) as connection:
                idle = await connection.idle_time(timeout=5)
        finally:
            await worker.kill()
        # Assert
        assert before != serial
        assert after == serial
        assert idle > 0.0

    @pytest.mark.parametrize("damage", ["garbage_cert", "foreign_key", "missing_key"])
    async def test_credentials_keep_last_good_when_files_are_bad(
        self, start_server, material: TlsMaterial, tmp_path: Path, caplog, damage: str
    ) -> None:
        """Given a TLS worker, when its files become unparsable, mismatched (a key
        that does not fit the certificate) or missing, then handshakes keep the
        last good certificate and a warning names the problem; once the files are
        good again, the next handshake uses them."""
        # Arrange
        server = await start_server("localhost:0", tls=server_tls(material))
        before = await asyncio.to_thread(peer_serial, server.address, material.ca)
        spare = issue(
            material.ca, CertFiles(str(tmp_path / "s.crt"), str(tmp_path / "s.key")), ("x",)
        )
        # Act
        if damage == "garbage_cert":
            Path(material.server.cert).write_text("-----BEGIN CERTIFICATE-----\nnope\n")
        elif damage == "foreign_key":
            shutil.copy(tmp_path / "s.key", material.server.key)
        else:
            Path(material.server.key).unlink()
        with caplog.at_level(logging.WARNING, logger="wool_idle.followed"):
            during = await asyncio.to_thread(peer_serial, server.address, material.ca)
        serial = issue(material.ca, material.server, ("localhost",))
        after = await asyncio.to_thread(peer_serial, server.address, material.ca)
        # Assert
        assert during == before != spare
        assert "keeping the TLS files loaded before" in caplog.text
        assert after == serial != before

    async def test_credentials_read_client_ca_again(
        self, start_server, material: TlsMaterial, tmp_path: Path
    ) -> None:
        """Given a worker requiring client certificates from the CA in a file, when
        that file is rewritten with another CA, then a client certified by the
        other CA, refused before, is accepted on its next connection."""
        # Arrange
        client_ca = tmp_path / "client-ca.crt"
        shutil.copy(material.ca, client_ca)
        server = await start_server("localhost:0", tls=server_tls(material, str(client_ca)))
        client = CertFiles(str(tmp_path / "o.crt"), str(tmp_path / "o.key"))
        issue(material.other_ca, client, ("caller",))
        tls = ClientTls(ca_file=material.ca, cert_file=client.cert, key_file=client.key)
        async with WorkerConnection(server.address, tls=tls) as connection:
            with pytest.raises(TransientRpcError):
                await connection.idle_time(timeout=2)
        # Act
        shutil.copy(material.other_ca, client_ca)
        async with WorkerConnection(server.address, tls=tls) as connection:
            idle = await connection.idle_time(timeout=5)
        # Assert
        assert idle > 0.0

    async def test_credentials_files_with_a_byte_order_mark_work(
        self, start_server, material: TlsMaterial
    ) -> None:
        """Given every PEM file saved with a UTF-8 byte order mark (as some editors
        save UTF-8), a worker requiring client certificates from its CA, and a client
        verifying it, when the client calls, then the call succeeds (gRPC refuses the
        mark, so it is taken off as OpenSSL would skip it)."""
        # Arrange
        caller = material.clients["caller"]
        for path in (material.ca, material.server.cert, material.server.key, caller.cert):
            Path(path).write_bytes(UTF8_BOM + Path(path).read_bytes())
        server = await start_server("localhost:0", tls=server_tls(material, material.ca))
        tls = ClientTls(ca_file=material.ca, cert_file=caller.cert, key_file=caller.key)
        # Act
        async with WorkerConnection(server.address, tls=tls) as connection:
            idle = await connection.idle_time(timeout=5)
        # Assert
        assert idle >= 0.0


class TestPemPathsFollowed:
    @pytest.mark.parametrize(
        ("broken", "message"),
        [
            ("missing_cert", "cannot read TLS certificate"),
            ("garbage_cert", "invalid TLS certificate"),
            ("garbage_ca", "invalid CA"),
            ("fifo_cert", "cannot read TLS certificate .*: a FIFO, not a regular file"),
            ("fifo_ca", "cannot read CA .*: a FIFO, not a regular file"),
        ],
    )
    @pytest.mark.timeout(30)  # a FIFO read would hang: fail, not hang
    def test_init_bad_files_raise_naming_them(
        self, material: TlsMaterial, broken: str, message: str
    ) -> None:
        """Given TLS files that are missing, unparsable or FIFOs, when they are first
        loaded, then OSError says which file and why."""
        # Arrange
        files = {"ca": material.ca, "cert": material.server.cert}
        target = Path(files[broken.split("_")[1]])
        if broken.startswith("missing"):
            target.unlink()
        elif broken.startswith("fifo"):
            target.unlink()
            os.mkfifo(target)
        else:
            target.write_text("not pem\n")
        paths = PemPaths(material.ca, material.server.cert, material.server.key)
        # Act
        with pytest.raises(OSError, match=message) as raised:
            paths.followed(interval=1.0)
        # Assert
        assert str(target) in str(raised.value)

    def test_current_reads_again_on_a_thread_after_interval(self, material: TlsMaterial) -> None:
        """Given followed files with a 1s interval on a fake clock, when the files
        change, then they are kept as they were until the interval passed, then read
        again on a thread, after which they have the new contents."""
        # Arrange
        now = [100.0]
        paths = PemPaths(material.ca, material.server.cert, material.server.key)
        files = paths.followed(interval=1.0, clock=lambda: now[0])
        first = files.current()
        # Act
        issue(material.ca, material.server, ("localhost",))
        now[0] += 0.5
        early = files.current()
        now[0] += 0.5
        files.current()  # starts the read
        changed = eventually(lambda: files.current() != first)
        # Assert
        assert early is first
        assert changed
        assert files.current().cert == Path(material.server.cert).read_bytes()

    def test_load_unchanged_files_give_the_previous_set(self, material: TlsMaterial) -> None:
        """Given files loaded once, when loaded again unchanged, then the same set
        itself (nothing checked again); once they change, a new set."""
        # Arrange
        paths = PemPaths(material.ca, material.server.cert, material.server.key)
        first = paths.load()
        # Act
        again = paths.load(first)
        issue(material.ca, material.server, ("localhost",))
        changed = paths.load(first)
        # Assert
        assert again is first
        assert changed != first

    def test_load_encrypted_key_is_refused_without_asking_for_a_password(
        self, material: TlsMaterial
    ) -> None:
        """Given a key rotated in encrypted, when the files are loaded, then OSError
        names the pair (OpenSSL is never left to ask for a password and wait)."""
        encrypt_key_file(material.server.key)
        paths = PemPaths(material.ca, material.server.cert, material.server.key)
        with pytest.raises(OSError, match="its unencrypted key") as raised:
            paths.load()
        assert material.server.key in str(raised.value)

    def test_load_ca_bundle_with_non_ascii_comments(self, material: TlsMaterial) -> None:
        """Given a CA bundle with a UTF-8 title and a Latin-1 comment between its
        certificates (as curl's cacert.pem has), when loaded, then it is taken."""
        ca = Path(material.ca)
        ca.write_bytes("## Bündel \u2014 CA\n".encode() + ca.read_bytes() + b"# \xe9t\xe9\n")
        pems = PemPaths(material.ca, material.server.cert, material.server.key).load()
        assert pems.ca == ca.read_bytes()

    def test_load_nul_byte_is_refused(self, material: TlsMaterial) -> None:
        """Given a CA file holding a NUL byte (not PEM text: gRPC would refuse it at
        the handshake, after OpenSSL's check passed), when loaded, then OSError names
        the file."""
        Path(material.ca).write_bytes(Path(material.ca).read_bytes() + b"\0")
        paths = PemPaths(material.ca, material.server.cert, material.server.key)
        with pytest.raises(OSError, match="a NUL byte, so not PEM text") as raised:
            paths.load()
        assert material.ca in str(raised.value)
