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
from support.clock import Clock
from support.https import presented_serial
from support.tls import CertFiles, issue

from wool_idle.web.tls_context import ReloadingContext
from wool_idle.web.yaml_fields import ConfigFileError


@pytest.fixture
def server_files(tmp_path: Path, tls_material) -> CertFiles:
    """A copy of the server certificate and key, free to rotate."""
    files = CertFiles(str(tmp_path / "server.crt"), str(tmp_path / "server.key"))
    shutil.copy(tls_material.server.cert, files.cert)
    shutil.copy(tls_material.server.key, files.key)
    return files


def server_context(files: CertFiles, clock: Clock) -> ReloadingContext:
    def configure(context: ssl.SSLContext) -> None:
        context.load_cert_chain(files.cert, files.key)

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


class TestReloadingContext:
    def test_current_rebuilt_when_files_changed(self, server_files, tls_material, serving) -> None:
        """Given a server context and rotated files, when the next handshake comes
        after the recheck interval, then it presents the new certificate; before the
        interval, the old one."""
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
        after_interval = presented(port, tls_material.ca)
        # Assert
        assert within_interval == first
        assert after_interval == rotated != first

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
        caplog.set_level(logging.WARNING, "wool_idle.web.tls_context")
        # Act
        served = []
        for step in range(1, 4):
            clock.now = 2.0 * step
            served.append(presented(port, tls_material.ca))
        rotated = issue(tls_material.ca, server_files, ("localhost",))
        clock.now = 10.0
        after_fix = presented(port, tls_material.ca)
        # Assert
        assert served == [first, first, first]
        assert len([r for r in caplog.records if "keeping the TLS files" in r.message]) == 1
        assert after_fix == rotated

    def test_current_files_turned_fifo_keep_the_last_good(
        self, server_files, tls_material, serving
    ) -> None:
        """Given the certificate replaced by a FIFO nobody writes to, when a handshake
        comes, then it presents the last good certificate at once (the check never
        waits for a writer)."""
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
        # Assert
        assert served == first

    def test_construct_bad_files_fail(self, tmp_path: Path) -> None:
        """Given files that cannot be loaded at start, then the configure error
        propagates (the first build must succeed)."""

        def configure(context: ssl.SSLContext) -> None:
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
            configure=lambda c: c.load_verify_locations(tls_material.ca),
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
