"""``wool-idle worker``; with it, ``idle`` and ``stop`` (``client_cli``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Final

from wool_idle.cli.log_flags import add_log_flags, configure_logging
from wool_idle.cli.parser import USAGE_ERROR, Parser
from wool_idle.cli.serve import EXIT_CANNOT_LISTEN, EXIT_OK, serve_until_signal
from wool_idle.cli.tls_flags import add_server_tls_flags, server_tls
from wool_idle.cli.values import GRACE, LISTEN_ADDRESS, TEXT, Value, whole_number
from wool_idle.contract import DEFAULT_GRACE
from wool_idle.exceptions import safe_repr
from wool_idle.logs import log_repeats_once
from wool_idle.worker import client_cli
from wool_idle.worker.auth import MethodPolicy
from wool_idle.worker.containment import (
    EXIT_LOOP_ENDED,
    EXITS,
    ContainingEventLoop,
)
from wool_idle.worker.leaving import LEAVING_TIME, ExitDeadline
from wool_idle.worker.server import WorkerServer
from wool_idle.worker.service import CANCEL_WAIT, WorkerService
from wool_idle.worker.tls import ServerTls

log = logging.getLogger("wool_idle.worker")
IDENTITY: Final = Value("IDENTITY", TEXT.parse)
DESCRIPTION: Final = (
    "Run a worker until a stop RPC or SIGTERM/SIGINT has drained it (--grace). Prints the "
    "address clients should use on one line once it serves. A task that raises SystemExit "
    "or KeyboardInterrupt (itself, in a task it starts, in a callback it schedules) fails "
    "alone; a task that stops the event loop (loop.stop()) has it run again; an exit that "
    "still ends the event loop (one raised by a signal handler a task installed) is logged "
    "and the worker exits 70 rather than hang. Tasks a stop cancelled get "
    f"{CANCEL_WAIT:g} seconds to end; one that ignores its cancellation is left behind. "
    "Once it stops serving, what its tasks left "
    f"behind gets {LEAVING_TIME:g} seconds to end; past them the worker exits anyway. SIGHUP "
    "is logged and ignored. Exit status: 0 once stopped (--signal-exit-code instead when a "
    "signal, not a stop, began the shutdown), 1 if it cannot listen, 2 on a bad flag or "
    "variable, 70 as above."
)
"""The worker's ``--help`` text: what an operator sees of ``run_worker``'s contract."""
RESERVED_EXITS: Final = {
    EXIT_CANNOT_LISTEN: "the worker cannot listen",
    USAGE_ERROR: "a bad flag or variable",
    EXIT_LOOP_ENDED: "an exit ended the event loop",
}
"""Exit statuses the worker gives other meanings: no ``--signal-exit-code``."""


def _exit_status(text: str) -> int:
    """0-255 but one of ``RESERVED_EXITS`` (a status that says one thing only)."""
    status = whole_number(0).parse(text)
    if status > 255:
        raise ValueError(f"invalid exit status {text!r}: must be 0-255")
    if status in RESERVED_EXITS:
        raise ValueError(
            f"exit status {status} already means {RESERVED_EXITS[status]}; "
            "choose another, e.g. 143 (128 + SIGTERM)"
        )
    return status


EXIT_STATUS: Final = Value("STATUS", _exit_status)


def register(parser: Parser) -> None:
    """Add the worker's subcommands to the top-level parser."""
    worker = parser.add_subcommand("worker", help="run a worker", description=DESCRIPTION)
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
        "how long SIGTERM drains in-flight tasks, a drain a stop began included "
        "('forever' for no limit)",
        default=DEFAULT_GRACE,
    )
    serving.add(
        "--signal-exit-code",
        EXIT_STATUS,
        "exit status once SIGTERM/SIGINT, not a stop, began the shutdown, so that a "
        "supervisor starts again a worker it stopped and leaves a retired one be "
        "(e.g. 143 under Kubernetes; not 1, 2 or 70)",
        default=EXIT_OK,
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

    client_cli.register(parser)


def _authorization(parser: Parser, args: argparse.Namespace) -> MethodPolicy:
    allowed = {"stop": args.allow_stop, "dispatch": args.allow_dispatch}
    for method, identities in allowed.items():
        if identities and not args.tls_client_ca:
            parser.error(f"argument --allow-{method}: needs mutual TLS (--tls-client-ca)")
    return MethodPolicy({m: frozenset(ids) for m, ids in allowed.items() if ids})


def run_worker(args: argparse.Namespace) -> int:
    """Run a worker until a stop RPC or SIGTERM/SIGINT has drained it, as
    ``DESCRIPTION`` says, and return its exit status: whoever began the shutdown
    decides it, ``args.signal_exit_code`` for a signal (a stop accepted during
    its drain retires nothing), 0 for a stop (a signal during its drain leaves
    it a retirement). In a process of its own (``args.own_process``), once it
    stops serving, asyncio's clean-up and the interpreter's exit get
    ``LEAVING_TIME``; past it the process exits with its status, whatever tasks
    or threads it left (``ExitDeadline``). Called in-process, the caller's exit
    is its own: nothing is bounded.
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
    signalled = False  # whether a signal, not a stop, began the shutdown

    @contextlib.asynccontextmanager
    async def serving() -> AsyncIterator[str]:
        yield await server.start()

    def stop() -> None:
        nonlocal signalled
        signalled = signalled or not service.stopping.is_set()
        service.shutdown(args.grace, at_most=True)

    status = await serve_until_signal("worker", serving(), server.wait_closed, stop=stop)
    if status == EXIT_OK and signalled and args.signal_exit_code != EXIT_OK:
        log.info("worker stopped by a signal: exit status %d", args.signal_exit_code)
        return int(args.signal_exit_code)
    return status
