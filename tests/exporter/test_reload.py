"""``POST /-/reload``: re-read the targets file over HTTP, as SIGHUP does."""

from __future__ import annotations

import json
from pathlib import Path


def write_targets(path: Path, addresses: list[str]) -> None:
    path.write_text(json.dumps([{"targets": addresses}]))


class TestReloadHandler:
    async def test_reload_picks_up_the_file(self, exporter, tmp_path: Path) -> None:
        """Given a targets file changed after start, when POST /-/reload, then 200 and
        the new targets are scraped."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        client = await exporter(path=str(path))
        write_targets(path, ["127.0.0.1:1", "127.0.0.1:2"])
        # Act
        response = await client.post("/-/reload")
        # Assert
        assert response.status == 200
        assert [t.address for t in client.targets.all()] == ["127.0.0.1:1", "127.0.0.1:2"]

    async def test_reload_bad_file_500_keeps_targets(self, exporter, tmp_path: Path) -> None:
        """Given a targets file broken after start, when POST /-/reload, then 500 with
        the reason, and the last good targets stay."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        client = await exporter(path=str(path))
        path.write_text('[{"targets": ["no port"]}]')
        # Act
        response = await client.post("/-/reload")
        text = await response.text()
        # Assert
        assert response.status == 500
        assert text.startswith("failed to reload: ") and "no port" in text
        assert [t.address for t in client.targets.all()] == ["127.0.0.1:1"]

    async def test_reload_only_post(self, exporter, tmp_path: Path) -> None:
        """Given the exporter, when GET /-/reload, then 405 and nothing is re-read."""
        # Arrange
        path = tmp_path / "targets.json"
        write_targets(path, ["127.0.0.1:1"])
        client = await exporter(path=str(path))
        write_targets(path, ["127.0.0.1:2"])
        # Act
        response = await client.get("/-/reload")
        # Assert
        assert response.status == 405
        assert [t.address for t in client.targets.all()] == ["127.0.0.1:1"]
