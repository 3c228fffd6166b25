"""The HTTP client config in force follows --http.config.file: good versions replace
it (logged first), a version seen once or that does not load leaves it in force."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.clock import Clock

from wool_idle.web.client_config import ClientConfigError, HttpClientConfig
from wool_idle.web.live_client_config import LiveClientConfig

LOGGER = "wool_idle.web.live_client_config"


def header(live: LiveClientConfig) -> str | None:
    """The ``Authorization`` header the config in force sends."""
    credentials = live.current.credentials
    return None if credentials is None else credentials.header()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


class TestLiveClientConfig:
    async def test_recheck_takes_a_version_only_once_two_looks_found_it(
        self, tmp_path: Path
    ) -> None:
        """Given a followed file with token one, when it is rewritten with token two and
        looked at once (a file caught while it is written), then one stays in force;
        after a second look that found the same bytes, two is in force."""
        # Arrange
        path = tmp_path / "http.yml"
        path.write_text("authorization: {credentials: one}\n")
        live = LiveClientConfig.load(str(path))
        path.write_text("authorization: {credentials: two}\n")
        # Act
        await live.recheck()
        after_one_look = header(live)
        await live.recheck()
        # Assert
        assert (after_one_look, header(live)) == ("Bearer one", "Bearer two")

    async def test_recheck_broken_version_is_logged_once_and_the_last_good_kept(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a followed file, when it is rewritten with an unknown key and looked at
        four times, then the last good config stays and one warning names the file,
        the line and the key."""
        # Arrange
        path = tmp_path / "http.yml"
        path.write_text("authorization: {credentials: one}\n")
        live = LiveClientConfig.load(str(path))
        caplog.set_level(logging.WARNING, logger=LOGGER)
        path.write_text("authorization: {credentials: two}\nfollow_redirect: false\n")
        # Act
        for _ in range(4):
            await live.recheck()
        # Assert
        assert header(live) == "Bearer one"
        assert len(warnings(caplog)) == 1
        assert str(path) in warnings(caplog)[0]
        assert "line 2: unknown key follow_redirect" in warnings(caplog)[0]

    async def test_recheck_refused_version_is_tried_again_after_the_retry(
        self, tmp_path: Path
    ) -> None:
        """Given a followed file naming a password file that does not exist yet, when
        the password file appears, then the same bytes are loaded once the retry time
        has passed, not before."""
        # Arrange
        clock = Clock()
        path = tmp_path / "http.yml"
        path.write_text("follow_redirects: true\n")
        live = LiveClientConfig.load(str(path), retry=10.0, clock=clock)
        path.write_text("basic_auth: {username: a, password_file: pw}\n")
        await live.recheck()
        await live.recheck()
        (tmp_path / "pw").write_text("secret\n")
        # Act
        await live.recheck()
        before_retry = header(live)
        clock.now += 10.0
        await live.recheck()
        # Assert
        assert before_retry is None
        assert header(live) is not None and header(live) == "Basic YTpzZWNyZXQ="

    async def test_reload_deleted_file_names_it_and_keeps_the_last_good(
        self, tmp_path: Path
    ) -> None:
        """Given a followed file, when it is deleted and reloaded, then the failure
        names the file and why, and the last good config stays in force."""
        # Arrange
        path = tmp_path / "http.yml"
        path.write_text("authorization: {credentials: one}\n")
        live = LiveClientConfig.load(str(path))
        path.unlink()
        # Act
        failure = await live.reload()
        # Assert
        assert failure == f"{path}: cannot read {str(path)!r}: No such file or directory"
        assert header(live) == "Bearer one"

    async def test_reload_new_follow_redirects_is_taken(self, tmp_path: Path) -> None:
        """Given a followed file following redirects, when it says follow_redirects:
        false and is reloaded, then the config in force no longer follows them."""
        # Arrange
        path = tmp_path / "http.yml"
        path.write_text("follow_redirects: true\n")
        live = LiveClientConfig.load(str(path))
        path.write_text("follow_redirects: false\n")
        # Act
        failure = await live.reload()
        # Assert
        assert (failure, live.current.follow_redirects) == ("", False)

    async def test_reload_version_the_adapter_refuses_keeps_the_last_good(
        self, tmp_path: Path
    ) -> None:
        """Given a followed file whose versions must carry no credentials (the source
        URL carries them), when it gains a bearer token and is reloaded, then the
        failure says why and the config in force stays."""

        # Arrange
        def no_credentials(config: HttpClientConfig) -> HttpClientConfig:
            if config.credentials is not None:
                raise ClientConfigError("the URL carries credentials")
            return config

        path = tmp_path / "http.yml"
        path.write_text("follow_redirects: true\n")
        live = LiveClientConfig.load(str(path), no_credentials)
        first = live.current
        path.write_text("bearer_token: tok\n")
        # Act
        failure = await live.reload()
        # Assert
        assert failure == f"{path}: the URL carries credentials"
        assert live.current is first
