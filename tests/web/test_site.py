"""Serving an app on TCP or a Unix socket, over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shutil
import socket
import ssl
import urllib.parse
from pathlib import Path

import aiohttp
import bcrypt
import pytest
from aiohttp import web
from support.https import presented_serial, serial_after_rotation
from support.processes import spawn_cli
from support.tls import CertFiles, issue
from support.waiting import eventually_async

from wool_idle.cli.values import URL
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.site import serve_app


def hello_app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello\n")

    app = web.Application()
    app.router.add_get("/hello", hello)
    return app


@pytest.fixture
def socket_path(tmp_path: Path) -> str:
    # Unix socket paths are limited to ~108 bytes; tmp_path can be longer.
    return f"/tmp/wool-idle-web-{os.getpid()}-{abs(hash(tmp_path)) % 10**8}.sock"


def link_local() -> tuple[str, str] | None:
    """A link-local IPv6 address of this host and its interface's name, if one has."""
    with contextlib.suppress(OSError), open("/proc/net/if_inet6") as table:
        for line in table:
            hexed, _, _, scope, _, name = line.split()
            if scope == "20":  # link scope
                return str(ipaddress.IPv6Address(bytes.fromhex(hexed))), name
    return None


needs_link_local = pytest.mark.skipif(link_local() is None, reason="no link-local address")


class TestServeApp:
    async def test_serve_app_on_unix_socket(self, socket_path: str) -> None:
        """Given `unix:/path`, when the app is served, then the URL is
        `http+unix://<percent-encoded path><path>`, a request over the socket is
        answered, and the socket file is gone once it stops."""
        # Act
        async with serve_app(hello_app(), f"unix:{socket_path}", path="/hello") as url:
            connector = aiohttp.UnixConnector(path=socket_path)
            async with (
                aiohttp.ClientSession(connector=connector) as session,
                session.get("http://localhost/hello") as response,
            ):
                status, body = response.status, await response.text()
        # Assert
        assert url == f"http+unix://{urllib.parse.quote(socket_path, safe='')}/hello"
        assert (status, body) == (200, "hello\n")
        assert not os.path.exists(socket_path)

    async def test_serve_app_on_tcp_port_zero(self) -> None:
        """Given `127.0.0.1:0`, then the URL carries the port picked, and it answers."""
        # Act
        async with (
            serve_app(hello_app(), "127.0.0.1:0") as url,
            aiohttp.ClientSession() as session,
            session.get(f"{url}/hello") as response,
        ):
            status = response.status
        # Assert
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        assert status == 200

    @needs_link_local
    async def test_serve_app_on_a_link_local_address_names_its_zone(self) -> None:
        """Given a link-local address with its zone, when the app is served there, then
        the URL it gives names the zone as RFC 6874 writes it (``%25eth0``): without
        it, that URL reaches nothing."""
        # Arrange
        address, interface = link_local() or ("", "")
        # Act
        async with serve_app(hello_app(), f"[{address}%{interface}]:0") as url:
            pass
        # Assert
        assert url.startswith(f"http://[{address}%25{interface}]:")

    @needs_link_local
    async def test_url_value_of_a_zoned_url_is_answered(self) -> None:
        """Given an app served on a link-local address, when its URL as RFC 6874 writes
        it (``http://[fe80::1%25eth0]:P``, curl's and Go's) is taken as the daemons'
        URL flags take it and fetched with aiohttp, then the app answers (aiohttp looked
        the host up undecoded, ``fe80::1%25eth0``, and found nothing)."""
        # Arrange
        address, interface = link_local() or ("", "")
        async with serve_app(hello_app(), f"[{address}%{interface}]:0") as served:
            port = served.rpartition(":")[2]
            # Act
            url = URL.parse(f"http://[{address}%25{interface}]:{port}/hello")
            async with aiohttp.ClientSession() as session, session.get(url) as response:
                status = response.status
        # Assert
        assert status == 200

    async def test_serve_app_address_in_use(self) -> None:
        """Given an address already bound, then OSError from entering."""
        # Arrange
        async with serve_app(hello_app(), "127.0.0.1:0") as url:
            taken = url.removeprefix("http://")
            # Act / Assert
            with pytest.raises(OSError):
                async with serve_app(hello_app(), taken):
                    pass

    async def test_serve_app_keeps_a_file_it_did_not_bind(self, socket_path: str) -> None:
        """Given a regular file where the socket should go, then OSError, and the file
        is still there (only a socket of ours is removed)."""
        # Arrange
        Path(socket_path).write_text("someone's file\n")
        # Act
        with pytest.raises(OSError):
            async with serve_app(hello_app(), f"unix:{socket_path}"):
                pass
        # Assert
        assert Path(socket_path).read_text() == "someone's file\n"
        os.unlink(socket_path)

    async def test_serve_app_unix_socket_in_a_missing_directory_names_the_path(
        self, tmp_path: Path
    ) -> None:
        """Given a Unix socket path in a directory that does not exist, then the OSError
        from entering names the path (the daemon logged only "cannot listen: [Errno 2]
        No such file or directory", naming nothing)."""
        # Arrange
        path = tmp_path / "missing" / "w.sock"
        # Act
        with pytest.raises(OSError) as raised:
            async with serve_app(hello_app(), f"unix:{path}"):
                pass
        # Assert
        assert str(path) in str(raised.value)

    @pytest.mark.parametrize(
        "sent", [b"", b"GET /hello HTTP/1.1\r\nHost: x\r\n"], ids=["silent", "slow-head"]
    )
    async def test_serve_app_closes_a_connection_without_a_request(self, sent: bytes) -> None:
        """Given a client that connects and sends nothing, or half a request head
        (slowloris), when it waits past the request wait, then the connection is
        closed (aiohttp kept it an hour: clients could hold every descriptor)."""
        # Arrange
        loop = asyncio.get_running_loop()
        async with serve_app(hello_app(), "127.0.0.1:0", request_wait=0.2) as url:
            host, _, port = url.removeprefix("http://").rpartition(":")
            with socket.create_connection((host, int(port))) as client:
                client.setblocking(False)
                await loop.sock_sendall(client, sent)
                # Act
                received = await asyncio.wait_for(loop.sock_recv(client, 1024), 30)
        # Assert
        assert received == b""

    @pytest.mark.parametrize("requests", [1, 3], ids=["one", "pipelined"])
    async def test_serve_app_aborts_a_connection_that_does_not_take_its_answer(
        self, requests: int
    ) -> None:
        """Given a client that asks for an answer larger than the sockets' buffers and
        never reads, when it waits past the request wait, then its connection is
        aborted, its socket closed (aiohttp waited for ever: each such client held a
        descriptor and the answer's memory for good)."""
        # Arrange
        loop = asyncio.get_running_loop()
        sockets: list[socket.socket] = []

        async def large(request: web.Request) -> web.Response:
            assert request.transport is not None
            sockets.append(request.transport.get_extra_info("socket"))
            return web.Response(body=b"x" * 32 * 1024 * 1024)

        app = web.Application()
        app.router.add_get("/large", large)
        request = b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n"
        async with serve_app(app, "127.0.0.1:0", request_wait=0.2) as url:
            host, _, port = url.removeprefix("http://").rpartition(":")
            with socket.socket() as client:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                client.connect((host, int(port)))
                client.setblocking(False)
                # Act
                await loop.sock_sendall(client, request * requests)
                # Assert
                assert await eventually_async(lambda: len(sockets) == 1)
                assert await eventually_async(lambda: sockets[0].fileno() == -1, timeout=30)

    async def test_serve_app_lets_go_of_an_answer_sent_on_a_kept_connection(self) -> None:
        """Given a client that reads its whole answer and keeps the connection open,
        when the answer has been sent, then its body is let go (aiohttp kept it until
        the next request or the request wait: a megabyte and more per idle
        connection at 10,000 targets)."""
        # Arrange
        loop = asyncio.get_running_loop()
        responses: list[web.Response] = []
        body = b"x" * 1024 * 1024

        async def large(request: web.Request) -> web.Response:
            responses.append(web.Response(body=body))
            return responses[-1]

        app = web.Application()
        app.router.add_get("/large", large)
        async with serve_app(app, "127.0.0.1:0") as url:
            host, _, port = url.removeprefix("http://").rpartition(":")
            with socket.create_connection((host, int(port))) as client:
                client.setblocking(False)
                await loop.sock_sendall(client, b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
                received = b""
                while not received.endswith(body):
                    received += await asyncio.wait_for(loop.sock_recv(client, 1 << 20), 30)
                # Act
                let_go = await eventually_async(lambda: responses[0].body is None)
        # Assert
        assert let_go


def write_web_config(directory: Path, tls_material, extra: str = "") -> str:
    """A web config serving TLS from copies of the server files in ``directory``."""
    shutil.copy(tls_material.server.cert, directory / "server.crt")
    shutil.copy(tls_material.server.key, directory / "server.key")
    path = directory / "web.yml"
    path.write_text(f"tls_server_config: {{cert_file: server.crt, key_file: server.key}}\n{extra}")
    return str(path)


class TestServeAppWebConfig:
    async def test_serve_app_headers_on_every_response(self, tmp_path: Path) -> None:
        """Given a web config with headers and a user, when a page, a 401 and a 404 are
        answered, then each carries the headers."""
        # Arrange
        hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
        path = tmp_path / "web.yml"
        path.write_text(
            "http_server_config:\n  http2: false\n  headers:\n"
            "    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=60\n"
            f"basic_auth_users:\n  alice: '{hashed}'\n"
        )
        config = LiveWebConfig.load(str(path))
        auth = {"Authorization": aiohttp.encode_basic_auth("alice", "pw")}
        answers = []
        # Act
        async with (
            serve_app(hello_app(), "127.0.0.1:0", config) as url,
            aiohttp.ClientSession() as session,
        ):
            for target, headers in (("/hello", auth), ("/hello", {}), ("/nope", auth)):
                async with session.get(url + target, headers=headers) as response:
                    answers.append((response.status, dict(response.headers)))
        # Assert
        assert [status for status, _ in answers] == [200, 401, 404]
        for _, headers in answers:
            assert headers["X-Frame-Options"] == "deny"
            assert headers["Strict-Transport-Security"] == "max-age=60"

    async def test_serve_app_certificate_rotation(self, tmp_path: Path, tls_material) -> None:
        """Given an HTTPS site, when its certificate files are rewritten, then a later
        handshake presents the new certificate, and HTTPS requests still succeed."""
        # Arrange
        config = LiveWebConfig.load(write_web_config(tmp_path, tls_material))
        files = CertFiles(str(tmp_path / "server.crt"), str(tmp_path / "server.key"))
        async with serve_app(hello_app(), "127.0.0.1:0", config) as url:
            first = await asyncio.to_thread(presented_serial, url, tls_material.ca)
            # Act
            rotated = issue(tls_material.ca, files, ("localhost",))
            seen = await asyncio.to_thread(serial_after_rotation, url, tls_material.ca, rotated)
            client = ssl.create_default_context(cafile=tls_material.ca)
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{url}/hello", ssl=client, server_hostname="localhost") as response,
            ):
                status = response.status
        # Assert
        assert url.startswith("https://")
        assert seen == rotated != first
        assert status == 200

    async def test_serve_app_aborts_a_tls_connection_that_does_not_take_its_answer(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given an HTTPS client that asks for an answer larger than the sockets' buffers
        and never reads, when it waits past the request wait, then its connection's
        socket is closed (it was held for good, the answer below the TLS layer)."""
        # Arrange
        sockets: list[socket.socket] = []

        async def large(request: web.Request) -> web.Response:
            assert request.transport is not None
            sockets.append(request.transport.get_extra_info("socket"))
            return web.Response(body=b"x" * 32 * 1024 * 1024)

        def connect(host: str, port: int) -> ssl.SSLSocket:
            raw = socket.socket()
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            raw.connect((host, port))
            return context.wrap_socket(raw, server_hostname="localhost")

        app = web.Application()
        app.router.add_get("/large", large)
        config = LiveWebConfig.load(write_web_config(tmp_path, tls_material))
        context = ssl.create_default_context(cafile=tls_material.ca)
        async with serve_app(app, "127.0.0.1:0", config, request_wait=0.2) as url:
            host, _, port = url.removeprefix("https://").rpartition(":")
            with await asyncio.to_thread(connect, host, int(port)) as client:
                # Act
                await asyncio.to_thread(client.sendall, b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
                # Assert
                assert await eventually_async(lambda: len(sockets) == 1)
                assert await eventually_async(lambda: sockets[0].fileno() == -1, timeout=30)

    async def test_serve_app_bad_new_files_keep_the_last_good(
        self, tmp_path: Path, tls_material, caplog
    ) -> None:
        """Given an HTTPS site whose key file is replaced by garbage, when handshakes
        follow, then they present the last good certificate and the failure is logged."""
        # Arrange
        config = LiveWebConfig.load(write_web_config(tmp_path, tls_material))
        async with serve_app(hello_app(), "127.0.0.1:0", config) as url:
            first = await asyncio.to_thread(presented_serial, url, tls_material.ca)
            # Act
            (tmp_path / "server.key").write_text("not a key\n")
            await asyncio.sleep(1.2)  # past the recheck interval: the next handshake has
            during = await asyncio.to_thread(presented_serial, url, tls_material.ca)  # a read
            logged = await eventually_async(lambda: "keeping the TLS files" in caplog.text)
            after = await asyncio.to_thread(presented_serial, url, tls_material.ca)
        # Assert
        assert during == after == first
        assert logged


async def status_once_changed(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str], before: int, **kw: object
) -> int:
    """GET ``url`` until the status is no longer ``before`` (at most 10 s); the last one."""
    status = before
    for _ in range(200):
        async with session.get(url, headers=headers, **kw) as response:  # type: ignore[arg-type]
            status = response.status
        if status != before:
            break
        await asyncio.sleep(0.05)
    return status


class TestServeAppFollowsWebConfig:
    async def test_serve_app_users_and_headers_follow_the_file(self, tmp_path: Path) -> None:
        """Given a site whose web config has alice, when the file is rewritten with bob
        and another header, then bob logs in, alice gets 401, and responses carry the
        new header; no restart."""
        # Arrange
        hashes = {u: bcrypt.hashpw(u.encode(), bcrypt.gensalt(rounds=4)).decode() for u in "ab"}
        path = tmp_path / "web.yml"
        path.write_text(f"basic_auth_users: {{alice: '{hashes['a']}'}}\n")
        config = LiveWebConfig.load(str(path), interval=0.05)
        alice = {"Authorization": aiohttp.encode_basic_auth("alice", "a")}
        bob = {"Authorization": aiohttp.encode_basic_auth("bob", "b")}
        async with (
            serve_app(hello_app(), "127.0.0.1:0", config, path="/hello") as url,
            aiohttp.ClientSession() as session,
        ):
            before = [await status_once_changed(session, url, h, 0) for h in (alice, bob)]
            # Act
            path.write_text(
                f"basic_auth_users: {{bob: '{hashes['b']}'}}\n"
                "http_server_config: {headers: {X-Frame-Options: sameorigin}}\n"
            )
            after_bob = await status_once_changed(session, url, bob, 401)
            async with session.get(url, headers=alice) as response:
                after_alice, frame = response.status, response.headers.get("X-Frame-Options")
        # Assert
        assert before == [200, 401]
        assert (after_bob, after_alice) == (200, 401)
        assert frame == "sameorigin"

    async def test_serve_app_auth_turned_on_by_the_file(self, tmp_path: Path) -> None:
        """Given a site whose web config has no user, when a user is added to the file,
        then a request without credentials gets 401."""
        # Arrange
        hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
        path = tmp_path / "web.yml"
        path.write_text("http_server_config: {http2: false}\n")
        config = LiveWebConfig.load(str(path), interval=0.05)
        async with (
            serve_app(hello_app(), "127.0.0.1:0", config, path="/hello") as url,
            aiohttp.ClientSession() as session,
        ):
            before = await status_once_changed(session, url, {}, 0)
            # Act
            path.write_text(f"basic_auth_users: {{alice: '{hashed}'}}\n")
            after = await status_once_changed(session, url, {}, 200)
        # Assert
        assert (before, after) == (200, 401)

    async def test_serve_app_tls_settings_follow_the_file(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given an HTTPS site that asks no client certificate, when the file is
        rewritten to require one, then a client without a certificate is refused and
        one with a certificate of the CA is served."""
        # Arrange
        path = write_web_config(tmp_path, tls_material)
        config = LiveWebConfig.load(path, interval=0.05)
        anonymous = ssl.create_default_context(cafile=tls_material.ca)
        known = ssl.create_default_context(cafile=tls_material.ca)
        client = tls_material.clients["exporter"]
        known.load_cert_chain(client.cert, client.key)
        shutil.copy(tls_material.ca, tmp_path / "clients-ca.crt")

        async def status(context: ssl.SSLContext) -> int:
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(url, ssl=context, server_hostname="localhost") as response,
                ):
                    return response.status
            except aiohttp.ClientError:
                return 0  # the handshake was refused

        async with serve_app(hello_app(), "127.0.0.1:0", config, path="/hello") as url:
            before = await status(anonymous)
            # Act
            Path(path).write_text(
                "tls_server_config: {cert_file: server.crt, key_file: server.key,"
                " client_auth_type: RequireAndVerifyClientCert, client_ca_file: clients-ca.crt}\n"
            )
            for _ in range(200):
                refused = await status(anonymous)
                if refused != 200:
                    break
                await asyncio.sleep(0.05)
            served = await status(known)
        # Assert
        assert before == 200
        assert (refused, served) == (0, 200)

    async def test_serve_app_kubernetes_secret_update_rotates_the_certificate(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given a web config and certificate mounted as a Kubernetes Secret volume does
        it (every name a link through ``..data`` to a timestamped directory), when the
        kubelet swaps ``..data`` to a new directory with a new certificate and deletes
        the old one, then handshakes present the new certificate."""

        # Arrange
        def version(name: str) -> CertFiles:
            directory = tmp_path / name
            directory.mkdir()
            (directory / "web.yml").write_text(
                "tls_server_config: {cert_file: tls.crt, key_file: tls.key}\n"
            )
            shutil.copy(tls_material.server.cert, directory / "tls.crt")
            shutil.copy(tls_material.server.key, directory / "tls.key")
            return CertFiles(str(directory / "tls.crt"), str(directory / "tls.key"))

        version("..2026_11_30_01")
        (tmp_path / "..data").symlink_to("..2026_11_30_01")
        for name in ("web.yml", "tls.crt", "tls.key"):
            (tmp_path / name).symlink_to(f"..data/{name}")
        config = LiveWebConfig.load(str(tmp_path / "web.yml"), interval=0.05)
        async with serve_app(hello_app(), "127.0.0.1:0", config) as url:
            first = await asyncio.to_thread(presented_serial, url, tls_material.ca)
            # Act
            rotated = issue(tls_material.ca, version("..2026_11_30_02"), ("localhost",))
            (tmp_path / "..data_tmp").symlink_to("..2026_11_30_02")
            (tmp_path / "..data_tmp").replace(tmp_path / "..data")
            shutil.rmtree(tmp_path / "..2026_11_30_01")
            seen = await asyncio.to_thread(serial_after_rotation, url, tls_material.ca, rotated)
        # Assert
        assert seen == rotated != first


class TestMalformedRequestsLog:
    @pytest.mark.parametrize("daemon", [["exporter"], ["autoscaler", "--max-idle", "1h"]])
    def test_daemon_logs_malformed_requests_once(self, daemon: list[str]) -> None:
        """Given a running daemon, when 30 malformed HTTP requests arrive (anyone who
        can connect can send them), then its log carries aiohttp's traceback for the
        first one only, and the daemon still answers."""
        # Arrange
        process = spawn_cli([*daemon, "--listen", "127.0.0.1:0"])
        try:
            url = process.stdout.readline().strip()
            host, port = url.removeprefix("http://").removesuffix("/metrics").rsplit(":", 1)
            # Act
            answers = [malformed(host, int(port)) for _ in range(30)]
        finally:
            process.terminate()
            _, log = process.communicate(timeout=30)
        # Assert
        assert url.startswith("http://")
        assert set(answers) == {b"HTTP/1.0 400 Bad Request"}
        assert log.count("Error handling request") == 1, log
        assert log.count("Traceback") == 1

    async def test_handler_errors_are_logged_every_time(self, caplog) -> None:
        """Given a site whose handler fails, when it fails twice with the same error
        and three malformed requests arrive, then both failures are logged (each is a
        bug to see), and the malformed requests at most once."""

        # Arrange
        async def fail(request: web.Request) -> web.Response:
            raise KeyError(request.query.get("key", ""))

        app = web.Application()
        app.router.add_get("/fail", fail)
        async with serve_app(app, "127.0.0.1:0") as url, aiohttp.ClientSession() as session:
            host, port = url.removeprefix("http://").rsplit(":", 1)
            # Act
            for key in ("a", "b"):
                async with session.get(f"{url}/fail?key={key}") as response:
                    assert response.status == 500
            for _ in range(3):
                await asyncio.to_thread(malformed, host, int(port))
        # Assert
        logged = [
            r.exc_info[0].__name__
            for r in caplog.records
            if r.name == "aiohttp.server" and r.exc_info
        ]
        assert logged.count("KeyError") == 2
        assert len(logged) - 2 <= 1  # at most once: the filter is the process's


def malformed(host: str, port: int) -> bytes:
    """Send one request with a Content-Length that is not a number; the status line."""
    with socket.create_connection((host, port), timeout=10) as connection:
        connection.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        return connection.recv(4096).split(b"\r\n", 1)[0]
