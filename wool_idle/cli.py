"""The ``wool-idle`` command: one subcommand per part."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from wool_idle import logs, options


def build_parser() -> options.Parser:
    """The top-level parser with every subcommand registered."""
    from wool_idle.autoscaler import cli as autoscaler_cli
    from wool_idle.demo import cli as demo_cli
    from wool_idle.exporter import cli as exporter_cli
    from wool_idle.worker import cli as worker_cli

    parser = options.Parser(prog="wool-idle", description="See and retire idle wool workers.")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=options.Parser)
    worker_cli.register(subparsers)
    exporter_cli.register(subparsers)
    autoscaler_cli.register(subparsers)
    demo_cli.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand ``argv`` names and return its exit status."""
    logs.quiet_grpc()
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
