"""A value loaded from files and loaded again as they change, never on the caller's time.

TLS files rotate under a running daemon (cert-manager, a renewal timer). The
event loop asks for them on every new connection, so it must never wait for
them: a stalled network file system would stall every request with it.
``Followed.current`` returns the last good value at once and, at most once per
``interval``, starts one reload on a daemon thread; the connections after it
use what it loaded. A reload that hangs holds nobody up and starts no other
(nothing waits for a daemon thread, not even the process's exit).

Where the caller is not the event loop and wants the files as they are now
(gRPC asks a worker's certificate from its own threads before each
handshake), ``reload`` loads them on the caller's thread.

Files that do not load are logged, once for each distinct failure, and the
last good value is kept; only the first load, at construction, raises. So is
a reload that takes ``STALLED_AFTER`` intervals or more (it goes on, and a
value it ends with is taken), and a reload thread that cannot be started.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final, Generic, TypeVar

log = logging.getLogger(__name__)

Value = TypeVar("Value")

STALLED_AFTER: Final = 10
"""Intervals after which a reload still running is logged as stalled (once)."""


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
        self._reloading = False
        self._failure = ""
        self._stall_logged = False

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
        if self._reloading:
            self._warn_if_stalled(now)
            return self._value
        self._checked, self._reloading, self._stall_logged = now, True, False
        reloader = threading.Thread(
            target=self._reload_then_done, name="wool-idle-reload", daemon=True
        )
        try:
            reloader.start()
        except RuntimeError as error:  # no thread left (a pids limit): try next interval
            self._reloading = False
            self._log_failure(f"cannot start a thread to read them: {error}")
        return self._value

    def reload(self) -> Value:
        """Load the files now, on this thread, and return the last good value: what
        they give, or (when they do not load) the value before."""
        with self._lock:
            previous = self._value
            try:
                fresh = self._load(previous)
            except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
                self._log_failure(str(error))
                return previous
            except Exception as error:  # a fault of ours: logged with its traceback
                self._log_failure(f"{type(error).__name__}: {error}", exc_info=True)
                return previous
            self._failure = ""
            if fresh is not previous:
                self._value = fresh
                log.info("%s reloaded: %s", self._what, self._names)
            return fresh

    def _reload_then_done(self) -> None:
        try:
            self.reload()
        finally:
            self._reloading = False

    def _log_failure(self, failure: str, *, exc_info: bool = False) -> None:
        """Warn that the last good value is kept, once until the failure changes."""
        if failure != self._failure:
            self._failure = failure
            log.warning("keeping the %s loaded before: %s", self._what, failure, exc_info=exc_info)

    def _warn_if_stalled(self, now: float) -> None:
        """Warn, once per reload, of one running ``STALLED_AFTER`` intervals or more."""
        running = now - self._checked
        if not self._stall_logged and running >= STALLED_AFTER * self._interval:
            self._stall_logged = True
            log.warning(
                "reading the %s has taken %.0f s so far (a stalled file system?); "
                "the ones loaded before stay in use: %s",
                self._what,
                running,
                self._names,
            )
