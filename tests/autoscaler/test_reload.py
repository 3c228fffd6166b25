"""The autoscaler's forced re-read: ``POST /-/reload`` (and SIGHUP, see
tests/deploy/test_systemd.py) reads every file it follows now, over real HTTPS."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import subprocess
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web import Request, StreamResponse, middleware
from support.https import presented_serial
from support.processes import spawn_cli
from support.tls import CertFiles, issue
from support.waiting import eventually_async
from support.web_reload import (
    ALICE,
    BEARER,
    BOB,
    HASHES,
    NEVER,
    ask,
    http_config,
    recording_source,
    web_config,
)

from wool_idle.autoscaler.app import create_app
from wool_idle.autoscaler.process import LeasedSource
from wool_idle.autoscaler.sources import ExporterSource
from wool_idle.autoscaler.sources.source import SourceError
from wool_idle.web.client_config import HttpClientConfig
from wool_idle.web.client_session import LiveSession
from wool_idle.web.config import parse_web_config
from wool_idle.web.followed_files import followed_files
from wool_idle.web.live_client_config import LiveClientConfig
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.reload import Reloads
from wool_idle.web.site import serve_app
from wool_idle.worker import ClientTls
from wool_idle.worker.channels import ChannelKey, pool


@contextlib.asynccontextmanager
async def served(
    make_autoscaler,
    web: LiveWebConfig,
    http: LiveClientConfig | None = None,
    tls: ClientTls | None = None,
    middlewares: Sequence[Middleware] = (),
) -> AsyncIterator[str]:
    """The autoscaler's app behind ``web`` (``middlewares`` around its routes); its
    base URL."""
    autoscaler = make_autoscaler("http://127.0.0.1:9/metrics", max_idle=60.0)
    reloads = Reloads(followed_files(web, http or LiveClientConfig(HttpClientConfig()), tls))
    app = create_app(autoscaler, autoscaler.registry, lambda: None, reloads)
    app.middlewares.extend(middlewares)
    try:
        async with serve_app(app, "127.0.0.1:0", web) as url:
            yield url
    finally:
        await reloads.close()


class TestReloadEndpoint:
    async def test_post_takes_a_new_user_at_once(
        self, make_autoscaler, tmp_path: Path, tls_material
    ) -> None:
        """Given an autoscaler over HTTPS whose web config gains user bob (and that would
        not look at it for an hour), when alice POSTs /-/reload, then 200 and bob is let in."""
        # Arrange
        path = web_config(tmp_path, tls_material, "alice")
        web = LiveWebConfig.load(str(path), interval=NEVER)
        async with served(make_autoscaler, web) as url:
            web_config(tmp_path, tls_material, "alice", "bob")
            before, _ = await ask(f"{url}/metrics", tls_material, auth=BOB)
            # Act
            reloaded = await ask(f"{url}/-/reload", tls_material, "POST")
            after, _ = await ask(f"{url}/metrics", tls_material, auth=BOB)
        # Assert
        assert (before, reloaded, after) == (401, (200, "OK\n"), 200)

    async def test_post_broken_web_config_is_500_naming_it_and_keeps_the_last_good(
        self, make_autoscaler, tmp_path: Path, tls_material
    ) -> None:
        """Given an autoscaler whose web config is broken after start, when POST
        /-/reload, then 500 with one line naming the file and the key, and alice's
        requests are still served over the TLS in force."""
        # Arrange
        path = web_config(tmp_path, tls_material, "alice")
        web = LiveWebConfig.load(str(path), interval=NEVER)
        async with served(make_autoscaler, web) as url:
            path.write_text(path.read_text().replace(HASHES["alice"], "not-a-hash"))
            # Act
            status, text = await ask(f"{url}/-/reload", tls_material, "POST")
            kept, _ = await ask(f"{url}/metrics", tls_material)
        # Assert
        assert status == 500
        assert text.startswith(f"failed to reload: web config {path}: ")
        assert "basic_auth_users.alice" in text and text.count("\n") == 1
        assert kept == 200

    async def test_post_unauthenticated_is_refused(
        self, make_autoscaler, tmp_path: Path, tls_material
    ) -> None:
        """Given an autoscaler with basic auth whose web config gains bob, when /-/reload
        is POSTed without credentials, then 401 and nothing is read again."""
        # Arrange
        path = web_config(tmp_path, tls_material, "alice")
        web = LiveWebConfig.load(str(path), interval=NEVER)
        async with served(make_autoscaler, web) as url:
            web_config(tmp_path, tls_material, "alice", "bob")
            # Act
            status, _ = await ask(f"{url}/-/reload", tls_material, "POST", auth=None)
        # Assert
        assert status == 401
        assert set(web.current.users) == {"alice"}

    async def test_get_is_405_as_the_exporter_answers(
        self, make_autoscaler, tmp_path: Path, tls_material
    ) -> None:
        """Given an autoscaler whose web config gains bob, when alice GETs /-/reload,
        then 405 (what the exporter answers) and nothing is read again."""
        # Arrange
        path = web_config(tmp_path, tls_material, "alice")
        web = LiveWebConfig.load(str(path), interval=NEVER)
        async with served(make_autoscaler, web) as url:
            web_config(tmp_path, tls_material, "alice", "bob")
            # Act
            status, _ = await ask(f"{url}/-/reload", tls_material)
        # Assert
        assert status == 405
        assert set(web.current.users) == {"alice"}

    async def test_post_rotated_server_certificate_is_presented_at_once(
        self, make_autoscaler, tmp_path: Path, tls_material
    ) -> None:
        """Given an autoscaler over HTTPS whose certificate files are rotated, when POST
        /-/reload answers, then the next handshake presents the new certificate."""
        # Arrange
        web = LiveWebConfig.load(str(web_config(tmp_path, tls_material, "alice")))
        files = CertFiles(str(tmp_path / "server.crt"), str(tmp_path / "server.key"))
        async with served(make_autoscaler, web) as url:
            rotated = issue(tls_material.ca, files, ("localhost",))
            # Act
            status, _ = await ask(f"{url}/-/reload", tls_material, "POST")
            seen = await asyncio.to_thread(presented_serial, url, tls_material.ca)
        # Assert
        assert (status, seen) == (200, rotated)

    async def test_post_burst_is_coalesced(
        self, make_autoscaler, tmp_path: Path, tls_material, caplog
    ) -> None:
        """Given an autoscaler, when 20 POST /-/reload ask for a re-read at once (held
        until all have arrived: 20 TLS handshakes spread out, and one that ended after
        a re-read would ask for another), then all get 200 and the files are read at
        most twice (one re-read running, one pending shared by the rest)."""
        # Arrange
        path = web_config(tmp_path, tls_material, "alice")
        path.write_text("tls_server_config: {cert_file: server.crt, key_file: server.key}\n")
        web = LiveWebConfig.load(str(path))  # no basic auth: no bcrypt thread after the hold
        caplog.set_level(logging.INFO, logger="wool_idle.web.followed_files")
        arrived: list[str] = []
        let_go = asyncio.Event()

        @middleware
        async def held(request: Request, handler: Handler) -> StreamResponse:
            arrived.append(request.path)
            await let_go.wait()  # all ask for a re-read at once, however they trickled in
            return await handler(request)

        async with served(make_autoscaler, web, middlewares=[held]) as url:
            # Act
            burst = asyncio.gather(
                *(ask(f"{url}/-/reload", tls_material, "POST") for _ in range(20))
            )
            assert await eventually_async(lambda: len(arrived) == 20, 60)
            let_go.set()
            answers = await burst
        # Assert
        assert [status for status, _ in answers] == [200] * 20
        rereads = [r for r in caplog.records if "every followed file" in r.getMessage()]
        assert 1 <= len(rereads) <= 2


def client_config(directory: Path, tls_material) -> Path:
    """``http.yml`` in ``directory``: basic auth with a password file, and a CA file."""
    shutil.copy(tls_material.ca, directory / "ca.crt")
    (directory / "password").write_text("secret\n")
    path = directory / "http.yml"
    path.write_text(
        "basic_auth: {username: autoscaler, password_file: password}\n"
        "tls_config: {ca_file: ca.crt}\n"
    )
    return path


def client_tls(directory: Path, tls_material) -> ClientTls:
    """The worker client TLS of copies of the autoscaler's files in ``directory``."""
    files = tls_material.clients["autoscaler"]
    shutil.copy(files.cert, directory / "client.crt")
    shutil.copy(files.key, directory / "client.key")
    return ClientTls(
        ca_file=tls_material.ca,
        cert_file=str(directory / "client.crt"),
        key_file=str(directory / "client.key"),
    )


class TestFollowedFiles:
    async def test_reread_broken_client_files_are_named_and_the_others_taken(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given a web config gaining bob, and an HTTP client config whose CA file and
        password file break, when the files are read again, then one line names both,
        and bob is in force all the same."""
        # Arrange
        path = web_config(tmp_path, tls_material, "alice")
        web = LiveWebConfig.load(str(path), interval=NEVER)
        http = LiveClientConfig.load(str(client_config(tmp_path, tls_material)))
        web_config(tmp_path, tls_material, "alice", "bob")
        (tmp_path / "ca.crt").write_text("not a certificate\n")
        (tmp_path / "password").unlink()
        # Act
        failure = await followed_files(web, http, None)()
        # Assert
        assert "tls_config.ca_file" in failure and str(tmp_path / "ca.crt") in failure
        assert "basic_auth.password_file" in failure and "\n" not in failure
        assert set(web.current.users) == {"alice", "bob"}

    async def test_reread_rotated_worker_tls_moves_the_channels(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given a channel to a worker over client TLS whose certificate is rotated, when
        the files are read again, then they loaded and the channel is no longer the one
        a connection would take (it moves to the new certificate)."""
        # Arrange
        tls = client_tls(tmp_path, tls_material)
        key = ChannelKey("127.0.0.1:1", tls)
        channel = pool().acquire(key)
        files = CertFiles(str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
        try:
            issue(tls_material.ca, files, ("autoscaler",))
            # Act
            failure = await followed_files(None, LiveClientConfig(HttpClientConfig()), tls)()
            moved = not pool().current(key, channel)
        finally:
            await pool().release(key, channel)
        # Assert
        assert (failure, moved) == ("", True)

    async def test_reread_broken_worker_tls_is_named_and_the_last_good_kept(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given a channel to a worker over client TLS whose key file breaks, when the
        files are read again, then the failure names the key file and the channel stays
        the one connections take."""
        # Arrange
        tls = client_tls(tmp_path, tls_material)
        key = ChannelKey("127.0.0.1:1", tls)
        channel = pool().acquire(key)
        try:
            (tmp_path / "client.key").write_text("not a key\n")
            # Act
            failure = await followed_files(None, LiveClientConfig(HttpClientConfig()), tls)()
            kept = pool().current(key, channel)
        finally:
            await pool().release(key, channel)
        # Assert
        assert str(tmp_path / "client.key") in failure
        assert kept


@contextlib.asynccontextmanager
async def https_source(tls_material, seen: list[str | None]) -> AsyncIterator[str]:
    """A recording source over HTTPS (the test CA's server certificate); its URL."""
    tls = LiveWebConfig(
        parse_web_config(
            f"tls_server_config: {{cert_file: {tls_material.server.cert},"
            f" key_file: {tls_material.server.key}}}",
            Path("/"),
        )
    )
    async with serve_app(recording_source(seen), "127.0.0.1:0", tls, path="/metrics") as url:
        yield url


@contextlib.asynccontextmanager
async def reading(http: LiveClientConfig, url: str) -> AsyncIterator[LeasedSource]:
    """The autoscaler's source of ``url``, read through the sessions of ``http``."""
    async with LiveSession(lambda: http.current, origin=url) as sessions:
        yield await LeasedSource.opened(sessions, lambda s: ExporterSource(s, url, (), 10.0))


@contextlib.asynccontextmanager
async def behind_autoscaler(
    make_autoscaler, tmp_path: Path, tls_material, path: Path, seen: list[str | None]
) -> AsyncIterator[tuple[LeasedSource, str]]:
    """A recording HTTPS source (the credentials of its requests go to ``seen``) read
    through the HTTP client config at ``path`` (looked at again only on a reload), and
    an autoscaler following that config whose web config lets alice in over HTTPS:
    the source and the autoscaler's URL."""
    http = LiveClientConfig.load(str(path), interval=NEVER)
    web = LiveWebConfig.load(str(web_config(tmp_path, tls_material, "alice")))
    async with (
        https_source(tls_material, seen) as source_url,
        reading(http, source_url) as source,
        served(make_autoscaler, web, http) as url,
    ):
        yield source, url


class TestHttpConfigReload:
    @pytest.mark.parametrize(
        ("after", "sent"),
        [
            ("basic_auth: {username: bob, password: b}", BOB),
            ("authorization: {credentials: tok}", BEARER),
        ],
        ids=["new-user", "basic-to-bearer"],
    )
    async def test_post_takes_the_new_http_config_at_once(
        self, make_autoscaler, tmp_path: Path, tls_material, after: str, sent: str
    ) -> None:
        """Given an autoscaler reading an HTTPS source as alice, whose --http.config.file
        is rewritten (and that would not look at it for an hour), when POST /-/reload,
        then 200 and the next read sends the new credentials."""
        # Arrange
        path = http_config(tmp_path, tls_material, "basic_auth: {username: alice, password: a}")
        seen: list[str | None] = []
        async with behind_autoscaler(make_autoscaler, tmp_path, tls_material, path, seen) as (
            source,
            url,
        ):
            http_config(tmp_path, tls_material, after)
            await source.read()
            # Act
            reloaded = await ask(f"{url}/-/reload", tls_material, "POST")
            await source.read()
        # Assert
        assert reloaded == (200, "OK\n")
        assert seen == [ALICE, sent]

    @pytest.mark.parametrize(
        ("after", "named"),
        [
            ("basic_auth: {username: bob, pasword: b}", "line 1: unknown key basic_auth.pasword"),
            ("basic_auth: {username: bob, password_file: gone}", "basic_auth.password_file"),
            ("authorization: {credentials: tok}\nca_file: other.crt", "line 2: unknown key"),
            (None, "http.yml': No such file or directory"),
        ],
        ids=["bad-key", "missing-password-file", "misplaced-key", "deleted"],
    )
    async def test_post_broken_http_config_is_500_naming_it_and_keeps_the_last_good(
        self, make_autoscaler, tmp_path: Path, tls_material, after: str | None, named: str
    ) -> None:
        """Given an autoscaler reading an HTTPS source as alice, whose --http.config.file
        breaks (a bad key, a file it names missing, deleted), when POST /-/reload, then
        500 with one line naming the file and what is wrong, and the next read still
        sends alice's credentials over the TLS in force."""
        # Arrange
        path = http_config(tmp_path, tls_material, "basic_auth: {username: alice, password: a}")
        seen: list[str | None] = []
        async with behind_autoscaler(make_autoscaler, tmp_path, tls_material, path, seen) as (
            source,
            url,
        ):
            if after is None:
                path.unlink()
            else:
                path.write_text(after + "\n")
            # Act
            status, text = await ask(f"{url}/-/reload", tls_material, "POST")
            await source.read()
        # Assert
        assert status == 500
        assert text.startswith(f"failed to reload: --http.config.file {path}: ")
        assert named in text and text.count("\n") == 1
        assert seen == [ALICE]

    async def test_post_new_ca_file_path_is_used_by_the_next_read(
        self, make_autoscaler, tmp_path: Path, tls_material
    ) -> None:
        """Given an autoscaler whose --http.config.file trusts a CA that did not sign the
        source's certificate (its reads fail), when the file names another ca_file (the
        right CA) and POST /-/reload, then the next read succeeds."""
        # Arrange
        shutil.copy(tls_material.other_ca, tmp_path / "other.crt")
        path = http_config(tmp_path, tls_material, "", ca_file="other.crt")
        seen: list[str | None] = []
        async with behind_autoscaler(make_autoscaler, tmp_path, tls_material, path, seen) as (
            source,
            url,
        ):
            with pytest.raises(SourceError, match="certificate"):
                await source.read()
            http_config(tmp_path, tls_material, "")
            # Act
            reloaded = await ask(f"{url}/-/reload", tls_material, "POST")
            await source.read()
        # Assert
        assert reloaded == (200, "OK\n")
        assert seen == [None]


class TestSighup:
    async def test_sighup_takes_a_new_http_config(self, tmp_path: Path) -> None:
        """Given a running autoscaler reading its source as alice, when its
        --http.config.file switches to a bearer token and it gets SIGHUP (the unit's
        ExecReload), then it logs the file reloaded and its next reads send the token."""
        # Arrange
        seen: list[str | None] = []
        path = tmp_path / "http.yml"
        path.write_text("basic_auth: {username: alice, password: a}\n")
        async with serve_app(recording_source(seen), "127.0.0.1:0", path="/metrics") as source:
            process = spawn_cli(
                ["autoscaler", "--max-idle", "1h", "--interval", "0.2s", "--dry-run",
                 "--metrics-url", source, "--http.config.file", str(path),
                 "--listen", "127.0.0.1:0"]
            )  # fmt: skip
            lines: list[str] = []
            try:
                assert process.stdout is not None and process.stderr is not None
                assert await asyncio.to_thread(process.stdout.readline)
                threading.Thread(target=collect, args=(process, lines), daemon=True).start()
                assert await eventually_async(lambda: ALICE in seen, 60)
                path.write_text("authorization: {credentials: tok}\n")
                # Act
                process.send_signal(signal.SIGHUP)
                reloaded = await eventually_async(
                    lambda: any("every followed file read again" in line for line in lines), 60
                )
                count = len(seen)
                sent = await eventually_async(lambda: len(seen) > count + 1, 60)
            finally:
                process.terminate()
                await asyncio.to_thread(process.wait, 60)
        # Assert
        assert (reloaded, sent) == (True, True)
        assert any(f"--http.config.file reloaded: {path}" in line for line in lines)
        assert seen[-1] == BEARER


def collect(process: subprocess.Popen[str], lines: list[str]) -> None:
    """Append each line ``process`` writes to stderr to ``lines``, until it closes."""
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line)
