"""Blocking calls awaited from the event loop, run on daemon threads.

``asyncio.to_thread`` runs on the loop's default executor, whose threads
``asyncio.run`` waits for at exit, and a ``ThreadPoolExecutor``'s threads are
joined at exit with every job queued: one call that takes days (bcrypt at cost
31, a web config of thousands of users, a write to a hung mount, name lookups
against a DNS server that does not answer) would hold up SIGTERM. Nothing waits
for a daemon thread; its result, if the loop is gone by then, is dropped.
``on_daemon_thread`` runs one call on a thread of its own; ``DaemonThreads`` is
an executor of a fixed number of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from functools import partial
from typing import Any, Final, TypeVar

Result = TypeVar("Result")


async def on_daemon_thread(name: str, call: Callable[[], Result]) -> Result:
    """``call()`` on a daemon thread named ``name``: its result, or what it raised."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Result] = loop.create_future()

    def settle(result: Result | None, error: BaseException | None) -> None:
        if outcome.done():  # the awaiting task was cancelled
            return
        if error is not None:
            outcome.set_exception(error)
        else:
            outcome.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        result: Result | None = None
        error: BaseException | None = None
        try:
            result = call()
        except StopIteration as raised:  # a future refuses it: it would never settle
            error = RuntimeError(f"{name} raised StopIteration")
            error.__cause__ = raised
        except BaseException as raised:  # delivered to the awaiting task, never lost
            error = raised
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await outcome


class DaemonThreads(Executor):
    """An executor of ``threads`` daemon threads named ``name``: the jobs run in the
    order submitted (one at a time with one thread), and the process leaves without
    waiting for those under way or queued. A job whose future is cancelled before it
    began never runs, and is let go: however many jobs are submitted and cancelled
    while every thread hangs, the queue holds at most about twice the jobs still
    wanted (``PRUNE_AT`` at least). ``submit`` raises ``RuntimeError`` when no thread
    runs and none can be started."""

    PRUNE_AT: Final = 64
    """Queued jobs at which the cancelled ones are first let go."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads, self.name = threads, name
        self._jobs: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self._ready = threading.Condition()
        self._started = 0
        self._prune_at = self.PRUNE_AT

    def submit(self, fn: Callable[..., Result], /, *args: Any, **kwargs: Any) -> Future[Result]:
        future: Future[Result] = Future()
        with self._ready:
            if len(self._jobs) >= self._prune_at:  # amortised: the queue at most doubles
                self._jobs = deque(job for job in self._jobs if not job[0].cancelled())
                self._prune_at = max(self.PRUNE_AT, 2 * len(self._jobs))
            self._jobs.append((future, partial(fn, *args, **kwargs)))
            if self._started < self.threads:  # started on first use, never at import
                self._start_thread()
            self._ready.notify()
        return future

    def _start_thread(self) -> None:
        """Start one more thread (the lock held). Where none can be started (a pids
        limit), one already started runs the job; with none, the job is let go and the
        ``RuntimeError`` raised, and the next ``submit`` tries again: a failed start
        never counts as a thread, which would leave the jobs queued for ever."""
        name = f"{self.name}-{self._started + 1}"
        try:
            threading.Thread(target=self._run, name=name, daemon=True).start()
        except RuntimeError:
            if self._started == 0:
                self._jobs.pop()
                raise
            return
        self._started += 1

    def _run(self) -> None:
        while True:
            _settle(*self._next())  # nothing of a job is kept while the thread waits

    def _next(self) -> tuple[Future[Any], Callable[[], Any]]:
        """The first job queued, once there is one."""
        with self._ready:
            while not self._jobs:
                self._ready.wait()
            return self._jobs.popleft()


def _settle(future: Future[Result], job: Callable[[], Result]) -> None:
    """Run ``job`` unless ``future`` was cancelled, and settle ``future`` with what came
    of it (what it raised is the waiter's to handle, as with any executor)."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = job()
    except BaseException as error:
        future.set_exception(error)
    else:
        future.set_result(result)
