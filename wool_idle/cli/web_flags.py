"""The flags of the HTTP daemons' endpoints, in Prometheus exporter style:
``--web.listen-address`` (alias ``--listen``), ``--web.config.file`` and
``--web.config.check``."""

from __future__ import annotations

import argparse

from wool_idle.cli.parser import Parser
from wool_idle.cli.values import FILE, HTTP_LISTEN_ADDRESS
from wool_idle.web.config import WebConfigError
from wool_idle.web.live_config import LiveWebConfig


def add_web_flags(parser: Parser) -> None:
    """Add the web flags; the listen address's default is the settings field
    ``web_listen_address`` of the subcommand."""
    web = parser.section("web", "the HTTP endpoints")
    web.add(
        "--web.listen-address",
        HTTP_LISTEN_ADDRESS,
        "host:port (port 0 picks one) or unix:/path of the HTTP endpoints",
        aliases=("--listen",),
        former_variable="WOOL_IDLE_LISTEN",
    )
    web.add(
        "--web.config.file",
        FILE,
        "exporter-toolkit web config (TLS, basic auth) for the HTTP endpoints, "
        "followed as it changes",
        default=None,
    )
    web.add(
        "--web.config.check",
        None,
        "validate --web.config.file and exit (the daemon's other required flags may be left out)",
        default=False,
        environment=False,
        waives_required=True,
    )


def web_config(parser: Parser, args: argparse.Namespace) -> LiveWebConfig | None:
    """Load ``--web.config.file`` to be followed (None without one), exiting 2 with
    the reason when it is invalid; with ``--web.config.check``, print that it is
    valid and exit 0."""
    path = args.web_config_file
    if path is None:
        if args.web_config_check:
            parser.error("argument --web.config.check: needs --web.config.file")
        return None
    try:
        config = LiveWebConfig.load(path)
    except WebConfigError as error:
        parser.error(f"argument --web.config.file: {path}: {error}")
    if args.web_config_check:
        print(f"{path}: OK", flush=True)
        parser.exit(0)
    return config
