"""Claiming a Unix socket path: a live socket is in use, a leftover is removed."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from wool_idle.cli import main
from wool_idle.unix_socket import claim_unix_socket
from wool_idle.web.site import serve_app
from wool_idle.worker import WorkerConnection


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path (``tmp_path`` can exceed the 107-byte limit)."""
    path = Path(tempfile.mkdtemp(prefix="wi-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def live_socket(short_dir: Path) -> Iterator[tuple[str, socket.socket]]:
    """A Unix socket path another process (here: a plain socket) listens on."""
    path = str(short_dir / "live.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    yield path, listener
    listener.close()


def still_serves(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        return client.connect_ex(path) == 0


class TestClaimUnixSocket:
    def test_claim_missing_path_is_free(self, short_dir: Path) -> None:
        """Given a path where nothing is, when claimed, then nothing happens."""
        # Act
        claim_unix_socket(str(short_dir / "new.sock"))
        # Assert
        assert list(short_dir.iterdir()) == []

    def test_claim_live_socket_is_in_use(self, live_socket: tuple[str, socket.socket]) -> None:
        """Given a socket a process listens on, when claimed, then EADDRINUSE saying
        the address is in use, and the socket is left where it is, still serving."""
        # Arrange
        path, _ = live_socket
        # Act
        with pytest.raises(OSError, match="address in use") as refused:
            claim_unix_socket(path)
        # Assert
        assert refused.value.errno == errno.EADDRINUSE
        assert still_serves(path)

    def test_claim_leftover_socket_is_removed(self, short_dir: Path) -> None:
        """Given a socket file nobody listens on (its process died), when claimed,
        then it is removed so that the path can be bound again."""
        # Arrange
        path = str(short_dir / "stale.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
            dead.bind(path)
        # Act
        claim_unix_socket(path)
        # Assert
        assert not os.path.lexists(path)

    @pytest.mark.parametrize("kind", ["file", "directory", "fifo"])
    def test_claim_other_file_is_refused_and_kept(self, short_dir: Path, kind: str) -> None:
        """Given a regular file, a directory or a FIFO at the path, when claimed,
        then OSError saying it is not a socket, and it is left untouched."""
        # Arrange
        path = short_dir / "thing"
        {"file": path.touch, "directory": path.mkdir, "fifo": lambda: os.mkfifo(path)}[kind]()
        # Act
        with pytest.raises(OSError, match="exists and is not a socket"):
            claim_unix_socket(str(path))
        # Assert
        assert os.path.lexists(path)


class TestDaemonsDoNotTakeOverLiveSockets:
    async def test_worker_server_start_on_a_live_workers_socket_fails(
        self, start_server, short_dir: Path
    ) -> None:
        """Given a worker serving on a Unix socket, when a second worker starts on
        the same path, then it fails with "address in use" and the first worker
        still answers on its socket."""
        # Arrange
        address = f"unix:{short_dir / 'w.sock'}"
        await start_server(address)
        # Act
        with pytest.raises(OSError, match="address in use"):
            await start_server(address)
        # Assert
        async with WorkerConnection(address) as connection:
            assert await connection.idle_time(timeout=5) >= 0

    async def test_serve_app_on_a_live_workers_socket_fails(
        self, start_server, short_dir: Path
    ) -> None:
        """Given a worker serving on a Unix socket, when an HTTP daemon is served on
        the same path (a shared env file's address), then "address in use", and the
        worker still answers on its socket."""
        # Arrange
        address = f"unix:{short_dir / 'w.sock'}"
        await start_server(address)
        # Act
        with pytest.raises(OSError, match="address in use"):
            async with serve_app(web.Application(), address):
                pass
        # Assert
        async with WorkerConnection(address) as connection:
            assert await connection.idle_time(timeout=5) >= 0

    @pytest.mark.parametrize(
        "command",
        [["worker", "--listen"], ["exporter", "--web.listen-address"]],
        ids=["worker", "exporter"],
    )
    def test_daemon_on_a_live_socket_exits_1(
        self,
        command: list[str],
        live_socket: tuple[str, socket.socket],
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Given a Unix socket a process listens on, when a daemon is started on its
        path, then it exits 1 logging "cannot listen ... address in use", like a TCP
        port in use, and the socket still serves."""
        # Arrange
        path, _ = live_socket
        # Act
        status = main([*command, f"unix:{path}"])
        # Assert
        err = capsys.readouterr().err
        assert status == 1
        assert "cannot listen" in err and "address in use" in err
        assert still_serves(path)
