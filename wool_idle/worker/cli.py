"""``wool-idle worker``, ``wool-idle idle`` and ``wool-idle stop``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from typing import Final

from wool_idle.cli.log_flags import add_log_flags, configure_logging
from wool_idle.cli.parser import Parser, help_from_docstring
from wool_idle.cli.serve import serve_until_signal
from wool_idle.cli.tls_flags import (
    add_client_tls_flags,
    add_server_tls_flags,
    client_tls,
    server_tls,
)
from wool_idle.cli.values import (
    ADDRESS,
    DURATION,
    GRACE,
    LISTEN_ADDRESS,
    POSITIVE_DURATION,
    TEXT,
    Value,
    whole_number,
)
from wool_idle.contract import DEFAULT_GRACE, stop_deadline, valid_idle
from wool_idle.exceptions import (
    IdleUnavailable,
    RpcError,
    StopRefused,
    TransientRpcError,
    safe_repr,
)
from wool_idle.logs import log_repeats_once
from wool_idle.worker.auth import MethodPolicy
from wool_idle.worker.connection import WorkerConnection
from wool_idle.worker.containment import (
    EXIT_LOOP_ENDED,
    EXITS,
    ContainingEventLoop,
)
from wool_idle.worker.leaving import LEAVING_TIME, ExitDeadline
from wool_idle.worker.server import WorkerServer
from wool_idle.worker.service import WorkerService
from wool_idle.worker.tls import ServerTls

log = logging.getLogger("wool_idle.worker")
IDENTITY: Final = Value("IDENTITY", TEXT.parse)
IDLE_TIMEOUT: Final = 5.0
"""Default deadline of ``wool-idle idle``'s RPC."""
CLIENT_RPC_FLAGS: Final = (
    "from the command line only: the environment is shared with workers and daemons, "
    "whose WOOL_IDLE_GRACE or WOOL_IDLE_TIMEOUT mean something else"
)
EXIT_OK: Final = 0
EXIT_UNSUPPORTED: Final = 3
"""``idle``: the worker predates the idle RPC. ``stop``: the worker refused (not idle enough)."""
EXIT_UNREACHABLE: Final = 4
EXIT_RPC_ERROR: Final = 5


def register(parser: Parser) -> None:
    """Add the worker's subcommands to the top-level parser."""
    worker = parser.add_subcommand(
        "worker", help="run a worker", description=help_from_docstring(run_worker.__doc__)
    )
    serving = worker.section("serving")
    serving.add(
        "--listen",
        LISTEN_ADDRESS,
        "host:port (port 0 picks one) or unix:/path",
        default="127.0.0.1:0",
    )
    serving.add(
        "--grace",
        GRACE,
        "how long SIGTERM drains in-flight tasks ('forever' for no limit)",
        default=DEFAULT_GRACE,
    )
    serving.add(
        "--max-in-flight",
        whole_number(0),
        "refuse new tasks with RESOURCE_EXHAUSTED beyond this many (0: no limit)",
        default=0,
    )
    add_server_tls_flags(worker)
    access = worker.section("access", "who may call what; needs --tls-client-ca")
    for method, what in (("stop", "call stop"), ("dispatch", "dispatch tasks")):
        access.add(
            f"--allow-{method}",
            IDENTITY,
            f"client identities (certificate SANs) allowed to {what} "
            "(default: every authenticated client)",
            default=(),
            repeatable=True,
        )
    add_log_flags(worker)
    worker.set_defaults(func=run_worker, parser=worker)

    idle = parser.add_subcommand(
        "idle",
        help="print a worker's idle seconds",
        description=help_from_docstring(idle_command.__doc__),
    )
    idle.add_positional("target", ADDRESS, "host:port or unix:/path")
    idle.section("RPC", CLIENT_RPC_FLAGS).add(
        "--timeout",
        POSITIVE_DURATION,
        "deadline of the idle RPC",
        default=IDLE_TIMEOUT,
        environment=False,
    )
    add_client_tls_flags(idle)
    idle.set_defaults(func=idle_command, parser=idle)

    stop = parser.add_subcommand(
        "stop", help="stop a worker", description=help_from_docstring(stop_command.__doc__)
    )
    stop.add_positional("target", ADDRESS, "host:port or unix:/path")
    rpc = stop.section("RPC", CLIENT_RPC_FLAGS)
    rpc.add(
        "--grace",
        GRACE,
        "how long the worker drains in-flight tasks (0 cancels them; 'forever')",
        default=DEFAULT_GRACE,
        environment=False,
    )
    rpc.add(
        "--if-idle-for",
        DURATION,
        "stop only if the worker has been idle at least this long",
        default=None,
        environment=False,
    )
    rpc.add(
        "--timeout",
        POSITIVE_DURATION,
        "deadline of the stop RPC (default: grace + 10s)",
        default=None,
        environment=False,
    )
    add_client_tls_flags(stop)
    stop.set_defaults(func=stop_command, parser=stop)


def _authorization(parser: Parser, args: argparse.Namespace) -> MethodPolicy:
    allowed = {"stop": args.allow_stop, "dispatch": args.allow_dispatch}
    for method, identities in allowed.items():
        if identities and not args.tls_client_ca:
            parser.error(f"argument --allow-{method}: needs mutual TLS (--tls-client-ca)")
    return MethodPolicy({m: frozenset(ids) for m, ids in allowed.items() if ids})


def run_worker(args: argparse.Namespace) -> int:
    """Run a worker until a stop RPC or SIGTERM/SIGINT has drained it.

    Prints the address clients should use on one line once it serves. A task
    that raises SystemExit or KeyboardInterrupt (itself, in a task it starts,
    in a callback it schedules) fails alone; a task that stops the event loop
    (``loop.stop()``) has it run again; an exit that still ends the event
    loop (one raised by a signal handler a task installed) is logged and the
    worker exits 70 rather than hang. In a process of its own
    (``args.own_process``), once it stops serving, asyncio's clean-up and the
    interpreter's exit get ``LEAVING_TIME``; past it the process exits with its
    status, whatever tasks or threads it left (``ExitDeadline``). Called
    in-process, the caller's exit is its own: nothing is bounded.
    """
    tls = server_tls(args.parser, args)
    authorization = _authorization(args.parser, args)
    configure_logging(args)
    log_repeats_once("grpc")  # one line per malformed request would let any client flood
    status = EXIT_LOOP_ENDED  # unless serving returns a status
    try:
        with (
            ExitDeadline(LEAVING_TIME, enabled=args.own_process) as deadline,
            asyncio.Runner(loop_factory=ContainingEventLoop) as runner,
        ):
            try:
                status = runner.run(_serve(args, tls, authorization))
            finally:  # the Runner's clean-up, which follows, waits on what is left
                deadline.start(status)
    except EXITS as exit_:
        log.critical("%s ended the event loop; tasks in flight are lost", safe_repr(exit_))
    return status


async def _serve(
    args: argparse.Namespace, tls: ServerTls | None, authorization: MethodPolicy
) -> int:
    limit = args.max_in_flight
    service = WorkerService(
        backpressure=(lambda s: len(s.in_flight) >= limit) if limit else None,
        authorization=authorization,
    )
    server = WorkerServer(args.listen, service, tls=tls)

    @contextlib.asynccontextmanager
    async def serving() -> AsyncIterator[str]:
        yield await server.start()

    return await serve_until_signal(
        "worker", serving(), server.wait_closed, stop=lambda: service.shutdown(args.grace)
    )


def idle_command(args: argparse.Namespace) -> int:
    """Print a worker's idle seconds. Exit 0 on success, 3 if the worker predates
    the idle RPC, 4 if it is unreachable, 5 on any other RPC error or an answer
    that is no idle value (NaN, infinite, negative)."""
    tls = client_tls(args.parser, args)

    async def ask() -> float:
        async with WorkerConnection(args.target, tls=tls) as connection:
            return await connection.idle_time(timeout=args.timeout)

    try:
        seconds = asyncio.run(ask())
    except (IdleUnavailable, RpcError) as error:
        return _report(error)
    if not valid_idle(seconds):
        print(
            f"wool-idle: {args.target} answered no idle value "
            f"({seconds!r}: not a finite number >= 0)",
            file=sys.stderr,
        )
        return EXIT_RPC_ERROR
    print(f"{seconds + 0.0:.3f}")  # + 0.0: -0.0 prints as 0.000
    return EXIT_OK


def stop_command(args: argparse.Namespace) -> int:
    """Stop a worker. Exit 0 once it has drained, 3 if it refused a conditional
    stop (not idle long enough), 4 if it is unreachable, 5 on any other RPC error."""
    tls = client_tls(args.parser, args)
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
