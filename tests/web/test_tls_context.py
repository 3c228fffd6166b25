"""SSL contexts that follow their certificate files, over real TLS handshakes."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from support.clock import Clock
from support.https import presented_serial
from support.tls import CertFiles, issue
from support.waiting import eventually

from wool_idle.web.tls_context import Opened, ReloadingContext
from wool_idle.web.yaml_fields import ConfigFileError


@pytest.fixture
def server_files(tmp_path: Path, tls_material) -> CertFiles:
    """A copy of the server certificate and key, free to rotate."""
    files = CertFiles(str(tmp_path / "server.crt"), str(tmp_path / "server.key"))
    shutil.copy(tls_material.server.cert, files.cert)
    shutil.copy(tls_material.server.key, files.key)
    return files


def server_context(files: CertFiles, clock: Clock) -> ReloadingContext:
    def configure(context: ssl.SSLContext, opened: Opened) -> None:
        context.load_cert_chain(opened(files.cert), opened(files.key))

    return ReloadingContext(
        ssl.PROTOCOL_TLS_SERVER, configure=configure, files=[files.cert, files.key], clock=clock
    )


@pytest.fixture
def serving() -> Iterator[Callable[[ssl.SSLContext], int]]:
    """Serve TLS handshakes with a given server context on a loopback port, through
    ``wrap_bio`` as asyncio does; returns a function giving the port."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start(context: ssl.SSLContext) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0.2)

        def loop() -> None:
            with listener:
                while not stop.is_set():
                    try:
                        conn, _ = listener.accept()
                    except TimeoutError:
                        continue
                    with conn:
                        handshake(conn, context)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        threads.append(thread)
        return int(listener.getsockname()[1])

    yield start
    stop.set()
    for thread in threads:
        thread.join(timeout=5)


def handshake(conn: socket.socket, context: ssl.SSLContext) -> None:
    """Answer one TLS handshake on ``conn`` over memory BIOs."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_side=True)
    conn.settimeout(5)
    while True:
        try:
            tls.do_handshake()
            conn.sendall(outgoing.read())
            return
        except ssl.SSLWantReadError:
            conn.sendall(outgoing.read())
            data = conn.recv(65536)
            if not data:
                return
            incoming.write(data)
        except (ssl.SSLError, OSError):
            return


def presented(port: int, ca: str) -> int:
    return presented_serial(f"https://127.0.0.1:{port}", ca)


def presented_serial_of(cert: str) -> int:
    """The serial number of the certificate in file ``cert``."""
    return x509.load_pem_x509_certificate(Path(cert).read_bytes()).serial_number


class TestReloadingContext:
    def test_current_rebuilt_when_files_changed(self, server_files, tls_material, serving) -> None:
        """Given a server context and rotated files, when handshakes come after the
        recheck interval, then the files are read again on a thread and the next
        handshakes present the new certificate; before the interval, the old one."""
        # Arrange
        clock = Clock()
        context = server_context(server_files, clock)
        port = serving(context)
        first = presented(port, tls_material.ca)
        # Act
        rotated = issue(tls_material.ca, server_files, ("localhost",))
        clock.now = 0.5
        within_interval = presented(port, tls_material.ca)
        clock.now = 1.5
        presents_rotated = eventually(lambda: presented(port, tls_material.ca) == rotated)
        # Assert
        assert within_interval == first
        assert presents_rotated and rotated != first

    def test_current_unchanged_files_keep_the_context(self, server_files) -> None:
        """Given files that did not change, when looked at again, then the same
        context (nothing rebuilt)."""
        clock = Clock()
        context = server_context(server_files, clock)
        clock.now = 10.0
        assert context.current() is context

    def test_current_bad_files_keep_the_last_good(
        self, server_files, tls_material, serving, caplog
    ) -> None:
        """Given files replaced by a key that does not fit the certificate, when
        handshakes come, then they present the last good certificate, the failure is
        logged once, and good files are picked up once they arrive."""
        # Arrange
        clock = Clock()
        context = server_context(server_files, clock)
        port = serving(context)
        first = presented(port, tls_material.ca)
        shutil.copy(tls_material.clients["exporter"].key, server_files.key)
        caplog.set_level(logging.WARNING, "wool_idle.followed")
        # Act
        served = []
        for step in range(1, 4):
            clock.now = 2.0 * step
            served.append(presented(port, tls_material.ca))
            assert eventually(lambda: "keeping the TLS files" in caplog.text)
        rotated = issue(tls_material.ca, server_files, ("localhost",))
        clock.now = 10.0
        presents_rotated = eventually(lambda: presented(port, tls_material.ca) == rotated)
        # Assert
        assert served == [first, first, first]
        assert len([r for r in caplog.records if "keeping the TLS files" in r.message]) == 1
        assert presents_rotated

    @pytest.mark.timeout(60)  # reading a FIFO would wait for a writer: fail, not hang
    def test_current_files_turned_fifo_keep_the_last_good(
        self, server_files, tls_material, serving, caplog
    ) -> None:
        """Given the certificate replaced by a FIFO nobody writes to, when handshakes
        come, then they present the last good certificate, and the read names the
        FIFO (it never waits for a writer)."""
        # Arrange
        clock = Clock()
        context = server_context(server_files, clock)
        port = serving(context)
        first = presented(port, tls_material.ca)
        os.unlink(server_files.cert)
        os.mkfifo(server_files.cert)
        clock.now = 2.0
        # Act
        served = presented(port, tls_material.ca)
        refused = eventually(lambda: "a FIFO, not a regular file" in caplog.text)
        served_after = presented(port, tls_material.ca)
        # Assert
        assert served == served_after == first
        assert refused

    @pytest.mark.timeout(60)  # OpenSSL opening a FIFO would wait for a writer: fail, not hang
    def test_construct_path_swapped_for_a_fifo_after_the_check_loads_what_was_read(
        self, server_files, tls_material, serving
    ) -> None:
        """Given a certificate path swapped for a FIFO nobody writes to after it was
        read and checked (the moment before OpenSSL would open it), when the context
        is built, then it is built from the bytes read: no wait for a writer, and
        handshakes present that certificate."""
        # Arrange
        expected = presented_serial_of(server_files.cert)

        def configure(context: ssl.SSLContext, opened: Opened) -> None:
            os.unlink(server_files.cert)
            os.mkfifo(server_files.cert)
            context.load_cert_chain(opened(server_files.cert), opened(server_files.key))

        # Act
        context = ReloadingContext(
            ssl.PROTOCOL_TLS_SERVER,
            configure=configure,
            files=[server_files.cert, server_files.key],
        )
        served = presented(serving(context), tls_material.ca)
        # Assert
        assert served == expected

    def test_construct_opened_missing_file_raises_its_error(self, tmp_path: Path) -> None:
        """Given a file that cannot be read, when configure asks for it, then the
        read's OSError names why (configure turns it into the key's error)."""
        seen: list[OSError] = []

        def configure(context: ssl.SSLContext, opened: Opened) -> None:
            try:
                opened(str(tmp_path / "missing.crt"))
            except OSError as error:
                seen.append(error)
                raise ConfigFileError(f"cert_file: {error.strerror}") from None

        with pytest.raises(ConfigFileError, match="cert_file: No such file or directory"):
            ReloadingContext(
                ssl.PROTOCOL_TLS_SERVER, configure=configure, files=[str(tmp_path / "missing.crt")]
            )
        assert len(seen) == 1

    def test_construct_bad_files_fail(self, tmp_path: Path) -> None:
        """Given files that cannot be loaded at start, then the configure error
        propagates (the first build must succeed)."""

        def configure(context: ssl.SSLContext, opened: Opened) -> None:
            raise ConfigFileError("cert_file 'x': No such file or directory")

        with pytest.raises(ConfigFileError, match="cert_file"):
            ReloadingContext(
                ssl.PROTOCOL_TLS_SERVER, configure=configure, files=[str(tmp_path / "x")]
            )

    def test_wrap_bio_client_server_name_replaces_host(self, tls_material, serving) -> None:
        """Given a client context with server_name `localhost`, when it connects to
        127.0.0.1 asking for the name `wrong.example`, then the name sent and
        verified is `localhost`."""
        # Arrange
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(tls_material.server.cert, tls_material.server.key)
        seen: list[str | None] = []
        server.sni_callback = lambda obj, name, ctx: seen.append(name)
        port = serving(server)
        client = ReloadingContext(
            ssl.PROTOCOL_TLS_CLIENT,
            configure=lambda c, opened: c.load_verify_locations(opened(tls_material.ca)),
            files=[tls_material.ca],
            server_name="localhost",
        )
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        # Act
        tls = client.wrap_bio(incoming, outgoing, server_hostname="wrong.example")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            while True:
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    raw.sendall(outgoing.read())
                    incoming.write(raw.recv(65536))
        # Assert
        assert tls.server_hostname == "localhost"
        assert seen == ["localhost"]
