"""``wool-idle autoscaler``: stop workers idle past ``--max-idle``, never a busy one."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
from typing import Final

from wool_idle.autoscaler.app import create_app
from wool_idle.autoscaler.daemon import ActionSettings, Autoscaler
from wool_idle.autoscaler.metrics import AutoscalerMetrics
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.settings import DaemonSettings, SourceSettings
from wool_idle.autoscaler.sources import Selector, Source
from wool_idle.cli.http_flags import add_http_client_flags, http_client_config
from wool_idle.cli.log_flags import add_log_flags, configure_logging
from wool_idle.cli.parser import Parser, help_from_docstring, settings_from
from wool_idle.cli.serve import serve_until_signal
from wool_idle.cli.tls_flags import add_client_tls_flags, client_tls
from wool_idle.cli.values import (
    DISCOVERY,
    DURATION,
    GRACE,
    LABEL,
    POSITIVE_DURATION,
    TEXT,
    URL,
    Value,
    whole_number,
)
from wool_idle.cli.web_flags import add_web_flags, web_config
from wool_idle.contract import RETIRED_TIMESTAMP
from wool_idle.discovery.drop import Dropper
from wool_idle.discovery.follow import WoolMissing, require_wool
from wool_idle.discovery.spec import DiscoveryKind, DiscoverySpec
from wool_idle.web.client_config import HttpClientConfig
from wool_idle.web.client_session import http_session
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.metrics import process_registry, register_build_info
from wool_idle.web.site import serve_app

log = logging.getLogger("wool_idle.autoscaler")

EXIT_SOURCE_FAILED: Final = 1
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
    if _local_namespaces(daemon.wool_discovery):
        try:
            require_wool()
        except WoolMissing as error:
            parser.error(f"argument --wool-discovery: {error}")
    configure_logging(args)
    return asyncio.run(_main(daemon, source, http, policy, action, web))


def _local_namespaces(specs: tuple[DiscoverySpec, ...]) -> list[str]:
    return [s.namespace for s in specs if s.kind is DiscoveryKind.LOCAL]


def _source_and_client(
    parser: Parser, args: argparse.Namespace
) -> tuple[SourceSettings, HttpClientConfig]:
    """The source settings, its URL without userinfo, and the HTTP client config."""
    source = settings_from(args, SourceSettings)
    if source.prometheus_url:
        url, http = http_client_config(
            parser, args, source.prometheus_url, url_flag="--prometheus-url"
        )
        return dataclasses.replace(source, prometheus_url=url), http
    url, http = http_client_config(parser, args, source.metrics_url, url_flag="--metrics-url")
    return dataclasses.replace(source, metrics_url=url), http


class FirstRead:
    """A source that remembers whether a read has succeeded yet (readiness)."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.description = source.description
        self.succeeded = False

    async def read(self) -> list[Reading]:
        readings = await self.source.read()
        self.succeeded = True
        return readings

    def not_ready(self) -> str | None:
        """None once a read has succeeded, else why the autoscaler is not ready."""
        return None if self.succeeded else "no successful read of the source yet"


def _dropper(specs: tuple[DiscoverySpec, ...]) -> Dropper | None:
    """The drops to publish; LAN namespaces are logged as having none."""
    for spec in specs:
        if spec.kind is DiscoveryKind.LAN:
            log.info(
                "%s: LAN discovery has no drop from another process; stopped workers are "
                "shown by %s only",
                spec,
                RETIRED_TIMESTAMP,
            )
    namespaces = _local_namespaces(specs)
    return Dropper(namespaces) if namespaces else None


async def _main(
    daemon: DaemonSettings,
    source: SourceSettings,
    http: HttpClientConfig,
    policy: PolicySettings,
    action: ActionSettings,
    web: LiveWebConfig | None,
) -> int:
    registry = process_registry()
    register_build_info(registry)
    origin = source.prometheus_url or source.metrics_url
    async with http_session(http, origin=origin) as session:
        watched = FirstRead(source.reader(session, policy.group_by, policy.max_staleness))
        autoscaler = Autoscaler(
            source=watched,
            policy=policy,
            action=action,
            metrics=AutoscalerMetrics(registry, group_by=policy.group_by),
            dropper=_dropper(daemon.wool_discovery),
        )
        if daemon.once:
            return await _once(autoscaler)
        log.info(
            "autoscaler reading %s, max idle %.1fs%s",
            watched.description,
            policy.max_idle,
            " (dry run)" if policy.dry_run else "",
        )
        app = create_app(autoscaler, registry, watched.not_ready)
        return await serve_until_signal(
            "autoscaler",
            serve_app(app, daemon.web_listen_address, web, path="/metrics"),
            lambda: autoscaler.run(daemon.interval),
            stop=autoscaler.stopping.set,
        )


async def _once(autoscaler: Autoscaler) -> int:
    """``--once``: one cycle, 0, or ``EXIT_SOURCE_FAILED`` if the source failed.
    SIGTERM and SIGINT during it start no more stops and let those sent end (up to
    their deadline), as the daemon's do: a wool worker whose stop call is cut never
    exits."""
    loop = asyncio.get_running_loop()

    def leave() -> None:
        log.info("autoscaler --once: signalled, sending no more stops; those sent may end")
        autoscaler.stopping.set()

    signals = (signal.SIGTERM, signal.SIGINT)
    for signum in signals:
        loop.add_signal_handler(signum, leave)
    try:
        return 0 if await autoscaler.once() else EXIT_SOURCE_FAILED
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
