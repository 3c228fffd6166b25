"""``wool-idle worker``, ``wool-idle idle`` and ``wool-idle stop``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any, Final

from wool_idle import logs, options
from wool_idle.contract import DEFAULT_GRACE, stop_deadline
from wool_idle.exceptions import IdleUnavailable, RpcError, StopRefused, TransientRpcError
from wool_idle.worker.auth import MethodPolicy
from wool_idle.worker.connection import WorkerConnection
from wool_idle.worker.server import WorkerServer
from wool_idle.worker.service import WorkerService
from wool_idle.worker.tls import ServerTls

log = logging.getLogger("wool_idle.worker")

EXIT_OK: Final = 0
EXIT_UNSUPPORTED: Final = 3
"""``idle``: the worker predates the idle RPC. ``stop``: the worker refused (not idle enough)."""
EXIT_UNREACHABLE: Final = 4
EXIT_RPC_ERROR: Final = 5


def register(subparsers: Any) -> None:
    """Add the worker's subcommands to the top-level parser."""
    worker = subparsers.add_parser(
        "worker", help="run a worker", description=options.plain(run_worker.__doc__)
    )
    options.add(
        worker,
        "--listen",
        type=options.listen_address,
        default="127.0.0.1:0",
        help="host:port (port 0 picks one) or unix:/path",
    )
    options.add(worker, "--tls-cert", help="PEM server certificate (enables TLS)")
    options.add(worker, "--tls-key", help="PEM server key")
    options.add(
        worker,
        "--tls-client-ca",
        help="PEM CA that client certificates must chain to (enables mutual TLS)",
    )
    options.add(
        worker,
        "--grace",
        type=options.grace_duration,
        default=DEFAULT_GRACE,
        help="how long SIGTERM drains in-flight tasks ('forever' for no limit)",
    )
    options.add(
        worker,
        "--max-in-flight",
        type=options.count(0),
        default=0,
        help="refuse new tasks with RESOURCE_EXHAUSTED beyond this many (0: no limit)",
    )
    options.add(
        worker,
        "--allow-stop",
        action="append",
        default=[],
        help="client identity (certificate SAN) allowed to call stop; repeatable; needs "
        "--tls-client-ca (default: every authenticated client)",
    )
    options.add(
        worker,
        "--allow-dispatch",
        action="append",
        default=[],
        help="client identity allowed to dispatch tasks; repeatable; needs --tls-client-ca "
        "(default: every authenticated client)",
    )
    options.add_logging(worker)
    worker.set_defaults(func=run_worker, parser=worker)

    idle = subparsers.add_parser(
        "idle",
        help="print a worker's idle seconds",
        description=options.plain(idle_command.__doc__),
    )
    idle.add_argument("target", type=options.address, help="host:port or unix:/path")
    options.add(
        idle,
        "--timeout",
        type=options.positive_duration,
        default=5.0,
        help="deadline of the idle RPC",
    )
    options.add_client_tls(idle)
    idle.set_defaults(func=idle_command, parser=idle)

    stop = subparsers.add_parser(
        "stop", help="stop a worker", description=options.plain(stop_command.__doc__)
    )
    stop.add_argument("target", type=options.address, help="host:port or unix:/path")
    options.add(
        stop,
        "--grace",
        type=options.grace_duration,
        default=DEFAULT_GRACE,
        help="how long the worker drains in-flight tasks (0 cancels them; 'forever')",
    )
    options.add(
        stop,
        "--if-idle-for",
        type=options.duration,
        help="stop only if the worker has been idle at least this long",
    )
    options.add(
        stop,
        "--timeout",
        type=options.positive_duration,
        help="deadline of the stop RPC (default: grace + 10s)",
    )
    options.add_client_tls(stop)
    stop.set_defaults(func=stop_command, parser=stop)


def _server_tls(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ServerTls | None:
    if not (args.tls_cert or args.tls_key or args.tls_client_ca):
        return None
    if not (args.tls_cert and args.tls_key):
        parser.error("argument --tls-cert/--tls-key: TLS needs both")
    for flag in ("--tls-cert", "--tls-key", "--tls-client-ca"):
        options.require_readable(parser, flag, getattr(args, flag[2:].replace("-", "_")))
    return ServerTls(
        cert_file=args.tls_cert, key_file=args.tls_key, client_ca_file=args.tls_client_ca
    )


def _authorization(parser: argparse.ArgumentParser, args: argparse.Namespace) -> MethodPolicy:
    allowed = {"stop": args.allow_stop, "dispatch": args.allow_dispatch}
    for method, identities in allowed.items():
        if identities and not args.tls_client_ca:
            parser.error(f"argument --allow-{method}: needs mutual TLS (--tls-client-ca)")
        if any(not identity.strip() for identity in identities):
            parser.error(f"argument --allow-{method}: identity must not be empty")
    return MethodPolicy({m: frozenset(ids) for m, ids in allowed.items() if ids})


def run_worker(args: argparse.Namespace) -> int:
    """Run a worker until a stop RPC or SIGTERM/SIGINT has drained it.

    Prints the address clients should use on one line once it serves.
    """
    tls = _server_tls(args.parser, args)
    authorization = _authorization(args.parser, args)
    logs.configure(args.log_format, args.log_level)
    return asyncio.run(_serve(args, tls, authorization))


async def _serve(
    args: argparse.Namespace, tls: ServerTls | None, authorization: MethodPolicy
) -> int:
    limit = args.max_in_flight
    service = WorkerService(
        backpressure=(lambda s: len(s.docket) >= limit) if limit else None,
        authorization=authorization,
    )
    server = WorkerServer(args.listen, service, tls=tls)
    try:
        address = await server.start()
    except (OSError, RuntimeError) as error:
        log.error("cannot listen on %s: %s", args.listen, error)
        return 1
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, service.shutdown, args.grace)
    log.info("worker serving on %s", address)
    print(address, flush=True)
    await server.wait_closed()
    log.info("worker stopped")
    return EXIT_OK


def idle_command(args: argparse.Namespace) -> int:
    """Print a worker's idle seconds. Exit 0 on success, 3 if the worker predates
    the idle RPC, 4 if it is unreachable, 5 on any other RPC error."""
    tls = options.client_tls(args.parser, args)

    async def ask() -> float:
        async with WorkerConnection(args.target, tls=tls) as connection:
            return await connection.idle_time(timeout=args.timeout)

    try:
        seconds = asyncio.run(ask())
    except (IdleUnavailable, RpcError) as error:
        return _report(error)
    print(f"{seconds:.3f}")
    return EXIT_OK


def stop_command(args: argparse.Namespace) -> int:
    """Stop a worker. Exit 0 once it has drained, 3 if it refused a conditional
    stop (not idle long enough), 4 if it is unreachable, 5 on any other RPC error."""
    tls = options.client_tls(args.parser, args)
    timeout = args.timeout or stop_deadline(args.grace)

    async def stop() -> None:
        async with WorkerConnection(args.target, tls=tls) as connection:
            await connection.stop(args.grace, timeout=timeout, if_idle_for=args.if_idle_for)

    try:
        asyncio.run(stop())
    except (IdleUnavailable, RpcError) as error:
        return _report(error)
    return EXIT_OK


def _report(error: Exception) -> int:
    print(f"wool-idle: {error}", file=sys.stderr)
    if isinstance(error, IdleUnavailable | StopRefused):
        return EXIT_UNSUPPORTED
    if isinstance(error, TransientRpcError):
        return EXIT_UNREACHABLE
    return EXIT_RPC_ERROR
