"""Keeping a task's ``SystemExit`` or ``KeyboardInterrupt`` inside it.

asyncio lets those two exceptions out of the event loop wherever they are
raised: in a task, in a task the task started, in a done callback, in a
callback given to ``call_soon``. Out of the loop they end the worker and every
task in flight. Two layers keep them in:

- ``contained`` wraps a dispatched task's coroutine: its exit becomes a
  ``TaskExit``, an ordinary exception, which the service answers as that
  task's exception (this holds on any loop, in-process tests included);
- ``ContainingEventLoop``, the worker process's loop, runs every callback
  scheduled through ``call_soon``, ``call_later``/``call_at``,
  ``call_soon_threadsafe``, ``add_reader`` and ``add_writer`` contained: an
  exit it raises is logged and ends that callback only. A task's steps are
  such callbacks, so a task started by a task (``asyncio.create_task``) that
  exits ends with that exception, and whoever awaits it gets it; done
  callbacks are scheduled through ``call_soon`` too. So does the exception
  handler, which a task may replace (``set_exception_handler``) with one that
  exits when a callback fails.

A task that stops the loop (``loop.stop()``) does not end a run either: the
loop is run again until what it was run for is done, the worker's shutdown
(``asyncio.Runner`` cancelling the tasks left) included.

Not contained: a callback given to ``add_signal_handler`` (asyncio runs it
without going through any of those methods). An exit raised there still ends
the loop; the worker then logs it and exits ``EXIT_LOOP_ENDED`` (never hangs).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final, TypeVar, TypeVarTuple

from wool_idle.exceptions import safe_repr

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

log = logging.getLogger(__name__)

EXITS: Final = (SystemExit, KeyboardInterrupt)
"""The exceptions asyncio re-raises out of the event loop."""
EXIT_LOOP_ENDED: Final = 70
"""The worker's exit status when an exit escaped every containment (EX_SOFTWARE)."""


class TaskExit(Exception):
    """A task's ``SystemExit`` or ``KeyboardInterrupt``, carried out of it as an
    ordinary exception (``exit`` is the original)."""

    def __init__(self, exit_: BaseException) -> None:
        super().__init__(safe_repr(exit_))
        self.exit = exit_


async def contained(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Await ``coroutine``, raising ``TaskExit`` in place of an exit it raises."""
    try:
        return await coroutine
    except EXITS as exit_:
        raise TaskExit(exit_) from None


def _containing(callback: Callable[[*Ts], object]) -> Callable[[*Ts], object]:
    def run(*args: *Ts) -> object:
        try:
            return callback(*args)
        except EXITS as exit_:
            log.error("contained %s raised in a callback; the worker goes on", safe_repr(exit_))
            return None

    return run


class ContainingEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose scheduled callbacks run contained (see the module)."""

    def call_soon(
        self,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        return super().call_soon(_containing(callback), *args, context=context)

    def call_at(
        self,
        when: float,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return super().call_at(when, _containing(callback), *args, context=context)

    def call_soon_threadsafe(
        self,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        return super().call_soon_threadsafe(_containing(callback), *args, context=context)

    def run_until_complete(self, future: Awaitable[T]) -> T:  # type: ignore[override]
        """Run until ``future`` is done, again each time a task stopped the loop. A
        run asyncio refuses (this loop running, from any thread, another loop running
        in this thread, or this one closed) is refused alike."""
        if self.is_running() or self.is_closed() or asyncio._get_running_loop() is not None:
            return super().run_until_complete(future)
        future = asyncio.ensure_future(future, loop=self)
        while True:
            try:
                return super().run_until_complete(future)
            except RuntimeError:  # "Event loop stopped before Future completed."
                if future.done():
                    raise
                log.error("a task stopped the event loop; it runs again")

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        _containing(super().call_exception_handler)(context)

    def add_reader(
        self, fd: FileDescriptorLike, callback: Callable[[*Ts], object], *args: *Ts
    ) -> None:
        super().add_reader(fd, _containing(callback), *args)

    def add_writer(
        self, fd: FileDescriptorLike, callback: Callable[[*Ts], object], *args: *Ts
    ) -> None:
        super().add_writer(fd, _containing(callback), *args)
