"""Log lines: text and JSON, each stamped with the date and time."""

from __future__ import annotations

import json
import logging
import re

import pytest

from wool_idle.logs import JsonFormatter, TextFormatter

ISO_UTC = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"


def record() -> logging.LogRecord:
    entry = logging.makeLogRecord(
        {"name": "wool_idle.autoscaler", "levelname": "INFO", "msg": "worker=%s", "args": ("h:1",)}
    )
    entry.created = 1_700_000_000.25  # 2023-11-14T22:13:20.250Z
    entry.msecs = 250.0
    return entry


class TestFormatters:
    def test_text_line_carries_the_date(self) -> None:
        """Given a log record, when formatted as text, then the line starts with its
        UTC date and time in ISO 8601."""
        # Act
        line = TextFormatter().format(record())
        # Assert
        assert line == "2023-11-14T22:13:20.250Z INFO wool_idle.autoscaler: worker=h:1"

    @pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()])
    def test_both_formats_share_the_timestamp(self, formatter: logging.Formatter) -> None:
        """Given a record, then text and JSON carry the same ISO 8601 timestamp."""
        # Act
        line = formatter.format(record())
        # Assert
        stamp = json.loads(line)["time"] if line.startswith("{") else line.split()[0]
        assert re.fullmatch(ISO_UTC, stamp) and stamp == "2023-11-14T22:13:20.250Z"
