"""A value loaded from files and loaded again as they change, never on the caller's time.

TLS files rotate under a running daemon (cert-manager, a renewal timer). The
event loop asks for them on every new connection, so it must never wait for
them: a stalled network file system would stall every request with it.
``Followed.current`` returns the last good value at once and, at most once per
``interval``, starts one reload on a daemon thread; the connections after it
use what it loaded. A reload that hangs holds nobody up and starts no other
(nothing waits for a daemon thread, not even the process's exit).

A caller that looks rarely (a connection made once a cycle) would so use the
files as of its previous look: ``fresh`` also waits, a bounded time, for the
reload it starts. Where the caller is not the event loop and wants the files
as they are now (gRPC asks a worker's certificate from its own threads before
each handshake), ``reload`` loads them on the caller's thread, or answers the
last good value at once while another reload runs.

Files that do not load are logged, once for each distinct failure, and the
last good value is kept; only the first load, at construction, raises. So is
a reload still running after ``STALLED_AFTER`` seconds (it goes on, and a
value it ends with is taken), and a reload thread that cannot be started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final, Generic, TypeVar

log = logging.getLogger(__name__)

Value = TypeVar("Value")

STALLED_AFTER: Final = 10.0
"""Seconds after which a reload still running is logged as stalled (once)."""


class Followed(Generic[Value]):
    """The last good value of ``load``. In the log, ``what`` says what the files
    are (``TLS files``) and ``names`` which they are.

    ``load(previous)`` reads the files and returns the value they give, or
    ``previous`` itself when they did not change (None on the first load). It
    raises ``OSError`` (``ssl.SSLError`` is one) or ``ValueError`` naming the file
    that does not load.
    """

    def __init__(
        self,
        load: Callable[[Value | None], Value],
        *,
        what: str,
        names: str,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._what = what
        self._names = names
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._value = load(None)
        self._checked = clock()
        self._running: Future[None] | None = None
        """The reload started on a thread by ``current``, until it ends."""
        self._started: float | None = None
        """When the reload under way (on any thread) began."""
        self._stall_logged = False
        self._failure = ""

    @property
    def value(self) -> Value:
        """The last good value, as it is (no look at the files)."""
        return self._value

    def current(self) -> Value:
        """The last good value; when it was last looked at ``interval`` ago or more,
        a reload starts on a daemon thread (unless one is running) for later callers."""
        now = self._clock()
        if now - self._checked < self._interval:
            return self._value
        if self._running is not None:
            self._warn_if_stalled()
            return self._value
        self._checked = now
        running = self._running = Future()
        reloader = threading.Thread(
            target=self._reload_then_done, args=(running,), name="wool-idle-reload", daemon=True
        )
        try:
            reloader.start()
        except RuntimeError as error:  # no thread left (a pids limit): try next interval
            self._running = None
            self._log_failure(f"cannot start a thread to read them: {error}")
        return self._value

    async def fresh(self, wait: float) -> Value:
        """``current()``, after waiting (at most ``wait`` seconds, off the event loop's
        time) for the reload it started or found running."""
        self.current()
        running = self._running
        if running is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(running)), wait)
        return self._value

    def reload(self) -> Value:
        """Load the files now, on this thread, and return the last good value: what
        they give, or (when they do not load) the value before. While another reload
        runs, the last good value at once: a read stalled on its file system holds
        up no other caller."""
        if not self._lock.acquire(blocking=False):
            self._warn_if_stalled()
            return self._value
        try:
            self._load_now()
            return self._value
        finally:
            self._lock.release()

    def force(self) -> str:
        """Load the files now, on this thread, once a reload running on another has
        ended (a forced reload: its caller asks for the files as they are now, on a
        thread of its own); why they did not load (the last good value kept), or
        ``""`` when they did."""
        with self._lock:
            return self._load_now()

    def _load_now(self) -> str:
        """Load the files (the lock held): the value they give is taken; why they do
        not load, or ``""``."""
        self._started, self._stall_logged = self._clock(), False
        previous = self._value
        try:
            fresh = self._load(previous)
        except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
            self._log_failure(str(error))
            return str(error)
        except Exception as error:  # a fault of ours: logged with its traceback
            self._log_failure(f"{type(error).__name__}: {error}", exc_info=True)
            return f"{type(error).__name__}: {error}"
        finally:
            self._started = None
        self._failure = ""
        if fresh is not previous:
            # Said before it is used: no caller acts on files the log has not named.
            log.info("%s reloaded: %s", self._what, self._names)
            self._value = fresh
        return ""

    def _reload_then_done(self, running: Future[None]) -> None:
        try:
            self.reload()
        finally:
            self._running = None
            running.set_result(None)

    def _log_failure(self, failure: str, *, exc_info: bool = False) -> None:
        """Warn that the last good value is kept, once until the failure changes."""
        if failure != self._failure:
            self._failure = failure
            log.warning("keeping the %s loaded before: %s", self._what, failure, exc_info=exc_info)

    def _warn_if_stalled(self) -> None:
        """Warn, once per reload, of one running ``STALLED_AFTER`` seconds or more."""
        started = self._started
        running = 0.0 if started is None else self._clock() - started
        if running >= STALLED_AFTER and not self._stall_logged:
            self._stall_logged = True
            log.warning(
                "reading the %s has taken %.0f s so far (a stalled file system?); "
                "the ones loaded before stay in use: %s",
                self._what,
                running,
                self._names,
            )
