"""``wool-idle idle`` and ``wool-idle stop``: one RPC to a worker, from the command line.

Each prints its answer (``idle``: the idle seconds; ``stop``: nothing, once the
worker drained) or one line on stderr naming the problem, and says what came of
it in its exit status: ``EXIT_OK``, ``EXIT_UNSUPPORTED``, ``EXIT_UNREACHABLE``
or ``EXIT_RPC_ERROR``. Their RPC flags are taken from the command line only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Final

from wool_idle.cli.parser import Parser, help_from_docstring
from wool_idle.cli.tls_flags import add_client_tls_flags, client_tls
from wool_idle.cli.values import ADDRESS, DURATION, GRACE, POSITIVE_DURATION
from wool_idle.contract import DEFAULT_GRACE, stop_deadline, valid_idle
from wool_idle.exceptions import IdleUnavailable, RpcError, StopRefused, TransientRpcError
from wool_idle.logs import printable
from wool_idle.worker.connection import WorkerConnection

IDLE_TIMEOUT: Final = 5.0
"""Default deadline of ``wool-idle idle``'s RPC."""
CLIENT_RPC_FLAGS: Final = (
    "from the command line only: the environment is shared with workers and daemons, "
    "whose WOOL_IDLE_GRACE or WOOL_IDLE_TIMEOUT mean something else (wool-idle 0.1.0 "
    "read them here: set, they exit 2 unless the flag is given)"
)
EXIT_OK: Final = 0
EXIT_UNSUPPORTED: Final = 3
"""``idle``: the worker predates the idle RPC. ``stop``: the worker refused (not idle enough)."""
EXIT_UNREACHABLE: Final = 4
EXIT_RPC_ERROR: Final = 5
IGNORES: Final = "does not say it honours --if-idle-for (a wool worker stops unconditionally)"
"""Said of a worker whose idle reply says it does not honour the conditional stop."""


def register(parser: Parser) -> None:
    """Add ``idle`` and ``stop`` to the top-level parser."""
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
        former_variable="WOOL_IDLE_TIMEOUT",
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
        former_variable="WOOL_IDLE_GRACE",
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
        "deadline of the stop RPC, past --grace (default: grace + 10s)",
        default=None,
        environment=False,
        former_variable="WOOL_IDLE_TIMEOUT",
    )
    add_client_tls_flags(stop)
    stop.set_defaults(func=stop_command, parser=stop)


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
    stop (not idle long enough), 4 if it is unreachable, 5 on any other RPC error.
    With --if-idle-for, a worker that ignores the condition (a wool worker; its idle
    reply says so) is asked its idle time first: not idle long enough, or with a
    grace of 0 (a task arriving meanwhile would be cancelled), it is not stopped
    (exit 3), nor is one that predates the idle RPC; else it is stopped, saying that
    the window was open."""
    tls = client_tls(args.parser, args)
    if args.timeout is not None and args.grace >= 0 and args.timeout <= args.grace:
        args.parser.error(
            "argument --timeout: must exceed --grace (the worker answers once drained)"
        )
    timeout = args.timeout or stop_deadline(args.grace)

    async def stop() -> str | None:
        async with WorkerConnection(args.target, tls=tls) as connection:
            if args.if_idle_for is not None:
                report = await connection.idle_report(timeout=args.timeout or IDLE_TIMEOUT)
                if not report.conditional_stop:
                    held = _unconditional(report.seconds, args.if_idle_for, args.grace)
                    if held is not None:
                        return held
                    print(
                        f"wool-idle: {args.target} {IGNORES}: idle {report.seconds:.3f}s, "
                        "stopping it (a task arriving meanwhile drains for --grace)",
                        file=sys.stderr,
                    )
            await connection.stop(args.grace, timeout=timeout, if_idle_for=args.if_idle_for)
        return None

    try:
        held = asyncio.run(stop())
    except IdleUnavailable as error:  # only --if-idle-for asks idle
        held = f"{printable(str(error))}, so --if-idle-for cannot be checked"
    except RpcError as error:
        return _report(error)
    if held is not None:
        print(f"wool-idle: {args.target} {IGNORES}: {held}; not stopped", file=sys.stderr)
        return EXIT_UNSUPPORTED
    return EXIT_OK


def _unconditional(seconds: float, if_idle_for: float, grace: float) -> str | None:
    """Why a worker that ignores the condition must not be stopped, or None: idle
    ``seconds`` short of ``if_idle_for`` (or no idle value), or a ``grace`` of 0."""
    if not valid_idle(seconds) or seconds < if_idle_for:
        return f"idle {seconds:.3f}s, required {if_idle_for:.3f}s"
    if grace == 0:
        return "with --grace 0 a task arriving before the stop would be cancelled"
    return None


def _report(error: Exception) -> int:
    """Say ``error`` on stderr, as one line (the worker's own message in it may hold line
    breaks or a terminal's escapes), and return its exit status."""
    print(f"wool-idle: {printable(str(error))}", file=sys.stderr)
    if isinstance(error, IdleUnavailable | StopRefused):
        return EXIT_UNSUPPORTED
    if isinstance(error, TransientRpcError):
        return EXIT_UNREACHABLE
    return EXIT_RPC_ERROR
