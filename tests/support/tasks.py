"""Task functions the tests dispatch to real workers.

Workers in subprocesses cannot import this module, so ``by_value`` makes
cloudpickle ship these functions by value. Gates are files: a task blocks
until the test creates its gate file, which works in-process and across
processes alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time

import cloudpickle


def by_value() -> None:
    """Pickle this module's functions by value (for workers in other processes)."""
    import support.tasks

    cloudpickle.register_pickle_by_value(support.tasks)


async def echo(value: object) -> object:
    return value


async def sleep_for(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


async def gated(gate: str, outcome: str = "return") -> str:
    """Wait for the file ``gate``, then return ``"ok"`` or raise ``ValueError``."""
    while not os.path.exists(gate):
        await asyncio.sleep(0.01)
    if outcome == "raise":
        raise ValueError("task failed")
    return "ok"


def not_a_coroutine() -> str:
    return "sync"


class Unusual(BaseException):
    """A BaseException that is neither an Exception nor a process exit."""


async def exits(how: str) -> str:
    """End the task the way ``how`` says: ``sys.exit``, ``SystemExit``,
    ``KeyboardInterrupt`` or a custom ``BaseException``."""
    await asyncio.sleep(0)
    if how == "sys_exit":
        sys.exit(3)
    if how == "system_exit":
        raise SystemExit("bye")
    if how == "keyboard_interrupt":
        raise KeyboardInterrupt
    raise Unusual("unusual")


async def sized(size: int, outcome: str = "return") -> bytes:
    """Return (or raise a ValueError carrying) ``size`` bytes."""
    if outcome == "raise":
        raise ValueError(b"x" * size)
    return b"x" * size


class ExitWhenPickled:
    """A result whose pickling (on the worker, to send it back) raises an exit:
    ``SystemExit`` or, with ``keyboard_interrupt``, ``KeyboardInterrupt``."""

    def __init__(self, *, keyboard_interrupt: bool) -> None:
        self.keyboard_interrupt = keyboard_interrupt

    def __reduce__(self) -> tuple[object, ...]:
        if self.keyboard_interrupt:
            raise KeyboardInterrupt
        raise SystemExit(3)


class ErrorExitingWhenPickled(Exception):
    """An exception whose pickling (on the worker) raises ``SystemExit``."""

    def __reduce__(self) -> tuple[object, ...]:
        raise SystemExit(4)


class ExitWhenUnpickled:
    """An argument whose unpickling (on the worker, before the task starts) calls
    ``sys.exit``."""

    def __reduce__(self) -> tuple[object, ...]:
        return (sys.exit, (5,))


async def returns(value: object) -> object:
    return value


async def returns_exit_when_pickled(how: str) -> ExitWhenPickled:
    return ExitWhenPickled(keyboard_interrupt=how == "keyboard_interrupt")


async def raises_error_exiting_when_pickled() -> None:
    raise ErrorExitingWhenPickled("unpicklable")


class ErrorExitingWhenUnpickled(Exception):
    """An exception whose unpickling (on the caller, once the task raised it) calls
    ``sys.exit``."""

    def __reduce__(self) -> tuple[object, ...]:
        return (sys.exit, (6,))


async def outcome_exiting_when_unpickled(outcome: str) -> ExitWhenUnpickled:
    """Return (``outcome`` "return") or raise something whose unpickling calls ``sys.exit``."""
    if outcome == "raise":
        raise ErrorExitingWhenUnpickled()
    return ExitWhenUnpickled()


async def exits_beside(how: str) -> str:
    """Start an exit beside this task the way ``how`` says, then finish normally:
    ``inner_task`` (a task it creates calls ``sys.exit``), ``call_soon`` and
    ``call_later`` (a callback raising ``SystemExit``), ``done_callback`` (a done
    callback raising ``KeyboardInterrupt``)."""
    loop = asyncio.get_running_loop()

    async def inner() -> None:
        sys.exit(9)

    if how == "inner_task":
        inner_task = asyncio.create_task(inner())
        await asyncio.wait([inner_task])
    elif how == "call_soon":
        loop.call_soon(sys.exit, 8)
    elif how == "call_later":
        loop.call_later(0.01, sys.exit, 7)
    else:
        future = loop.create_future()
        future.add_done_callback(lambda _: (_ for _ in ()).throw(KeyboardInterrupt))
        future.set_result(None)
    await asyncio.sleep(0.1)
    return how


async def exits_from_signal_handler() -> str:
    """Install a signal handler that calls ``sys.exit`` and trigger it: the one kind
    of callback the worker's loop cannot contain."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, sys.exit, 3)
    os.kill(os.getpid(), signal.SIGUSR1)
    await asyncio.sleep(5)
    return "not reached"


async def stops_the_loop() -> str:
    """Stop the running event loop (``loop.stop()``), then carry on and return."""
    asyncio.get_running_loop().stop()
    await asyncio.sleep(0.1)
    return "ok"


async def _template() -> None:
    """Lends its code object to ``PosingAsCoroutineFunction``."""


class ExitOnTypeCheck:
    """An object whose ``isinstance`` check (it reads ``__class__``) calls ``sys.exit``."""

    def __getattribute__(self, name: str) -> object:
        if name == "__class__":
            sys.exit(4)
        return object.__getattribute__(self, name)


class ErrorExitingOnTypeCheck(Exception):
    """An exception whose ``isinstance`` check against another class (it reads
    ``__class__``) calls ``sys.exit``."""

    def __getattribute__(self, name: str) -> object:
        if name == "__class__":
            sys.exit(4)
        return Exception.__getattribute__(self, name)


async def raises_error_exiting_on_type_check() -> None:
    raise ErrorExitingOnTypeCheck("sly")


class PosingAsCoroutineFunction:
    """A callable that ``inspect.iscoroutinefunction`` takes for one (it looks like a
    function with a coroutine's code) and that returns an ``ExitOnTypeCheck``."""

    def __init__(self) -> None:
        self.__name__ = "posing"
        self.__code__ = _template.__code__
        self.__defaults__ = None
        self.__kwdefaults__ = None
        self.__annotations__: dict[str, object] = {}

    def __call__(self) -> ExitOnTypeCheck:
        return ExitOnTypeCheck()

    def __repr__(self) -> str:
        return "PosingAsCoroutineFunction()"


class AbortExitingWhenDescribed(BaseException):
    """A ``BaseException`` whose ``repr`` calls ``sys.exit``, and, once unpickled (on
    the caller), so does its ``isinstance`` check against another class."""

    armed = False

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, armed=True)

    def __getattribute__(self, name: str) -> object:
        if name == "__class__" and BaseException.__getattribute__(self, "armed"):
            sys.exit(6)
        return BaseException.__getattribute__(self, name)

    def __repr__(self) -> str:
        sys.exit(7)


async def aborts_exiting_when_described() -> None:
    abort = AbortExitingWhenDescribed()
    abort.note = "pickled with its state, so unpickling arms it"  # type: ignore[attr-defined]
    raise abort


class SurrogateRepr:
    """A callable that is no coroutine function, whose ``repr`` is not valid UTF-8."""

    def __call__(self) -> None:
        return None

    def __repr__(self) -> str:
        return "surrogate \udc80"


class SurrogatesRepr(SurrogateRepr):
    """A ``SurrogateRepr`` whose ``repr`` is two thousand lone surrogates."""

    def __repr__(self) -> str:
        return "\udc80" * 2000


async def awaits_a_cancelled_future() -> None:
    """End cancelled without any stop: await a future something else cancelled."""
    future = asyncio.get_running_loop().create_future()
    future.cancel()
    await future


class ExitingText(str):
    """Text whose formatting (``format``, an f-string, ``str``, ``%s``) calls
    ``sys.exit``: what a ``__repr__`` returning a ``str`` subclass may bring along."""

    def __format__(self, spec: str) -> str:
        sys.exit(8)

    def __str__(self) -> str:
        sys.exit(8)


class AbortDescribedByExitingText(BaseException):
    """A ``BaseException`` whose ``repr`` is an ``ExitingText``."""

    def __repr__(self) -> str:
        return ExitingText("described")


async def aborts_described_by_exiting_text() -> None:
    raise AbortDescribedByExitingText()


async def exits_beside_described_by_exiting_text() -> str:
    """Schedule a callback raising a ``SystemExit`` whose ``repr`` is an ``ExitingText``,
    then finish normally."""

    class DescribedExit(SystemExit):
        def __repr__(self) -> str:
            return ExitingText("described")

    def leave() -> None:
        raise DescribedExit(3)

    asyncio.get_running_loop().call_soon(leave)
    await asyncio.sleep(0.1)
    return "ok"


_LINGERING: set[asyncio.Task[None]] = set()


async def leaves_a_task_stopping_the_loop_when_cancelled() -> str:
    """Leave a task behind that stops the event loop (``loop.stop()``) when it is
    cancelled, as the worker's shutdown cancels every task left, then return."""

    async def linger() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            asyncio.get_running_loop().stop()

    lingering = asyncio.create_task(linger())
    _LINGERING.add(lingering)
    return "ok"


async def leaves_work_ignoring_its_end(what: str) -> str:
    """Leave behind, then return: a task that ignores every cancellation (``what`` is
    ``"task"``), a blocking call of an hour on the loop's default executor
    (``"thread"``), or on a thread of its own (``"own thread"``): the first two
    hold the worker's clean-up without limit, the last the interpreter's exit."""

    async def ignore_cancellation() -> None:
        while True:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)

    if what == "task":
        _LINGERING.add(asyncio.create_task(ignore_cancellation()))
    elif what == "thread":
        asyncio.get_running_loop().run_in_executor(None, time.sleep, 3600)
    else:
        threading.Thread(target=time.sleep, args=(3600,)).start()
    return "ok"


class NameExitingType(type):
    """A metaclass whose classes' ``__name__`` calls ``sys.exit``."""

    def __getattribute__(cls, name: str) -> object:
        if name == "__name__":
            sys.exit(9)
        return type.__getattribute__(cls, name)


async def raises_error_named_by_exit() -> None:
    """Raise an exception whose type's name and whose ``repr`` call ``sys.exit``: its
    class, made here, is pickled by value, which reads its name."""

    class ErrorNamedByExit(Exception, metaclass=NameExitingType):
        def __repr__(self) -> str:
            sys.exit(9)

    raise ErrorNamedByExit()


async def ignores_its_cancellation(gate: str = "") -> str:
    """Run until the file ``gate`` exists (for ever without one), swallowing every
    cancellation."""
    while not gate or not os.path.exists(gate):
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.01)
    return "ok"


async def prints(size: int) -> int:
    """Write ``size`` bytes on stdout (as a chatty task does), then return ``size``."""
    sys.stdout.write("x" * size)
    sys.stdout.flush()
    return size


async def gated_then_dispatches(gate: str, address: str, value: object) -> object:
    """Wait for the file ``gate``, then dispatch ``echo(value)`` to the worker at
    ``address`` (the one running this task too, say) and return what it returned,
    its error left to propagate: a nested dispatch."""
    from wool_idle.worker import WorkerConnection

    await gated(gate)
    async with WorkerConnection(address) as connection:
        return await connection.dispatch(echo, value)


async def gated_then_dispatches_together(gate: str, address: str, value: object) -> object:
    """``gated_then_dispatches``, with two dispatches at once in an ``asyncio.TaskGroup``:
    their errors propagate as its ``ExceptionGroup``."""
    from wool_idle.worker import WorkerConnection

    await gated(gate)
    async with WorkerConnection(address) as connection, asyncio.TaskGroup() as group:
        calls = [group.create_task(connection.dispatch(echo, value)) for _ in range(2)]
    return [call.result() for call in calls]
