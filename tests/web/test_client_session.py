"""The HTTP client session of --http.config.file, against real aiohttp servers."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from support.connect_proxy import RefusingProxy
from support.tls import CertFiles, issue

from wool_idle.daemon_thread import DaemonThreads
from wool_idle.web import client_config, client_session
from wool_idle.web.client_config import parse_client_config
from wool_idle.web.client_session import (
    CredentialsUnavailable,
    LiveSession,
    RedirectRefused,
    http_session,
)
from wool_idle.web.config import parse_web_config
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.site import serve_app

READERS = "wool-idle-credentials"
"""The name the threads that read secret files start with."""
Seen = list[tuple[str, str | None, int | None]]
"""(path, Authorization header, client certificate serial) of each request."""


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def recording_app(seen: Seen, redirect_to: str | None = None) -> web.Application:
    """Records each request; ``/redirect`` answers 302 to ``redirect_to``. Every
    response closes its connection, so each request opens a new one."""

    async def record(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        serial = int(peer["serialNumber"], 16) if peer else None
        seen.append((request.path, request.headers.get("Authorization"), serial))
        if request.path == "/redirect":
            raise web.HTTPFound(redirect_to or "/")
        response = web.Response(text="ok\n")
        response.force_close()
        return response

    app = web.Application()
    app.router.add_get("/{tail:.*}", record)
    return app


Serve = Callable[..., Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Serve apps on loopback (with an optional web config); all stopped after the test."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(app: web.Application, web_config: str = "", base: Path = Path("/")) -> str:
            config = LiveWebConfig(parse_web_config(web_config, base))
            return await stack.enter_async_context(serve_app(app, "127.0.0.1:0", config))

        yield start


async def get(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as response:
        return response.status


class TestHttpSession:
    async def test_http_session_password_file_read_per_request(
        self, serve: Serve, tmp_path: Path
    ) -> None:
        """Given basic_auth with a password_file, when the file changes between two
        requests, then the second request carries the new password."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        (tmp_path / "pw").write_text("first\n")
        config = parse_client_config("basic_auth: {username: a, password_file: pw}", tmp_path)
        # Act
        async with http_session(config, origin=url) as session:
            await get(session, f"{url}/one")
            (tmp_path / "pw").write_text("second\n")
            await get(session, f"{url}/two")
        # Assert
        assert [auth for _, auth, _ in seen] == [basic("a", "first"), basic("a", "second")]

    @pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY", "all_proxy"])
    async def test_http_session_ignores_the_proxy_environment(
        self, serve: Serve, tmp_path: Path, monkeypatch, variable: str
    ) -> None:
        """Given a source on loopback and a host whose environment names a forward
        proxy (``variable``) that refuses everything, when the session reads the
        source, then it reached the source itself and the proxy saw nothing (as
        Prometheus's scrapes, without ``proxy_from_environment``)."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        config = parse_client_config("follow_redirects: true", tmp_path)
        async with RefusingProxy() as proxy:
            monkeypatch.setenv(variable, proxy.url)
            # Act
            async with http_session(config, origin=url) as session:
                status = await get(session, f"{url}/metrics")
            # Assert
            assert status == 200
            assert proxy.seen == []
            assert [path for path, _, _ in seen] == ["/metrics"]

    async def test_http_session_credentials_stay_with_their_origin(
        self, serve: Serve, tmp_path: Path
    ) -> None:
        """Given a source that redirects to another host:port, when followed, then the
        other server gets no credentials; a redirect within the origin keeps them."""
        # Arrange
        elsewhere: Seen = []
        other = await serve(recording_app(elsewhere))
        seen: Seen = []
        url = await serve(recording_app(seen, redirect_to=f"{other}/landed"))
        config = parse_client_config("authorization: {credentials: tok}", tmp_path)
        # Act
        async with http_session(config, origin=url) as session:
            status = await get(session, f"{url}/redirect")
        # Assert
        assert status == 200
        assert seen == [("/redirect", "Bearer tok", None)]
        assert elsewhere == [("/landed", None, None)]

    async def test_http_session_redirect_refused(self, serve: Serve, tmp_path: Path) -> None:
        """Given follow_redirects: false, when the server redirects, then the request
        fails (a ClientError) and the target is never asked."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen, redirect_to="/landed"))
        config = parse_client_config("follow_redirects: false", tmp_path)
        # Act
        async with http_session(config, origin=url) as session:
            with pytest.raises(RedirectRefused, match=r"HTTP 302 .* not followed"):
                await get(session, f"{url}/redirect")
        # Assert
        assert [path for path, _, _ in seen] == ["/redirect"]

    async def test_http_session_unreadable_secret_fails_the_request(
        self, serve: Serve, tmp_path: Path
    ) -> None:
        """Given a password_file removed after start, when a request is made, then it
        fails with a ClientError naming the key (nothing is sent)."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        (tmp_path / "pw").write_text("pw\n")
        config = parse_client_config("basic_auth: {password_file: pw}", tmp_path)
        (tmp_path / "pw").unlink()
        # Act
        async with http_session(config, origin=url) as session:
            with pytest.raises(CredentialsUnavailable, match=r"basic_auth\.password_file"):
                await get(session, url)
        # Assert
        assert seen == []

    async def test_http_session_client_certificate_rotation(
        self, serve: Serve, tmp_path: Path, tls_material
    ) -> None:
        """Given a server requiring client certificates and a tls_config presenting
        one, when the client certificate files are rewritten, then a later connection
        presents the new certificate."""
        # Arrange
        seen: Seen = []
        url = await serve(
            recording_app(seen),
            f"tls_server_config: {{cert_file: {tls_material.server.cert},"
            f" key_file: {tls_material.server.key}, client_ca_file: {tls_material.ca},"
            " client_auth_type: RequireAndVerifyClientCert}",
        )
        client = tls_material.clients["autoscaler"]
        files = CertFiles(str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
        shutil.copy(client.cert, files.cert)
        shutil.copy(client.key, files.key)
        config = parse_client_config(
            f"tls_config: {{ca_file: {tls_material.ca}, cert_file: client.crt,"
            " key_file: client.key, server_name: localhost}",
            tmp_path,
        )
        # Act
        async with http_session(config, origin=url) as session:
            await get(session, url)
            rotated = issue(tls_material.ca, files, ("autoscaler",))
            deadline = time.monotonic() + 20
            while seen[-1][2] != rotated and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                await get(session, url)
        # Assert
        assert seen[0][2] != rotated
        assert seen[-1][2] == rotated

    async def test_http_session_ca_rotation(
        self, serve: Serve, tmp_path: Path, tls_material
    ) -> None:
        """Given a server whose certificate comes from a CA the client does not trust
        yet, when the client's ca_file is rewritten with that CA, then a later
        connection succeeds."""
        # Arrange
        served = CertFiles(str(tmp_path / "server.crt"), str(tmp_path / "server.key"))
        shutil.copy(tls_material.server.key, served.key)
        issue(tls_material.other_ca, served, ("localhost",))
        url = await serve(
            recording_app([]),
            f"tls_server_config: {{cert_file: {served.cert}, key_file: {served.key}}}",
        )
        shutil.copy(tls_material.ca, tmp_path / "ca.crt")
        config = parse_client_config("tls_config: {ca_file: ca.crt}", tmp_path)
        # Act
        async with http_session(config, origin=url) as session:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await get(session, url)
            shutil.copy(tls_material.other_ca, tmp_path / "ca.crt")
            deadline, status = time.monotonic() + 20, 0
            while status != 200 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                try:
                    status = await get(session, url)
                except aiohttp.ClientConnectorCertificateError:
                    continue
        # Assert
        assert status == 200


class TestDaemonResolver:
    async def test_http_session_name_looked_up_on_a_daemon_thread(
        self, serve: Serve, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given a source served on loopback and reached by name (``localhost``), when the
        session reads it, then it answers, and the name was looked up on one of the
        sessions' daemon lookup threads (which the exit never waits for), not on the
        loop's default executor."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        by_name = url.replace("127.0.0.1", "localhost")
        threads: list[tuple[str, bool]] = []
        look_up = socket.getaddrinfo

        def recorded(host, *args, **kwargs):
            if host == "localhost":
                current = threading.current_thread()
                threads.append((current.name, current.daemon))
            return look_up(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", recorded)
        # Act
        async with http_session(parse_client_config("", Path("/")), origin=by_name) as session:
            status = await get(session, f"{by_name}/metrics")
        # Assert
        assert status == 200 and [path for path, _, _ in seen] == ["/metrics"]
        assert threads and all(
            name.startswith("wool-idle-http-resolve") and daemon for name, daemon in threads
        )

    async def test_http_session_name_that_does_not_resolve_fails_the_request(self) -> None:
        """Given a source whose host name does not resolve (``.invalid``, reserved never
        to), when the session reads it, then the request fails with aiohttp's DNS error
        (which a source reports as unusable, stopping no one), naming the host."""
        # Arrange
        url = "http://no-such-host.invalid:9"
        # Act
        async with http_session(parse_client_config("", Path("/")), origin=url) as session:
            with pytest.raises(aiohttp.ClientConnectorDNSError) as raised:
                await get(session, f"{url}/metrics")
        # Assert
        assert "no-such-host.invalid" in str(raised.value)


class TestHttpSessionStalledSecret:
    async def test_http_session_no_thread_to_read_the_secret_fails_the_request(
        self, serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given a password_file and no thread can be started to read it (a pids limit),
        when a request is made, then it fails with a ClientError saying so (nothing is
        sent); once threads can be started again, the next request carries it."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        (tmp_path / "pw").write_text("pw\n")
        config = parse_client_config("basic_auth: {username: a, password_file: pw}", tmp_path)
        # Named apart from the shared readers, which another test counts.
        readers = DaemonThreads(1, "secret-reads-of-this-test")
        monkeypatch.setattr(client_session, "_SECRET_READS", readers)
        start = threading.Thread.start

        def refuse(thread: threading.Thread) -> None:
            raise RuntimeError("can't start new thread")

        async with http_session(config, origin=url) as session:
            # Act
            monkeypatch.setattr(threading.Thread, "start", refuse)
            with pytest.raises(CredentialsUnavailable, match="cannot start a thread"):
                await get(session, url)
            monkeypatch.setattr(threading.Thread, "start", start)
            status = await get(session, url)
        # Assert
        assert status == 200
        assert [auth for _, auth, _ in seen] == [basic("a", "pw")]

    async def test_http_session_stalled_secret_reads_hold_one_thread(
        self, serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given a password_file whose reads stall in the file system (a hung mount,
        which cannot be made here), when 20 requests each time out waiting for it (an
        autoscaler cycle each), then one thread reads secrets: those requests' reads
        never start. A thread per read left one more stalled thread every cycle."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        (tmp_path / "pw").write_text("pw\n")
        config = parse_client_config("basic_auth: {username: a, password_file: pw}", tmp_path)
        unstall = threading.Event()
        read = client_config.read_regular_file

        def stalled(path: str, *, limit: int) -> bytes:
            unstall.wait()
            return read(path, limit=limit)

        monkeypatch.setattr(client_config, "read_regular_file", stalled)
        timeout = aiohttp.ClientTimeout(total=0.05)
        try:
            async with http_session(config, origin=url) as session:
                # Act
                for _ in range(20):
                    with pytest.raises(TimeoutError):
                        await session.get(url, timeout=timeout)
                readers = [t for t in threading.enumerate() if t.name.startswith(READERS)]
        finally:
            unstall.set()
        # Assert
        assert len(readers) == 1
        assert seen == []


class TestLiveSession:
    async def test_lease_keeps_its_config_until_it_ends(self, serve: Serve, tmp_path: Path) -> None:
        """Given a lease of the session of token one (a read in flight), when token two
        is put in force, then the lease's later requests still send one, a new lease
        sends two through another session, and the first session is closed once its
        lease ends (the new one stays open)."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        configs = [parse_client_config("authorization: {credentials: one}", tmp_path)]
        async with LiveSession(lambda: configs[-1], origin=url) as sessions:
            async with sessions.lease() as held:
                await get(held, f"{url}/first")
                # Act
                configs.append(parse_client_config("authorization: {credentials: two}", tmp_path))
                await get(held, f"{url}/in-flight")
                async with sessions.lease() as fresh:
                    await get(fresh, f"{url}/next")
            closed = (held.closed, fresh.closed)
        # Assert
        assert [(path, auth) for path, auth, _ in seen] == [
            ("/first", "Bearer one"),
            ("/in-flight", "Bearer one"),
            ("/next", "Bearer two"),
        ]
        assert fresh is not held
        assert closed == (True, False)

    async def test_lease_closes_an_unleased_session_of_an_old_config(
        self, serve: Serve, tmp_path: Path
    ) -> None:
        """Given a session no lease holds, when a new config is put in force and a lease
        begins, then the old session is closed and the new one sends the new credentials;
        closing closes the one in force."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        configs = [parse_client_config("authorization: {credentials: one}", tmp_path)]
        sessions = LiveSession(lambda: configs[-1], origin=url)
        async with sessions.lease() as old:
            await get(old, url)
        configs.append(parse_client_config("basic_auth: {username: a, password: b}", tmp_path))
        # Act
        async with sessions.lease() as new:
            old_closed = old.closed
            await get(new, url)
        await sessions.close()
        # Assert
        assert (old_closed, new.closed) == (True, True)
        assert [auth for _, auth, _ in seen] == ["Bearer one", basic("a", "b")]

    async def test_lease_begun_while_an_old_session_closes_is_not_closed_under_it(
        self, serve: Serve, tmp_path: Path
    ) -> None:
        """Given an unleased session with a kept-alive connection, when two leases begin
        at once under two new configs (the first waits for the old session to close, the
        second begins meanwhile), then each lease reads through an open session and
        sends its own config's credentials."""
        # Arrange
        seen: Seen = []
        url = await serve(recording_app(seen))
        configs = [parse_client_config("authorization: {credentials: one}", tmp_path)]
        sessions = LiveSession(lambda: configs[-1], origin=url)
        async with sessions.lease() as old:
            await get(old, url)

        async def read(credentials: str) -> int:
            configs.append(
                parse_client_config(f"authorization: {{credentials: {credentials}}}", tmp_path)
            )
            async with sessions.lease() as session:
                return await get(session, f"{url}/{credentials}")

        # Act
        statuses = await asyncio.gather(read("two"), read("three"), return_exceptions=True)
        await sessions.close()
        # Assert
        assert statuses == [200, 200]
        assert sorted(auth for _, auth, _ in seen[1:]) == ["Bearer three", "Bearer two"]
