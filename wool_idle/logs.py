"""Logging for every subcommand: quiet by default, one line per event, text or JSON."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Final

QUIET_LOGGERS: Final = ("grpc", "asyncio", "aiohttp.access")


_STANDARD: Final = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def extra_fields(record: logging.LogRecord) -> dict[str, object]:
    """The fields a call passed as ``extra`` (every non-standard record attribute)."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class TextFormatter(logging.Formatter):
    """``time level logger: message``, then each ``extra`` field as `` key=value``."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        fields = "".join(f" {k}={v}" for k, v in extra_fields(record).items())
        return super().formatMessage(record) + fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(extra_fields(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def quiet_grpc() -> None:
    """Silence gRPC's C-core chatter; call before grpc opens its first channel."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    os.environ.setdefault("GRPC_TRACE", "")


def configure(log_format: str = "text", level: str = "info") -> None:
    """Send logs to stderr in ``log_format`` (``text`` or ``json``) at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
