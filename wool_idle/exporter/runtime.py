"""What the exporter sets on its process once it has started: it holds a connection
per worker, so it needs descriptors, a garbage collector that does not rescan
its start-up objects, and errors that may repeat per connection logged once.
"""

from __future__ import annotations

import gc
import logging
import resource
from typing import Final

from wool_idle.logs import log_repeats_once

log = logging.getLogger("wool_idle.exporter")

YOUNG_GENERATION: Final = 50_000
"""Allocations between collections of the youngest generation (CPython's default is
700): a scrape over thousands of workers allocates per worker, and without cycles."""
RESERVED_FILES: Final = 128
"""Descriptors for everything but connections to workers: listening sockets, the
scrapers' HTTP connections, files, gRPC's own."""
REPEATING_LOGGERS: Final = ("asyncio", "grpc")
"""Loggers whose errors can repeat per connection: asyncio's ``accept()`` failures
(every pending connection when descriptors run out), gRPC's own."""


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft limit on open files to the hard limit (as Go programs such as
    Prometheus and blackbox_exporter do); return the (soft, hard) limits now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft, hard
    return hard, hard


def connection_budget(limit: int) -> int | None:
    """How many connections to workers fit in ``limit`` open files: all but
    ``RESERVED_FILES``, or half of a limit below twice that; None without a limit."""
    if limit == resource.RLIM_INFINITY:
        return None
    return limit - RESERVED_FILES if limit >= 2 * RESERVED_FILES else limit // 2


def warn_if_few_open_files(limit: int, connections: int) -> None:
    """Log a warning when ``limit`` open files cannot hold ``connections`` connections to
    workers (a descriptor each) beside ``RESERVED_FILES``."""
    needed = connections + RESERVED_FILES
    if limit < needed:
        log.warning(
            "open files limit %d is below the %d that %d worker connections need (the "
            "targets and --probe.adhoc-limit): raise it (systemd LimitNOFILE) or lower "
            "--probe.adhoc-limit, or the probes beyond its share fail (unavailable)",
            limit,
            needed,
            connections,
        )


def settle_garbage_collector() -> None:
    """Freeze what start-up allocated (full collections skip it from now on) and
    collect the youngest generation less often."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION, older, oldest)


def log_repeating_errors_once() -> None:
    """Add a ``OncePerKind`` filter for ``REPEATING_LOGGERS`` to the root logger's
    handlers (call after logging is configured)."""
    log_repeats_once(*REPEATING_LOGGERS)
