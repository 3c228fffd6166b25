"""The ``wool-idle`` command: one subcommand per part.

The package is the command-line layer every part shares:

- ``parser``: the parser, flags in sections, environment variables, defaults
  from the settings dataclasses; ``flag``: one flag's spellings and variables;
- ``values``: what a flag's text may be (booleans, lists, addresses …; durations
  and graces: ``durations``);
- ``environment``: the ``WOOL_IDLE_*`` variables no subcommand reads, refused;
- ``tls_flags``, ``web_flags``, ``log_flags``: flags several subcommands share;
  ``http_flags``: ``--http.config.file``, of a daemon that reads over HTTP;
- ``serve``: serve until a signal, the run loop of the three daemons.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

from wool_idle import logs

logs.quiet_grpc()  # gRPC reads its verbosity once, on import: the imports below load it

from wool_idle.cli.parser import Parser  # noqa: E402
from wool_idle.cli.serve import ignore_hangup  # noqa: E402

DAEMONS: Final = frozenset({"worker", "exporter", "autoscaler"})
"""The subcommands that serve until a signal (see ``serve``)."""


def build_parser() -> Parser:
    """The top-level parser with every subcommand registered."""
    from wool_idle.autoscaler import cli as autoscaler_cli
    from wool_idle.demo import cli as demo_cli
    from wool_idle.exporter import cli as exporter_cli
    from wool_idle.worker import cli as worker_cli

    parser = Parser(prog="wool-idle", description="See and retire idle wool workers.")
    for register in (
        worker_cli.register,
        exporter_cli.register,
        autoscaler_cli.register,
        demo_cli.register,
    ):
        register(parser)
    return parser


def main(argv: Sequence[str] | None = None, *, own_process: bool = False) -> int:
    """Run the subcommand ``argv`` names and return its exit status. ``own_process``
    says that this process runs nothing else (the console script): a stopped worker
    may then end it once its exit bound has passed (``worker.leaving``); a caller
    that goes on after ``main`` returns is never ended."""
    args = build_parser().parse_args(argv)
    args.own_process = own_process
    if args.command in DAEMONS:
        ignore_hangup()
    status: int = args.func(args)
    return status


def run() -> None:
    """Console-script entry point (``python -m wool_idle`` too): the process is the
    command's own."""
    sys.exit(main(own_process=True))
