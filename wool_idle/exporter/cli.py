"""``wool-idle exporter``: serve ``wool_worker_idle_seconds`` for a fleet."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging

from wool_idle.cli.log_flags import add_log_flags, configure_logging
from wool_idle.cli.parser import Parser, help_from_docstring, settings_from
from wool_idle.cli.serve import serve_until_signal
from wool_idle.cli.tls_flags import add_client_tls_flags, client_tls
from wool_idle.cli.values import (
    ADDRESS,
    DISCOVERY,
    DURATION,
    FILE,
    IP_ADDRESS,
    POSITIVE_DURATION,
    whole_number,
)
from wool_idle.cli.web_flags import add_web_flags, web_config
from wool_idle.discovery.follow import WoolMissing, require_wool
from wool_idle.discovery.lan import restrict_zeroconf
from wool_idle.discovery.spec import DiscoveryKind
from wool_idle.exporter.app import ExporterSettings, create_app
from wool_idle.exporter.connections import ConnectionCache
from wool_idle.exporter.discovered import DiscoveredTargets
from wool_idle.exporter.discovery_metrics import DiscoveryCollector
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.reload import targets_reloads
from wool_idle.exporter.runtime import (
    connection_budget,
    log_repeating_errors_once,
    raise_open_files_limit,
    settle_garbage_collector,
    warn_if_few_open_files,
)
from wool_idle.exporter.settings import DaemonSettings
from wool_idle.exporter.target import Target
from wool_idle.exporter.targets import TargetSet
from wool_idle.web.followed_files import followed_files
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.metrics import process_registry, register_build_info
from wool_idle.web.site import serve_app
from wool_idle.worker import ClientTls

log = logging.getLogger("wool_idle.exporter")


def register(root: Parser) -> None:
    """Add ``exporter`` to the top-level parser."""
    parser = root.add_subcommand(
        "exporter",
        help="serve worker idle time to Prometheus",
        description=help_from_docstring(__doc__),
        settings=(ExporterSettings, DaemonSettings),
    )
    targets = parser.section("targets", "which workers to scrape")
    targets.add("--target", ADDRESS, "workers to scrape, host:port or unix:/path", repeatable=True)
    targets.add("--targets-file", FILE, "Prometheus file_sd JSON/YAML of workers")
    targets.add(
        "--targets-refresh",
        POSITIVE_DURATION,
        "how often the targets file is checked for changes (also on SIGHUP)",
    )
    add_discovery_flags(parser)
    scrape = parser.section("scrape", "how a scrape asks the workers")
    scrape.add(
        "--timeout",
        POSITIVE_DURATION,
        "deadline of one worker's idle RPC and of a whole scrape",
    )
    scrape.add(
        "--timeout-offset",
        DURATION,
        "subtracted from Prometheus's X-Prometheus-Scrape-Timeout-Seconds "
        "(never more than half of it)",
    )
    scrape.add("--concurrency", whole_number(1), "idle RPCs in flight at once in a fan-out")
    scrape.add(
        "--probe.adhoc-limit",
        whole_number(1),
        "how many /probe targets that are not configured stay connected (least recently "
        "used closed first), and may be probed at once (beyond it: 503; a probe whose "
        "worker did not answer counts 20s longer, while its connect may be pending)",
    )
    add_client_tls_flags(parser)
    add_web_flags(parser)
    add_log_flags(parser)
    parser.set_defaults(func=run, parser=parser)


def add_discovery_flags(parser: Parser) -> None:
    """Add ``--wool-discovery`` and its options."""
    section = parser.section(
        "wool discovery", "take workers from wool's own discovery (needs the wool extra)"
    )
    section.add(
        "--wool-discovery",
        DISCOVERY,
        "follow a wool namespace: local:NAMESPACE (LocalDiscovery) or lan:NAMESPACE",
        repeatable=True,
    )
    section.add(
        "--wool-discovery.poll-interval",
        POSITIVE_DURATION,
        "how often a local namespace is read, and a failed discovery retried",
    )
    section.add(
        "--wool-discovery.lan-interface",
        IP_ADDRESS,
        "IP of an interface lan discoveries use (default: all interfaces)",
        repeatable=True,
    )


def prepare_discovery(parser: Parser, daemon: DaemonSettings) -> None:
    """Exit 2 naming the flag when a discovery is asked for but cannot be followed;
    restrict LAN discovery to the interfaces asked for."""
    lan = any(spec.kind is DiscoveryKind.LAN for spec in daemon.wool_discovery)
    if daemon.wool_discovery_lan_interface and not lan:
        parser.error("argument --wool-discovery.lan-interface: no --wool-discovery lan:NAMESPACE")
    if not daemon.wool_discovery:
        return
    try:
        require_wool()
    except WoolMissing as error:
        parser.error(f"argument --wool-discovery: {error}")
    if daemon.wool_discovery_lan_interface:
        restrict_zeroconf(daemon.wool_discovery_lan_interface)


def run(args: argparse.Namespace) -> int:
    """Run the exporter until SIGTERM or SIGINT."""
    tls = client_tls(args.parser, args)
    web = web_config(args.parser, args)
    daemon = settings_from(args, DaemonSettings)
    prepare_discovery(args.parser, daemon)
    configure_logging(args)
    targets = TargetSet(static=tuple(Target(a) for a in daemon.target), path=daemon.targets_file)
    targets.reload(force=True)
    return asyncio.run(_serve(daemon, settings_from(args, ExporterSettings), targets, tls, web))


async def _serve(
    daemon: DaemonSettings,
    settings: ExporterSettings,
    targets: TargetSet,
    tls: ClientTls | None,
    web: LiveWebConfig | None,
) -> int:
    open_files, _ = raise_open_files_limit()
    connections = ConnectionCache(
        tls=tls, adhoc_limit=daemon.probe_adhoc_limit, max_open=connection_budget(open_files)
    )
    prober = Prober(
        tls=tls,
        timeout=settings.timeout,
        concurrency=daemon.concurrency,
        connections=connections,
    )
    registry = process_registry()
    register_build_info(registry)
    discovered = DiscoveredTargets(
        daemon.wool_discovery, targets, poll_interval=daemon.wool_discovery_poll_interval
    )
    if discovered.followers:
        registry.register(DiscoveryCollector(discovered.followers))
    reloads = targets_reloads(targets, followed_files(web, None, tls))
    app = create_app(targets, prober, registry, settings, reloads)
    stopped = asyncio.Event()
    refresher = asyncio.ensure_future(targets.watch(daemon.targets_refresh))
    following = asyncio.ensure_future(discovered.run())
    warn_if_few_open_files(open_files, len(targets.all()) + daemon.probe_adhoc_limit)
    log_repeating_errors_once()
    settle_garbage_collector()
    specs = ", ".join(str(f) for f in discovered.followers)
    log.info(
        "exporter scraping %d targets%s (open files limit %d)",
        len(targets.all()),
        f" and the workers of {specs}" if specs else "",
        open_files,
    )

    async def until_stopped() -> None:
        await stopped.wait()
        await reloads.close()  # first: a POST /-/reload it holds would hold the server

    try:
        return await serve_until_signal(
            "exporter",
            serve_app(app, daemon.web_listen_address, web, path="/metrics"),
            until_stopped,
            stop=stopped.set,
            reload=reloads.request,
        )
    finally:
        await reloads.close()
        for task in (refresher, following):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await prober.close()
