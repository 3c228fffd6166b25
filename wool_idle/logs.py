"""Logging for every subcommand: quiet by default, one line per event, text or JSON.

Both formats stamp each line with its UTC time in ISO 8601, date included
(``2025-01-31T09:15:02.123Z``). An event is one line whatever its text holds:
in the text format a character of the message that is not printable (a line
break of any kind, a control character) is escaped (``\\n``), a traceback's
lines are indented and escaped alike, and an ``extra`` value with a blank, a
quote, a backslash or such a character is written as a JSON string, so a label
value or an error a worker sent cannot forge another line or field; a line over
``MAX_LINE_BYTES`` is cut, so no log collector splits it into two.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from wool_idle.contract import encodes_as_utf8

QUIET_LOGGERS: Final = ("grpc", "asyncio", "aiohttp.access")
MAX_QUOTED: Final = 1000
"""Characters of an input's text that an error or log line quotes (``bounded``)."""
MAX_LINE_BYTES: Final = 16_000
"""The longest line of the text format, in UTF-8 bytes: under the 16 KiB at which Docker
and the CRI split a line (journald: 48 KiB). The rest would read as a line of its own,
and a field quoted in it (escaped, a character may take twelve) could forge that one."""
LEVELS: Final = ("debug", "info", "warning", "error")
FORMATS: Final = ("text", "json")


@dataclass(frozen=True, kw_only=True)
class LogSettings:
    """How logs are written: the least severe level, and ``text`` or ``json``."""

    log_level: str = "info"
    log_format: str = "text"


def timestamp(record: logging.LogRecord) -> str:
    """``record``'s time in UTC, ISO 8601 with milliseconds."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


_STANDARD: Final = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def extra_fields(record: logging.LogRecord) -> dict[str, object]:
    """The fields a call passed as ``extra`` (every non-standard record attribute)."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger>: <message>``, then each ``extra`` field as `` key=value``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return timestamp(record)

    def format(self, record: logging.LogRecord) -> str:
        """The line, and the traceback through ``formatException`` even when another
        formatter cached its own raw text on ``record``."""
        cached, record.exc_text = record.exc_text, None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:
        fields = "".join(f" {k}={field_value(v)}" for k, v in extra_fields(record).items())
        return _within_a_line(printable(super().formatMessage(record)) + fields)

    def formatException(self, ei: Any) -> str:
        """The traceback, each line indented and escaped: none reads as a log line."""
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))


_QUOTED_IF: Final = frozenset(' "\\')


def printable(text: str) -> str:
    """``text`` with each character that is not printable (a line break of any kind,
    a control character, a terminal's escape) as its JSON escape (``\\n``,
    ``\\u2028``, ``\\u001b``): one line that cannot drive a terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)


def _indented(text: str) -> str:
    """Each line of ``text`` made printable and indented two spaces."""
    return "\n".join(_within_a_line("  " + printable(line)) for line in text.split("\n"))


def _within_a_line(line: str) -> str:
    """``line`` (printable), or its start and its size if over ``MAX_LINE_BYTES``."""
    if len(line) * 4 <= MAX_LINE_BYTES:  # at most 4 bytes a character: short enough
        return line
    data = line.encode()
    if len(data) <= MAX_LINE_BYTES:
        return line
    kept = data[: MAX_LINE_BYTES - 64].decode(errors="ignore")
    return f"{kept}... ({len(data)} bytes)"


def bounded(text: str, limit: int = MAX_QUOTED) -> str:
    """``text``, or its first ``limit`` characters and its length if longer: for text
    quoted from an input (a worker's status message, a source's answer, a file's
    label), so that a log line holding it, escaped (a control character as six
    characters, a surrogate pair as twelve), stays under the 16 KiB at which Docker
    and the CRI split a line: the rest would read as a line of its own, which the
    input could have forged."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def field_value(value: object) -> str:
    """``value`` as a text-format field: as it is, or quoted as a JSON string (ASCII)
    when it holds a blank, a quote, a backslash or a character that is not printable.
    Also how a message names a worker: a Unix socket path may hold blanks and
    ``key=value`` text, which would read as fields of another decision."""
    text = str(value)
    if text.isprintable() and _QUOTED_IF.isdisjoint(text):
        return text
    return json.dumps(text)


def json_number(value: object) -> object:
    """``value``, or None for a float that is not finite: ``json.dumps`` writes NaN and
    the infinities as ``NaN`` and ``Infinity``, which are not JSON (a strict parser, a
    log shipper's, refuses the whole line)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(text: str) -> str:
    """``text`` with each lone surrogate (a path's byte that is not UTF-8) as the text
    ``\\udcff``: as JSON escapes, strict parsers refuse them."""
    if text.isascii() or encodes_as_utf8(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode()


def _json_field(value: object) -> object:
    """``value`` for a JSON log line: a non-finite float as null (``json_number``), a
    string as ``json_text``."""
    if isinstance(value, str):
        return json_text(value)
    return json_number(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any ``extra`` fields
    (a float among them that is not finite as null, a lone surrogate as text:
    ``_json_field``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": _json_field(record.getMessage()),
        }
        entry.update((k, _json_field(v)) for k, v in extra_fields(record).items())
        if record.exc_info:
            entry["exception"] = _json_field(self.formatException(record.exc_info))
        return json.dumps(entry, default=str)


class OncePerKind(logging.Filter):
    """Passes the first record of each kind (logger, first line of the message
    before formatting, exception type) among the records ``repeats`` picks (those
    that can repeat without end, e.g. one per connection); the rest of them only
    when the root logger logs at debug level. Records it does not pick pass."""

    MAX_KINDS: Final = 1000
    """Kinds remembered; beyond them every record picked counts as a repeat."""

    def __init__(self, repeats: Callable[[logging.LogRecord], bool]) -> None:
        super().__init__()
        self.repeats = repeats
        self.seen: set[tuple[str, str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.repeats(record):
            return True
        error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        kind = (record.name, str(record.msg).split("\n", 1)[0], error)
        if kind not in self.seen and len(self.seen) < self.MAX_KINDS:
            self.seen.add(kind)
            return True
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def from_loggers(*names: str) -> Callable[[logging.LogRecord], bool]:
    """Picks the records of the loggers ``names`` and of their children."""

    def picks(record: logging.LogRecord) -> bool:
        return any(record.name == n or record.name.startswith(f"{n}.") for n in names)

    return picks


def log_repeats_once(*names: str) -> None:
    """Add a ``OncePerKind`` filter for the loggers ``names`` (and their children) to
    the root logger's handlers (call after logging is configured)."""
    once = OncePerKind(from_loggers(*names))
    for handler in logging.getLogger().handlers:
        handler.addFilter(once)


def quiet_grpc() -> None:
    """Silence gRPC's C-core chatter (its errors go straight to stderr, past every
    log filter); call before grpc is first imported, which is when it reads this."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    os.environ.setdefault("GRPC_TRACE", "")


def configure(settings: LogSettings) -> None:
    """Send logs to stderr in ``settings.log_format`` at ``settings.log_level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
