"""A LocalDiscovery namespace's files, written only when they are what wool makes."""

from __future__ import annotations

import os

import pytest

from wool_idle.discovery.namespace_files import wake_subscribers


class TestWakeSubscribers:
    def test_wake_truncates_a_regular_notify_file(self, tmp_path) -> None:
        """Given wool's notify file, when subscribers are woken, then it is truncated."""
        # Arrange
        notify = tmp_path / "notify"
        notify.write_text("x")
        # Act
        wake_subscribers(notify)
        # Assert
        assert notify.read_text() == ""

    def test_wake_refuses_a_file_with_a_second_link(self, tmp_path) -> None:
        """Given a notify file hard-linked to another name, when subscribers are woken,
        then OSError and both names keep the content."""
        # Arrange
        other = tmp_path / "other"
        other.write_text("keep me")
        notify = tmp_path / "notify"
        os.link(other, notify)
        # Act / Assert
        with pytest.raises(OSError, match="one link"):
            wake_subscribers(notify)
        assert other.read_text() == "keep me"
