"""``wool-idle demo``: a real wool fleet (a durable LocalDiscovery namespace with a
hot and a cold pool, all idle at the start), the exporter following it by
discovery, the autoscaler retiring idle workers while keeping one per tag, and
a wool client on the hot tag that starts later and loses no task. A live table
shows each worker's tags, state and the autoscaler's decision; the end says who
was retired, what is left, the client's counts, and that no process is left."""

from __future__ import annotations

import argparse
import asyncio

from wool_idle import logs
from wool_idle.cli.parser import Parser, help_from_docstring, settings_from
from wool_idle.cli.values import DURATION, POSITIVE_DURATION, whole_number
from wool_idle.demo.settings import DemoSettings
from wool_idle.discovery.follow import WoolMissing, require_wool


def register(root: Parser) -> None:
    """Add ``demo`` to the top-level parser."""
    parser = root.add_subcommand(
        "demo",
        help="watch a real wool pool's idle workers being retired",
        description=help_from_docstring(__doc__),
        settings=[DemoSettings],
    )
    fleet = parser.section("fleet", "the wool pools, all idle at the start")
    fleet.add("--hot", whole_number(1), "wool workers tagged hot (the client's pool)")
    fleet.add("--cold", whole_number(1), "wool workers tagged cold (nobody's pool)")
    timeline = parser.section("timeline", "counted from the moment every process is up")
    timeline.add("--max-idle", POSITIVE_DURATION, "retire workers idle this long")
    timeline.add("--client-after", DURATION, "when the wool client on the hot tag starts")
    timeline.add("--duration", DURATION, "how long the demo runs (0: until Ctrl-C)")
    timeline.add("--refresh", POSITIVE_DURATION, "how often the table is redrawn")
    parser.set_defaults(func=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    """Run the demo; every child process is gone when it returns."""
    try:
        settings = settings_from(args, DemoSettings)
    except ValueError:
        args.parser.error("argument --client-after: must be less than --duration")
    try:
        require_wool()
    except WoolMissing as error:
        args.parser.error(str(error))
    from wool_idle.demo.show import Demo  # after the checks: it loads aiohttp and more

    logs.configure(logs.LogSettings(log_level="warning"))
    return asyncio.run(Demo(settings).run())
