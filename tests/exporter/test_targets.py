"""Parsing and reloading the file_sd targets file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wool_idle.exporter.targets import (
    Target,
    TargetSet,
    TargetsFileError,
    parse_targets_document,
)


class TestParseTargetsDocument:
    def test_parse_json_and_yaml_with_labels(self) -> None:
        """Given the same groups as JSON and as YAML, when parsed, then both give the
        targets with their labels."""
        # Arrange
        groups = [
            {"targets": ["a:1", "b:2"], "labels": {"pool": "gpu"}},
            {"targets": ["unix:/run/w.sock"]},
        ]
        as_yaml = "- targets: [a:1, b:2]\n  labels: {pool: gpu}\n- targets: ['unix:/run/w.sock']\n"
        # Act
        from_json = parse_targets_document(json.dumps(groups))
        from_yaml = parse_targets_document(as_yaml)
        # Assert
        expected = [
            Target("a:1", (("pool", "gpu"),)),
            Target("b:2", (("pool", "gpu"),)),
            Target("unix:/run/w.sock"),
        ]
        assert from_json == from_yaml == expected

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("{targets: [a:1]}", "list"),
            ("[{targets: a:1}]", "list of strings"),
            ("[{targets: [1]}]", "list of strings"),
            ("[{targets: ['nohost']}]", "invalid address"),
            ("[{targets: ['a:1'], labels: [x]}]", "mapping"),
            ("[{targets: ['a:1'], labels: {worker: x}}]", "reserved"),
            ("[{targets: ['a:1'], labels: {__meta: x}}]", "invalid label name"),
            ("[{targets: ['a:1'], labels: {'bad-name': x}}]", "invalid label name"),
            ("[{targets: ['a:1'], labels: {pool: 3}}]", "string value"),
            ("[{targets: ['a:1'], extra: 1}]", "only"),
            ("[1, 2", "YAML"),
        ],
    )
    def test_parse_rejects_malformed(self, text: str, message: str) -> None:
        """Given a malformed document, when parsed, then TargetsFileError says what."""
        # Act / Assert
        with pytest.raises(TargetsFileError, match=message):
            parse_targets_document(text)

    @given(st.text(max_size=300))
    def test_parse_fuzz_never_crashes_otherwise(self, text: str) -> None:
        """Given arbitrary text, when parsed, then it yields targets or raises
        TargetsFileError, never anything else."""
        # Act
        try:
            targets = parse_targets_document(text)
        except TargetsFileError:
            return
        # Assert
        assert all(isinstance(t, Target) for t in targets)


class TestTargetSet:
    def test_reload_broken_file_keeps_last_good_set(self, tmp_path: Path) -> None:
        """Given a loaded targets file, when it is replaced by a broken one and
        reloaded, then the previous set stays and reload_success is False; fixing it
        loads the new set and reload_success is True again."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("- targets: ['a:1']\n")
        targets = TargetSet(static=(Target("s:9"),), path=str(path))
        targets.reload()
        stamp = targets.reload_timestamp
        # Act
        path.write_text("- targets: ['a:1'\n")
        broken = targets.reload()
        kept = [t.address for t in targets.all()]
        path.write_text("- targets: ['b:2']\n")
        os.utime(path, ns=(1, 2))
        fixed = targets.reload()
        # Assert
        assert (broken, kept, targets.reload_timestamp >= stamp) == (False, ["s:9", "a:1"], True)
        assert fixed and targets.reload_success
        assert [t.address for t in targets.all()] == ["s:9", "b:2"]

    def test_reload_unreadable_file(self, tmp_path: Path) -> None:
        """Given a path that does not exist, when reloaded, then no targets and failure."""
        # Arrange
        targets = TargetSet(path=str(tmp_path / "missing.json"))
        # Act
        ok = targets.reload(force=True)
        # Assert
        assert (ok, targets.all(), targets.loaded) == (False, [], False)
