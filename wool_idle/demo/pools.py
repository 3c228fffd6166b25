"""Real wool pools for the demo and the end-to-end tests, one role per process.

``python -m wool_idle.demo.pools ROLE NAMESPACE [options]``:

- ``hold``: own the ``LocalDiscovery`` namespace until SIGTERM. wool's first
  entrant owns a namespace and unlinks it when it exits, so a durable pool
  needs a holder that outlives every pool and client.
- ``serve``: a pool of ``--workers`` wool workers tagged ``--tag``, published on
  the namespace (``LocalDiscovery``, or ``LanDiscovery`` with ``--lan IP``),
  until SIGTERM; then it drops and stops its workers. ``--host`` is the
  workers' bind host on ``LocalDiscovery`` (wool's default ``127.0.0.1``;
  ``0.0.0.0``, as wool's docs show, and wool publishes ``0.0.0.0:P``).
- ``client``: a wool client dispatching ``whoami`` to workers tagged ``--tag``
  every ``--interval`` for ``--seconds`` (0: until SIGTERM), polling discovery
  (wool's change notifications are missed otherwise); it never owns the
  namespace. SIGTERM ends it after the task in flight.

Each prints one ready line once up; ``client`` prints its counts as JSON
(``{"submitted": n, "completed": n, "failed": n}``) when done, and with
``--progress`` also after every task.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import json
import math
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

import wool

from wool_idle.demo.routines import whoami

POLL_INTERVAL: Final = 0.5
"""Seconds between a client's discovery scans."""


def loopback_zeroconf(interface: str) -> None:
    """Make wool's ``LanDiscovery`` use zeroconf on ``interface`` only (wool has no
    option for it: its module calls ``AsyncZeroconf()`` with no arguments)."""
    import wool.runtime.discovery.lan as lan
    from zeroconf.asyncio import AsyncZeroconf

    lan.AsyncZeroconf = functools.partial(AsyncZeroconf, interfaces=[interface])


def _has_tag(tag: str) -> Callable[[Any], bool]:
    return lambda metadata: tag in metadata.tags


def _stop_on_signal() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def _until_signal() -> None:
    await _stop_on_signal().wait()


async def hold(args: argparse.Namespace) -> None:
    """Own the namespace until SIGTERM."""
    with wool.LocalDiscovery(args.namespace):
        print(f"holding {args.namespace}", flush=True)
        await _until_signal()


async def serve(args: argparse.Namespace) -> None:
    """Run a tagged pool published on the namespace until SIGTERM."""
    if args.lan:
        discovery = functools.partial(wool.LanDiscovery, args.namespace, advertise_host=args.lan)
        worker = functools.partial(wool.LocalWorker, host=args.lan)
    else:
        discovery = functools.partial(wool.LocalDiscovery, args.namespace)
        worker = functools.partial(wool.LocalWorker, host=args.host)
    pool = wool.WorkerPool(
        args.tag, spawn=args.workers, discovery=discovery, worker=worker, shutdown_timeout=10
    )
    async with pool:
        print(f"serving {args.workers} {args.tag} workers on {args.namespace}", flush=True)
        await _until_signal()


async def client(args: argparse.Namespace) -> None:
    """Dispatch to the tagged workers for a while; print the counts as JSON."""
    if args.lan:
        subscriber = wool.LanDiscovery(args.namespace).subscribe(_has_tag(args.tag))
    else:
        subscriber = wool.LocalDiscovery(args.namespace).subscribe(
            _has_tag(args.tag), poll_interval=POLL_INTERVAL
        )
    counts: collections.Counter[str] = collections.Counter(submitted=0, completed=0, failed=0)
    stop = _stop_on_signal()
    loop = asyncio.get_running_loop()
    async with wool.WorkerProxy(discovery=subscriber, quorum_timeout=args.quorum_timeout):
        print(f"client on {args.tag} workers of {args.namespace}", flush=True)
        end = loop.time() + args.seconds if args.seconds else math.inf
        while loop.time() < end and not stop.is_set():
            counts["submitted"] += 1
            try:
                await whoami(args.task_seconds)
                counts["completed"] += 1
            except asyncio.CancelledError as error:
                if _cancelled_here():
                    raise
                _failed(counts, error)  # the worker cancelled it (a stop's grace ran out)
            except Exception as error:  # a lost task is what the caller counts, whatever it is
                _failed(counts, error)
            if args.progress:
                print(json.dumps(dict(counts)), flush=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), args.interval)
    print(json.dumps(dict(counts)), flush=True)


def _cancelled_here() -> bool:
    """Whether this task was cancelled, as opposed to a ``CancelledError`` that wool
    raised for a task its worker cancelled (a stop whose grace ran out)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _failed(counts: collections.Counter[str], error: BaseException) -> None:
    counts["failed"] += 1
    print(f"task failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)


ROLES: Final = {"hold": hold, "serve": serve, "client": client}


def main(argv: Sequence[str] | None = None) -> None:
    """Run the role ``argv`` names."""
    parser = argparse.ArgumentParser(prog="python -m wool_idle.demo.pools")
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("namespace")
    parser.add_argument("--tag", default="default")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--lan", metavar="IP", help="LanDiscovery on this interface only")
    parser.add_argument("--host", default="127.0.0.1", help="serve: the workers' bind host")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--task-seconds", type=float, default=0.0)
    parser.add_argument("--quorum-timeout", type=float, default=10.0)
    parser.add_argument("--progress", action="store_true", help="client: counts after each task")
    args = parser.parse_args(argv)
    if args.lan:
        loopback_zeroconf(args.lan)
    asyncio.run(ROLES[args.role](args))


if __name__ == "__main__":
    main()
