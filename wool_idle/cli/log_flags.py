"""``--log.level`` and ``--log.format`` (aliases ``--log-level``, ``--log-format``)."""

from __future__ import annotations

import argparse

from wool_idle import logs
from wool_idle.cli.parser import Parser, settings_from
from wool_idle.cli.values import choice


def add_log_flags(parser: Parser) -> None:
    """Add the logging flags, with the defaults of ``logs.LogSettings``."""
    section = parser.section("logging", settings=(logs.LogSettings,))
    section.add(
        "--log.level",
        choice(*logs.LEVELS),
        "least severe level logged",
        aliases=("--log-level",),
    )
    section.add("--log.format", choice(*logs.FORMATS), "log line format", aliases=("--log-format",))


def configure_logging(args: argparse.Namespace) -> None:
    """Send logs to stderr as the logging flags say."""
    logs.configure(settings_from(args, logs.LogSettings))
