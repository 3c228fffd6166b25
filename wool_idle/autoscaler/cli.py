"""``wool-idle autoscaler``: stop workers idle past ``--max-idle``, never a busy one."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
from typing import Final

from wool_idle.autoscaler.daemon import ActionSettings
from wool_idle.autoscaler.policy import PolicySettings
from wool_idle.autoscaler.process import local_namespaces, run_daemon
from wool_idle.autoscaler.settings import DaemonSettings, SourceSettings
from wool_idle.autoscaler.sources import Selector
from wool_idle.autoscaler.state_file import StateFile, StateFileError
from wool_idle.cli.http_flags import add_http_client_flags, http_client_config
from wool_idle.cli.log_flags import add_log_flags, configure_logging
from wool_idle.cli.parser import Parser, help_from_docstring, settings_from
from wool_idle.cli.tls_flags import add_client_tls_flags, client_tls
from wool_idle.cli.values import (
    DISCOVERY,
    DURATION,
    FILE,
    GRACE,
    LABEL,
    POSITIVE_DURATION,
    TEXT,
    URL,
    Value,
    whole_number,
)
from wool_idle.cli.web_flags import add_web_flags, web_config
from wool_idle.discovery.follow import WoolMissing, require_wool
from wool_idle.web.live_client_config import LiveClientConfig

SELECTOR: Final = Value("LABEL=VALUE", Selector.parse, str)
"""A label matcher: ``label=value``, ``label!=value``, ``label=~regex``, ``label!~regex``."""


def register(root: Parser) -> None:
    """Add ``autoscaler`` to the top-level parser."""
    parser = root.add_subcommand(
        "autoscaler",
        help="retire idle workers",
        description=help_from_docstring(__doc__),
        settings=(PolicySettings, ActionSettings, SourceSettings, DaemonSettings),
    )
    source = parser.section("source", "where the idle readings come from")
    source.add("--metrics-url", URL, "an exporter's /metrics")
    source.add("--prometheus-url", URL, "a Prometheus server's base URL (its HTTP API is queried)")
    parser.mutually_exclusive("--metrics-url", "--prometheus-url")
    source.add(
        "--selector",
        SELECTOR,
        "only workers whose series match it: label=value, label!=value, label=~regex or "
        "label!~regex (Prometheus semantics: RE2 regex matching the whole value; a missing "
        "label is the empty value; a comma separates selectors, so write one in a value as "
        "\\x2c in a regex: wool_tags=~gpu\\x2chot)",
        repeatable=True,
    )
    source.add("--alert", TEXT, "with --prometheus-url: only workers whose alert fires")
    source.add("--source-timeout", POSITIVE_DURATION, "deadline of one read of the source")
    source.add("--source-max-bytes", whole_number(1), "largest body of one read (bytes)")
    add_http_client_flags(source)
    policy = parser.section("policy", "which workers are retired")
    policy.add("--max-idle", POSITIVE_DURATION, "retire workers idle at least this long")
    policy.add("--wait-count", whole_number(1), "cycles in a row a worker must be idle past it")
    policy.add(
        "--min-workers",
        whole_number(0),
        "never fewer workers known alive per group (0: scale to zero)",
    )
    policy.add("--max-stops-per-cycle", whole_number(1), "stops per cycle and group at most")
    policy.add(
        "--group-by",
        LABEL,
        "hold --min-workers and --max-stops-per-cycle per group: the workers with the same "
        "values of these labels (a missing label is the empty value)",
        repeatable=True,
    )
    policy.add(
        "--min-age",
        DURATION,
        "never stop a worker this autoscaler first saw less than this ago (after a restart "
        "every worker is new again)",
    )
    policy.add(
        "--cooldown",
        DURATION,
        "how long a worker is left alone after a stop that did not go through",
    )
    policy.add("--max-staleness", POSITIVE_DURATION, "ignore idle samples older than this")
    policy.add("--dry-run", None, "decide and report, but stop no one")
    stop = parser.section("stop", "how a retired worker is stopped")
    stop.add("--grace", GRACE, "how long it drains in-flight tasks ('forever'; 0 cancels)")
    stop.add("--rpc-timeout", POSITIVE_DURATION, "deadline of the confirming idle RPC")
    add_client_tls_flags(parser)
    wool = parser.section("wool", "the wool discovery of the stopped workers")
    wool.add(
        "--wool-discovery",
        DISCOVERY,
        "after each accepted stop, publish worker-dropped in this namespace (local: only; "
        "lan: has no drop from another process)",
        repeatable=True,
    )
    cycles = parser.section("cycles")
    cycles.add("--interval", POSITIVE_DURATION, "time between cycles")
    cycles.add("--once", None, "run one cycle and exit (1 if the source failed)")
    cycles.add(
        "--state-file",
        FILE,
        "remember the stops sent in this file across restarts (a worker still draining "
        "then never counts alive again); missing or unreadable at start, no stop is sent "
        "until every earlier one is over (5 minutes at the defaults)",
    )
    add_web_flags(parser)
    add_log_flags(parser)
    parser.set_defaults(func=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    """Run the autoscaler: one cycle with ``--once``, else until SIGTERM/SIGINT."""
    parser: Parser = args.parser
    source, http = _source_and_client(parser, args)
    if source.alert is not None and source.prometheus_url is None:
        parser.error("argument --alert: needs --prometheus-url")
    action = settings_from(args, ActionSettings, tls=client_tls(parser, args))
    web = web_config(parser, args)
    if len(set(args.group_by)) != len(args.group_by):
        parser.error(f"argument --group-by: a label named twice in {','.join(args.group_by)}")
    policy = settings_from(args, PolicySettings)
    daemon = settings_from(args, DaemonSettings)
    if local_namespaces(daemon.wool_discovery):
        try:
            require_wool()
        except WoolMissing as error:
            parser.error(f"argument --wool-discovery: {error}")
    state_file = _state_file(parser, daemon.state_file)
    configure_logging(args)
    return asyncio.run(run_daemon(daemon, source, http, policy, action, web, state_file))


def _state_file(parser: Parser, path: str | None) -> StateFile | None:
    """The ``--state-file``, locked for this process; exits 2 if its directory is
    missing or not writable, it is a directory, or another process holds it."""
    if path is None:
        return None
    state_file = StateFile(path)
    directory = state_file.path.parent
    if not directory.is_dir() or not os.access(directory, os.W_OK | os.X_OK):
        parser.error(f"argument --state-file: {directory} is not a writable directory")
    if state_file.path.is_dir():
        parser.error(f"argument --state-file: {path} is a directory")
    try:
        state_file.lock()
    except StateFileError as error:
        parser.error(f"argument --state-file: {error}")
    return state_file


def _source_and_client(
    parser: Parser, args: argparse.Namespace
) -> tuple[SourceSettings, LiveClientConfig]:
    """The source settings, its URL without userinfo, and the HTTP client config; exits
    2 for a ``--prometheus-url`` with a query or fragment (the API path goes after it)."""
    source = settings_from(args, SourceSettings)
    if source.prometheus_url and any(c in source.prometheus_url for c in "?#"):
        parser.error(
            "argument --prometheus-url: a base URL takes no query or fragment "
            "(/api/v1/query is put after it)"
        )
    if source.prometheus_url:
        url, http = http_client_config(
            parser, args, source.prometheus_url, url_flag="--prometheus-url"
        )
        return dataclasses.replace(source, prometheus_url=url), http
    url, http = http_client_config(parser, args, source.metrics_url, url_flag="--metrics-url")
    return dataclasses.replace(source, metrics_url=url), http
