"""A stopped worker leaves within a bound, whatever its tasks left behind.

Once the worker stops serving (a stop drained it, or a signal), asyncio's
clean-up cancels the tasks still left and waits for them, then for the
threads of its default executor: each without limit; the interpreter's exit
then waits for every other thread that is no daemon (a thread or a pool a
task started itself). A task that a task started and that ignores its
cancellation, or a blocking call left running on a thread, would keep a
stopped worker's process alive for good: the autoscaler counts it retired
while its host keeps paying for it. ``ExitDeadline`` bounds both waits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from types import TracebackType
from typing import Final

log = logging.getLogger(__name__)

LEAVING_TIME: Final = 10.0
"""Seconds asyncio's clean-up gets once a worker stops serving."""


class ExitDeadline:
    """A bound on the clean-up that ends the ``with`` block: ``start(status)`` gives
    it ``seconds``, past which the process ends with ``status`` (``os._exit``, once
    the log and the standard streams are flushed). Leaving the block in time
    disarms it, unless threads started in the block that are no daemons still
    run (the interpreter's exit would wait for them): it then stays armed while
    any of them does, so that exit is bounded too (the block left by an
    exception, a SIGINT during the clean-up, alike). Use it ``enabled`` only in
    a process of the worker's own: every thread started in the block is then
    the worker's, and no caller goes on after it. A timer thread that cannot be
    started (a pids limit) is logged, and the clean-up is then unbounded."""

    def __init__(self, seconds: float, *, enabled: bool = True) -> None:
        self.seconds = seconds
        self.enabled = enabled
        self._timer: threading.Timer | None = None
        self._before: set[threading.Thread] = set()
        self._left: list[threading.Thread] | None = None  # once the block is left

    def start(self, status: int) -> None:
        """Start the bound (if ``enabled``); past it the process ends with ``status``."""
        if not self.enabled:
            return
        timer = threading.Timer(self.seconds, self._leave, args=(status,))
        timer.daemon = True
        timer.name = "exit deadline"
        try:
            timer.start()
        except RuntimeError as error:
            log.warning("no bound on the worker's clean-up: %s", error)
            return
        self._timer = timer

    def __enter__(self) -> ExitDeadline:
        self._before = set(threading.enumerate())
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._left = [
            thread
            for thread in threading.enumerate()
            if thread not in self._before and not thread.daemon
        ]
        if self._timer is not None and not self._left:
            self._timer.cancel()

    def _leave(self, status: int) -> None:
        if self._left is not None and not any(t.is_alive() for t in self._left):
            return  # the block was left, and the threads it left have ended
        log.error(
            "the worker stopped serving %gs ago, and tasks or threads it left still "
            "hold its process; it leaves without them (status %d)",
            self.seconds,
            status,
        )
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)
