"""What every followed config file shares (``FollowedConfig``), through both of its
followers: the web config and the HTTP client config."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from wool_idle.web.live_client_config import LiveClientConfig
from wool_idle.web.live_config import LiveWebConfig

FOLLOWERS: dict[str, tuple[type[LiveWebConfig | LiveClientConfig], str, str]] = {
    "web": (
        LiveWebConfig,
        "http_server_config: {headers: {X-Frame-Options: deny}}\n",
        "http_server_config: {headers: {X-Frame-Options: sameorigin}}\n",
    ),
    "client": (
        LiveClientConfig,
        "authorization: {credentials: one}\n",
        "authorization: {credentials: two}\n",
    ),
}
"""Each follower, and two versions of its file."""


class TestFollowedConfig:
    @pytest.mark.parametrize("kind", sorted(FOLLOWERS))
    async def test_reload_logs_reloaded_before_the_new_version_is_in_force(
        self, kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a followed file rewritten with a new version, when it is reloaded, then
        the line saying so (naming the file) is written while the version before is
        still in force, and the new one is in force after it."""
        # Arrange
        follower, before, after = FOLLOWERS[kind]
        path = tmp_path / "config.yml"
        path.write_text(before)
        live = follower.load(str(path))
        first = live.current
        first_in_force_when_logged: list[bool] = []

        class Witness(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "reloaded" in record.getMessage():
                    first_in_force_when_logged.append(live.current is first)

        witness = Witness()
        live.log.addHandler(witness)
        caplog.set_level(logging.INFO, logger=live.log.name)
        path.write_text(after)
        # Act
        try:
            failure = await live.reload_file()
        finally:
            live.log.removeHandler(witness)
        # Assert
        assert failure == ""
        assert first_in_force_when_logged == [True]
        assert f"{live.NAME} reloaded: {path}" in caplog.messages
        assert live.current is not first
