"""``/sd``: every target of every source in Prometheus's http_sd format."""

from __future__ import annotations

import json
from pathlib import Path

from wool_idle.exporter.sd import SdBody, sd_groups
from wool_idle.exporter.target import Target, pool_digest
from wool_idle.exporter.targets import TargetSet


class TestSdGroups:
    def test_sd_groups_labels_and_meta(self) -> None:
        """Given a target with labels and one with discovery info, then each is a group
        of its own with its series labels, the info as __meta_wool_* labels, and its
        labels' digest as __param_pool (/probe's pool parameter)."""
        # Arrange
        pool, namespace = (("pool", "a"),), (("wool_namespace", "ns"),)
        targets = [Target("f:1", pool), Target("d:2", namespace, info=(("pid", "7"), ("uid", "u")))]
        # Act
        groups = sd_groups(targets)
        # Assert
        assert groups == [
            {"targets": ["f:1"], "labels": {"pool": "a", "__param_pool": pool_digest(pool)}},
            {
                "targets": ["d:2"],
                "labels": {
                    "wool_namespace": "ns",
                    "__meta_wool_pid": "7",
                    "__meta_wool_uid": "u",
                    "__param_pool": pool_digest(namespace),
                },
            },
        ]
        assert pool_digest(pool) != pool_digest(namespace)


class TestSdBody:
    def test_body_rebuilt_only_when_targets_change(self, tmp_path: Path) -> None:
        """Given a target set of a flag and a file, then the body lists both, is the
        same bytes while the set is unchanged, and lists the discovered target once set."""
        # Arrange
        path = tmp_path / "targets.json"
        path.write_text('[{"targets": ["f:1"], "labels": {"pool": "a"}}]')
        targets = TargetSet(static=(Target("s:9"),), path=str(path))
        targets.reload()
        body = SdBody(targets)
        pool = (("pool", "a"),)
        # Act
        first, again = body(), body()
        targets.set_discovered([Target("d:2", (("wool_namespace", "ns"),))])
        changed = json.loads(body())
        # Assert
        assert json.loads(first) == [
            {"targets": ["s:9"], "labels": {"__param_pool": pool_digest(())}},
            {"targets": ["f:1"], "labels": {"pool": "a", "__param_pool": pool_digest(pool)}},
        ]
        assert again is first
        assert changed[-1]["labels"]["wool_namespace"] == "ns"


class TestSdEndpoint:
    async def test_sd_static_targets_as_json(self, exporter) -> None:
        """Given an exporter with static targets, when /sd is read over HTTP, then it is
        application/json (as Prometheus requires) listing them."""
        # Arrange
        client = await exporter(["127.0.0.1:1", "127.0.0.1:2"])
        # Act
        response = await client.get("/sd")
        # Assert
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json; charset=utf-8"
        assert [g["targets"] for g in await response.json()] == [["127.0.0.1:1"], ["127.0.0.1:2"]]

    async def test_sd_unavailable_until_targets_file_loads(self, exporter, tmp_path: Path) -> None:
        """Given an exporter started with a targets file that does not parse (a restart
        during a bad deploy), when /sd is read, then it answers 503 saying why, not an
        empty list that would have every shard drop all its workers; once the file is
        fixed and reloaded, then /sd lists its targets."""
        # Arrange
        path = tmp_path / "targets.json"
        path.write_text("[{broken")
        client = await exporter(["127.0.0.1:1"], path=str(path))
        # Act
        before = await client.get("/sd")
        path.write_text('[{"targets": ["127.0.0.1:2"]}]')
        client.targets.reload()
        after = await client.get("/sd")
        # Assert
        assert before.status == 503
        assert "targets file not loaded" in await before.text()
        assert after.status == 200
        assert [g["targets"] for g in await after.json()] == [["127.0.0.1:1"], ["127.0.0.1:2"]]
