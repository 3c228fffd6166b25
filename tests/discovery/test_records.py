"""A worker record from wool 0.15's own ``WorkerMetadata``."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from wool import WorkerMetadata

from wool_idle.contract import MAX_LABELS_TEXT
from wool_idle.discovery.attachment import FollowProblem
from wool_idle.discovery.records import InvalidRecord, WorkerRecord


def metadata(address: str = "127.0.0.1:5001", **fields) -> WorkerMetadata:
    return WorkerMetadata(
        uid=fields.pop("uid", uuid.UUID(int=7)), address=address, pid=12, version="0.15.7", **fields
    )


class TestWorkerRecord:
    def test_from_metadata_keeps_every_fact_comparable(self) -> None:
        """Given wool metadata with unordered tags and extra facts, when turned into a
        record, then its facts are plain values (tags and extra sorted), equal to the
        record of the same metadata announced again."""
        # Arrange
        given = metadata(
            tags=frozenset({"hot", "gpu"}), extra={"zone": "eu", "a": "1"}, secure=True
        )
        # Act
        record = WorkerRecord.from_metadata(given)
        # Assert
        assert record == WorkerRecord(
            uid="00000000-0000-0000-0000-000000000007",
            address="127.0.0.1:5001",
            pid=12,
            version="0.15.7",
            tags=("gpu", "hot"),
            extra=(("a", "1"), ("zone", "eu")),
            secure=True,
        )
        assert record.tags_label == "gpu,hot"
        assert record == WorkerRecord.from_metadata(
            metadata(tags=frozenset({"gpu", "hot"}), extra={"a": "1", "zone": "eu"}, secure=True)
        )

    def test_tags_label_never_shared_by_two_tag_sets(self) -> None:
        """Given a worker tagged "gpu,hot" and one tagged "gpu" and "hot" (and tags
        with backslashes), then their tags labels differ: --group-by wool_tags never
        puts them in one pool."""
        # Arrange
        sets = [{"gpu,hot"}, {"gpu", "hot"}, {"a\\", "b"}, {"a\\,b"}, {"a", "\\b"}]
        # Act
        labels = [WorkerRecord.from_metadata(metadata(tags=frozenset(t))).tags_label for t in sets]
        # Assert
        assert labels[:2] == ["gpu\\,hot", "gpu,hot"]
        assert len(set(labels)) == len(sets)

    def test_tags_label_lone_empty_tag_is_not_no_tags(self) -> None:
        """Given a worker whose one tag is empty and a worker without tags, then their
        tags labels differ: --group-by wool_tags never merges the two pools."""
        # Act
        lone = WorkerRecord.from_metadata(metadata(tags=frozenset({""})))
        # Assert
        assert lone.tags_label == ","
        assert lone.tags_label != WorkerRecord.from_metadata(metadata()).tags_label

    def test_tags_label_empty_without_tags(self) -> None:
        """Given a worker without tags, then its tags label is empty."""
        # Act / Assert
        assert WorkerRecord.from_metadata(metadata()).tags_label == ""

    @pytest.mark.parametrize("address", ["", "localhost", "127.0.0.1:0", "a b:1", "h:99999"])
    def test_from_metadata_bad_address_is_invalid(self, address: str) -> None:
        """Given metadata whose address is not a worker address, when turned into a
        record, then InvalidRecord names the worker and keeps the address."""
        # Act
        with pytest.raises(InvalidRecord) as raised:
            WorkerRecord.from_metadata(metadata(address))
        # Assert
        assert raised.value.uid == "00000000-0000-0000-0000-000000000007"
        assert raised.value.address == address
        assert "00000000-0000-0000-0000-000000000007" in str(raised.value)

    @pytest.mark.parametrize(
        "fields", [{"tags": frozenset({"hot", "bad\ud800"})}, {"version": "0.15\udcff"}]
    )
    def test_from_metadata_label_not_utf8_is_invalid(self, fields: dict[str, object]) -> None:
        """Given metadata whose tags or version hold a lone surrogate (a LAN record's JSON
        escape gives one), when turned into a record, then InvalidRecord says so, as an
        invalid record: no label can carry that text."""
        # Act
        with pytest.raises(InvalidRecord) as raised:
            WorkerRecord.from_metadata(dataclasses.replace(metadata(), **fields))
        # Assert
        assert raised.value.problem is FollowProblem.INVALID_RECORD
        assert "not valid UTF-8" in str(raised.value)

    @pytest.mark.parametrize(
        "fields",
        [{"tags": frozenset({"hot", "x" * MAX_LABELS_TEXT})}, {"version": "0" * MAX_LABELS_TEXT}],
    )
    def test_from_metadata_labels_over_the_exposition_limit_are_invalid(
        self, fields: dict[str, object]
    ) -> None:
        """Given metadata whose tags or version would take more than MAX_LABELS_TEXT
        characters in exposition text (each series line of the worker too long for the
        autoscaler, which then refuses the whole /metrics), when turned into a record,
        then InvalidRecord says so, as an invalid record."""
        # Act
        with pytest.raises(InvalidRecord) as raised:
            WorkerRecord.from_metadata(dataclasses.replace(metadata(), **fields))
        # Assert
        assert raised.value.problem is FollowProblem.INVALID_RECORD
        assert str(MAX_LABELS_TEXT) in str(raised.value)
