"""YAML read the way Prometheus's strict Go decoder reads it."""

from __future__ import annotations

import gc

import pytest
import yaml

from wool_idle.exporter.strict_yaml import load_yaml


class TestLoadYaml:
    def test_load_scalars_as_written(self) -> None:
        """Given scalars YAML would read as numbers, booleans, dates and null, when
        loaded, then each is its text, except null."""
        # Act
        loaded = load_yaml(b"[3.0, 0x1F, yes, 2001-12-14, ~, null, '', !!int 7, !!binary aGk=]")
        # Assert
        assert loaded == ["3.0", "0x1F", "yes", "2001-12-14", None, None, "", "7", "hi"]

    def test_load_first_document_only(self) -> None:
        """Given two documents, the second broken, when loaded, then the first is."""
        assert load_yaml(b"- a\n---\n- [\n") == ["a"]

    @pytest.mark.parametrize(
        "text",
        [b"{a: 1, a: 2}", b"{<<: {a: 1}, a: 2}", b"{<<: [{a: 1}, {a: 2}]}", b"!!null x"],
    )
    def test_load_rejects_what_go_rejects(self, text: bytes) -> None:
        """Given a key set twice (directly or by merging) or a null with text, when
        loaded, then a YAML error."""
        with pytest.raises(yaml.YAMLError):
            load_yaml(text)

    def test_load_merge_after_key_keeps_the_key(self) -> None:
        """Given a key and then a merge of the same key, when loaded, then the key's
        own value stays (Go ignores the merged one)."""
        assert load_yaml(b"{a: 1, <<: {a: 2, b: 3}}") == {"a": "1", "b": "3"}

    @pytest.mark.parametrize("enabled", [True, False])
    def test_load_restores_the_garbage_collector(self, enabled: bool) -> None:
        """Given the collector on or off, when a document loads or fails to, then it
        is as it was."""
        # Arrange
        was = gc.isenabled()
        (gc.enable if enabled else gc.disable)()
        try:
            # Act
            load_yaml(b"- a\n")
            with pytest.raises(yaml.YAMLError):
                load_yaml(b"[")
            # Assert
            assert gc.isenabled() is enabled
        finally:
            (gc.enable if was else gc.disable)()
