"""``wool-idle exporter``: serve ``wool_worker_idle_seconds`` for a fleet."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from typing import Any, Final

from wool_idle import logs, options
from wool_idle.endpoints import EXPORTER_PORT, start_site
from wool_idle.exporter.app import ExporterSettings, create_app, process_registry
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.targets import Target, TargetSet
from wool_idle.webconfig import WebConfig
from wool_idle.worker import ClientTls

log = logging.getLogger("wool_idle.exporter")

DEFAULT_LISTEN: Final = f"127.0.0.1:{EXPORTER_PORT}"


def register(subparsers: Any) -> None:
    """Add ``exporter`` to the top-level parser."""
    parser = subparsers.add_parser(
        "exporter", help="serve worker idle time to Prometheus", description=options.plain(__doc__)
    )
    options.add(
        parser,
        "--listen",
        type=options.listen_address,
        default=DEFAULT_LISTEN,
        help=f"HTTP host:port (default {DEFAULT_LISTEN})",
    )
    options.add(
        parser,
        "--target",
        action="append",
        type=options.address,
        default=[],
        help="a worker to scrape, host:port or unix:/path (repeatable)",
    )
    options.add(parser, "--targets-file", help="Prometheus file_sd JSON/YAML of workers")
    options.add(
        parser,
        "--targets-refresh",
        type=options.positive_duration,
        default=5.0,
        help="how often the targets file is checked for changes (also on SIGHUP)",
    )
    options.add(
        parser,
        "--timeout",
        type=options.positive_duration,
        default=5.0,
        help="deadline of one worker's idle RPC and of a whole scrape",
    )
    options.add(
        parser,
        "--timeout-offset",
        type=options.duration,
        default=0.5,
        help="subtracted from Prometheus's X-Prometheus-Scrape-Timeout-Seconds",
    )
    options.add(
        parser,
        "--concurrency",
        type=options.count(1),
        default=256,
        help="idle RPCs in flight at once",
    )
    options.add_client_tls(parser)
    options.add_web_config(parser)
    options.add_logging(parser)
    parser.set_defaults(func=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    """Run the exporter until SIGTERM or SIGINT."""
    tls = options.client_tls(args.parser, args)
    web = options.web_config(args.parser, args)
    if args.web_config_check:
        print(f"{args.web_config_file}: OK")
        return 0
    logs.configure(args.log_format, args.log_level)
    targets = TargetSet(static=tuple(Target(a) for a in args.target), path=args.targets_file)
    targets.reload(force=True)
    return asyncio.run(_serve(args, targets, tls, web))


async def _serve(
    args: argparse.Namespace, targets: TargetSet, tls: ClientTls | None, web: WebConfig
) -> int:
    prober = Prober(tls=tls, timeout=args.timeout, concurrency=args.concurrency)
    settings = ExporterSettings(timeout=args.timeout, timeout_offset=args.timeout_offset)
    app = create_app(targets, prober, process_registry(), settings)
    try:
        runner, base = await start_site(app, args.listen, web)
    except OSError as error:
        log.error("cannot listen on %s: %s", args.listen, error)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: targets.reload(force=True))
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    refresher = asyncio.ensure_future(targets.watch(args.targets_refresh))
    log.info("exporter listening on %s/metrics with %d targets", base, len(targets.all()))
    print(f"{base}/metrics", flush=True)
    await stop.wait()
    refresher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await refresher
    await runner.cleanup()
    await prober.close()
    return 0


async def _refresh(targets: TargetSet, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        targets.reload()
