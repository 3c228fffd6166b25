"""Log lines: text and JSON, each stamped with the date and time."""

from __future__ import annotations

import json
import logging
import math
import re
import sys

import pytest

from wool_idle.logs import JsonFormatter, OncePerKind, TextFormatter, from_loggers

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

    def test_text_line_cannot_be_forged(self) -> None:
        """Given a message holding a newline (an error a worker sent) and extra fields
        holding a newline, a blank and a quote (a label value), when formatted as text,
        then it stays one line, each such field quoted as a JSON string, and plain
        fields as they are."""
        # Arrange
        entry = record()
        entry.args = ("h:1\n2023-11-14T22:13:21.000Z INFO wool_idle.autoscaler: decision",)
        entry.group = "pool=a\n2023 INFO decision worker=b:1 result=stopped"
        entry.note = 'a "b"'
        entry.verdict = "stop"
        # Act
        line = TextFormatter().format(entry)
        # Assert
        assert "\n" not in line
        assert line == (
            "2023-11-14T22:13:20.250Z INFO wool_idle.autoscaler: worker=h:1\\n"
            "2023-11-14T22:13:21.000Z INFO wool_idle.autoscaler: decision"
            ' group="pool=a\\n2023 INFO decision worker=b:1 result=stopped"'
            ' note="a \\"b\\"" verdict=stop'
        )

    def test_text_line_breaks_of_any_kind_and_tracebacks_cannot_forge(self) -> None:
        """Given a message with a Unicode line separator and a next-line character, and
        an exception whose text holds a newline and a forged log line, when formatted
        as text, then the message stays on its line, and every line of the traceback
        is indented (none starts as a log line does)."""
        # Arrange
        entry = record()
        entry.args = ("h:1\u2028forged\x85too",)
        try:
            raise RuntimeError("boom\n2023-11-14T22:13:21.000Z INFO wool_idle.autoscaler: decision")
        except RuntimeError:
            entry.exc_info = sys.exc_info()
        logging.Formatter().format(entry)  # another handler's formatter caches raw text
        # Act
        lines = TextFormatter().format(entry).split("\n")
        # Assert
        assert lines[0] == (
            "2023-11-14T22:13:20.250Z INFO wool_idle.autoscaler: worker=h:1\\u2028forged\\u0085too"
        )
        assert all(line.startswith("  ") for line in lines[1:])
        assert any("decision" in line for line in lines[1:])

    def test_json_line_non_finite_number_is_null(self) -> None:
        """Given extra fields holding NaN and the infinities (the idle time a hostile
        worker confirmed), when formatted as JSON, then the line is JSON that a strict
        parser reads (``json.dumps`` writes them as ``NaN``, ``Infinity``, which are
        not), each of them null, and a finite number as it is."""
        # Arrange
        entry = record()
        entry.confirmed_idle, entry.high, entry.low = math.nan, math.inf, -math.inf
        entry.source_idle = 600.5
        # Act
        line = JsonFormatter().format(entry)
        # Assert
        fields = json.loads(line, parse_constant=_refuse)
        assert [fields[k] for k in ("confirmed_idle", "high", "low")] == [None, None, None]
        assert fields["source_idle"] == 600.5

    def test_json_line_lone_surrogates_are_text(self) -> None:
        """Given a message quoting a path with a byte that is not UTF-8 (a flag's path,
        read as ``\\udcff``) and a field holding a lone surrogate, when formatted as
        JSON, then every string of the line is Unicode text (a lone surrogate escape is
        refused by strict parsers, a log shipper's among them), the surrogate kept as
        the text ``\\udcff``."""
        # Arrange
        entry = record()
        entry.args = ("/etc/wool-idle/\udcff.yml",)
        entry.group = "a\ud800b"
        # Act
        fields = json.loads(JsonFormatter().format(entry))
        # Assert
        assert fields["message"] == "worker=/etc/wool-idle/\\udcff.yml"
        assert fields["group"] == "a\\ud800b"

    @pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()])
    def test_both_formats_share_the_timestamp(self, formatter: logging.Formatter) -> None:
        """Given a record, then text and JSON carry the same ISO 8601 timestamp."""
        # Act
        line = formatter.format(record())
        # Assert
        stamp = json.loads(line)["time"] if line.startswith("{") else line.split()[0]
        assert re.fullmatch(ISO_UTC, stamp) and stamp == "2023-11-14T22:13:20.250Z"


def _refuse(constant: str) -> None:
    """A strict JSON parser's answer to ``NaN`` or ``Infinity``: they are not JSON."""
    raise ValueError(f"{constant} is not JSON")


class Collected(logging.Handler):
    """Keeps the records that pass its filters."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def accept_failure(logger: logging.Logger, fd: int) -> None:
    """What asyncio's default exception handler logs when accept() runs out of files."""
    try:
        raise OSError(24, "Too many open files")
    except OSError:
        logger.error(
            f"socket.accept() out of system resource\nsocket: <socket fd={fd}>", exc_info=True
        )


class TestOncePerKind:
    def test_filter_passes_first_of_each_kind_only(self) -> None:
        """Given the filter for asyncio on a handler, when asyncio logs the same accept
        failure for 100 sockets, another error twice, and another logger logs twice,
        then the handler gets the first accept failure with its traceback, the other
        error once, and both records of the other logger."""
        # Arrange
        handler = Collected()
        handler.addFilter(OncePerKind(from_loggers("asyncio")))
        noisy, other = logging.getLogger("asyncio.test"), logging.getLogger("wool_idle.test")
        for logger in (noisy, other):
            logger.addHandler(handler)
            logger.propagate = False
        try:
            # Act
            for fd in range(100):
                accept_failure(noisy, fd)
            noisy.error("Task exception was never retrieved")
            noisy.error("Task exception was never retrieved")
            other.error("a decision")
            other.error("a decision")
        finally:
            for logger in (noisy, other):
                logger.removeHandler(handler)
                logger.propagate = True
        # Assert
        messages = [(r.name, r.getMessage().split("\n")[0]) for r in handler.records]
        assert messages == [
            ("asyncio.test", "socket.accept() out of system resource"),
            ("asyncio.test", "Task exception was never retrieved"),
            ("wool_idle.test", "a decision"),
            ("wool_idle.test", "a decision"),
        ]
        assert handler.records[0].exc_info is not None
