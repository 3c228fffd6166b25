"""``wool-idle autoscaler``: stop workers idle past ``--max-idle``, never a busy one."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any, Final

import aiohttp
from prometheus_client import CollectorRegistry

from wool_idle import logs, options
from wool_idle.autoscaler.app import create_app
from wool_idle.autoscaler.daemon import ActionSettings, Autoscaler
from wool_idle.autoscaler.metrics import AutoscalerMetrics
from wool_idle.autoscaler.policy import DEFAULT_MAX_STOPS_PER_CYCLE, PolicySettings
from wool_idle.autoscaler.sources import ExporterSource, PrometheusSource, Selector, Source
from wool_idle.contract import DEFAULT_GRACE
from wool_idle.endpoints import AUTOSCALER_PORT, EXPORTER_METRICS_URL, start_site
from wool_idle.webconfig import WebConfig

log = logging.getLogger("wool_idle.autoscaler")

DEFAULT_LISTEN: Final = f"127.0.0.1:{AUTOSCALER_PORT}"
EXIT_SOURCE_FAILED: Final = 1


def _selector(text: str) -> Selector:
    return Selector.parse(text)


def register(subparsers: Any) -> None:
    """Add ``autoscaler`` to the top-level parser."""
    parser = subparsers.add_parser(
        "autoscaler", help="retire idle workers", description=options.plain(__doc__)
    )
    options.add(
        parser,
        "--max-idle",
        type=options.positive_duration,
        required=False,
        help="retire workers idle at least this long (required)",
    )
    source = parser.add_mutually_exclusive_group()
    options.add(
        source,
        "--metrics-url",
        type=options.url,
        help=f"an exporter's /metrics (default {EXPORTER_METRICS_URL})",
    )
    options.add(
        source,
        "--prometheus-url",
        type=options.url,
        help="a Prometheus server's base URL (its HTTP API is queried)",
    )
    options.add(
        parser,
        "--selector",
        action="append",
        default=[],
        type=options.argument_type(_selector, "selector"),
        help="only workers whose series carry label=value (repeatable)",
    )
    options.add(
        parser,
        "--alert",
        help="with --prometheus-url: only workers for which this alert fires (e.g. WoolWorkerIdle)",
    )
    options.add(
        parser,
        "--wait-count",
        type=options.count(1),
        default=1,
        help="cycles in a row a worker must be idle past the rule",
    )
    options.add(
        parser,
        "--min-workers",
        type=options.count(0),
        default=1,
        help="never fewer up workers than this (0 allows scale to zero)",
    )
    options.add(
        parser,
        "--max-stops-per-cycle",
        type=options.count(1),
        default=DEFAULT_MAX_STOPS_PER_CYCLE,
        help="stops per cycle at most",
    )
    options.add(
        parser,
        "--cooldown",
        type=options.duration,
        default=300.0,
        help="how long a worker that refused or failed a stop is left alone",
    )
    options.add(
        parser,
        "--max-staleness",
        type=options.positive_duration,
        default=60.0,
        help="ignore idle samples older than this (Prometheus mode)",
    )
    options.add(
        parser,
        "--grace",
        type=options.grace_duration,
        default=DEFAULT_GRACE,
        help="how long a stopped worker drains in-flight tasks ('forever'; 0 cancels)",
    )
    options.add(
        parser,
        "--interval",
        type=options.positive_duration,
        default=30.0,
        help="time between cycles",
    )
    options.add(
        parser,
        "--source-timeout",
        type=options.positive_duration,
        default=10.0,
        help="deadline of one read of the source",
    )
    options.add(
        parser,
        "--rpc-timeout",
        type=options.positive_duration,
        default=5.0,
        help="deadline of the confirming idle RPC",
    )
    options.add(parser, "--dry-run", action="store_true", help="decide and report, but stop no one")
    options.add(
        parser,
        "--once",
        action="store_true",
        help="run one cycle and exit (1 if the source failed)",
    )
    options.add(
        parser,
        "--listen",
        type=options.listen_address,
        default=DEFAULT_LISTEN,
        help=f"HTTP host:port of /metrics and /decisions (default {DEFAULT_LISTEN})",
    )
    options.add_client_tls(parser)
    options.add_web_config(parser)
    options.add_logging(parser)
    parser.set_defaults(func=run, parser=parser)


def _settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> PolicySettings:
    if args.max_idle is None:
        parser.error("argument --max-idle: required (e.g. --max-idle 10m)")
    if args.alert is not None and args.prometheus_url is None:
        parser.error("argument --alert: needs --prometheus-url")
    return PolicySettings(
        max_idle=args.max_idle,
        wait_count=args.wait_count,
        min_workers=args.min_workers,
        max_stops_per_cycle=args.max_stops_per_cycle,
        cooldown=args.cooldown,
        max_age=args.max_staleness,
        dry_run=args.dry_run,
    )


def run(args: argparse.Namespace) -> int:
    """Run the autoscaler: one cycle with ``--once``, else until SIGTERM/SIGINT."""
    policy = _settings(args.parser, args)
    action = ActionSettings(
        grace=args.grace, rpc_timeout=args.rpc_timeout, tls=options.client_tls(args.parser, args)
    )
    web = options.web_config(args.parser, args)
    if args.web_config_check:
        print(f"{args.web_config_file}: OK")
        return 0
    logs.configure(args.log_format, args.log_level)
    return asyncio.run(_main(args, policy, action, web))


def _source(args: argparse.Namespace, session: aiohttp.ClientSession) -> Source:
    if args.prometheus_url:
        return PrometheusSource(
            session, args.prometheus_url, args.selector, args.alert, args.source_timeout
        )
    return ExporterSource(
        session, args.metrics_url or EXPORTER_METRICS_URL, args.selector, args.source_timeout
    )


async def _main(
    args: argparse.Namespace, policy: PolicySettings, action: ActionSettings, web: WebConfig
) -> int:
    registry = CollectorRegistry(auto_describe=False)
    async with aiohttp.ClientSession() as session:
        autoscaler = Autoscaler(
            source=_source(args, session),
            policy=policy,
            action=action,
            metrics=AutoscalerMetrics(registry),
        )
        if args.once:
            return 0 if await autoscaler.cycle() else EXIT_SOURCE_FAILED
        try:
            runner, base = await start_site(create_app(autoscaler, registry), args.listen, web)
        except OSError as error:
            log.error("cannot listen on %s: %s", args.listen, error)
            return 1
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, autoscaler.stopping.set)
        log.info(
            "autoscaler reading %s, max idle %.1fs%s; metrics on %s/metrics",
            autoscaler.source.description,
            policy.max_idle,
            " (dry run)" if policy.dry_run else "",
            base,
        )
        print(f"{base}/metrics", flush=True)
        await autoscaler.run(args.interval)
        await runner.cleanup()
    log.info("autoscaler stopped")
    return 0
