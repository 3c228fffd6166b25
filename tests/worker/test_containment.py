"""Keeping a task's exits inside it: ``contained`` and the worker's event loop."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

import pytest
from support.tasks import AbortDescribedByExitingText

from wool_idle.exceptions import safe_repr
from wool_idle.worker.containment import ContainingEventLoop, TaskExit, contained


class FailingRepr:
    def __repr__(self) -> str:
        raise SystemExit(1)


class TestContained:
    async def test_contained_exit_becomes_task_exit(self) -> None:
        """Given a coroutine calling sys.exit, when awaited contained, then TaskExit
        carrying the SystemExit (an ordinary exception)."""

        async def leave() -> None:
            sys.exit(3)

        # Act
        with pytest.raises(TaskExit) as raised:
            await contained(leave())
        # Assert
        assert isinstance(raised.value.exit, SystemExit) and raised.value.exit.code == 3


class TestSafeRepr:
    def test_safe_repr_of_a_failing_repr_names_the_type(self) -> None:
        """Given an object whose __repr__ exits, then its type is named instead."""
        text = safe_repr(FailingRepr())
        assert text.startswith("<failing repr of <") and "FailingRepr object at" in text

    def test_safe_repr_of_a_str_subclass_repr_is_plain_text(self) -> None:
        """Given an object whose __repr__ returns a str subclass whose formatting
        exits, then safe_repr gives its text as a plain str, which formats safely."""
        # Act
        text = safe_repr(AbortDescribedByExitingText())
        # Assert
        assert (type(text), f"{text}", str(text)) == (str, "described", "described")


class TestContainingEventLoop:
    def test_run_exits_in_callbacks_and_inner_tasks_end_only_them(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given the worker's loop, when callbacks (call_soon, call_later,
        call_soon_threadsafe, a reader, a done callback) raise SystemExit or
        KeyboardInterrupt and a task dies of sys.exit, then the loop runs on to the
        end of the main coroutine, each exit is logged, and the task that exited
        ends with its exit (for whoever awaits it)."""

        async def leave() -> None:
            sys.exit(9)

        async def main() -> tuple[str, BaseException | None]:
            loop = asyncio.get_running_loop()
            loop.call_soon(sys.exit, 1)
            loop.call_later(0.001, sys.exit, 2)
            loop.call_soon_threadsafe(sys.exit, 3)
            reading, writing = os.pipe()
            loop.add_reader(reading, sys.exit, 4)
            os.write(writing, b"x")
            future = loop.create_future()
            future.add_done_callback(lambda _: sys.exit(5))
            future.set_result(None)
            inner = asyncio.ensure_future(leave())
            await asyncio.wait([inner])
            await asyncio.sleep(0.05)
            loop.remove_reader(reading)
            os.close(reading)
            os.close(writing)
            return "finished", inner.exception()

        # Act
        with (
            caplog.at_level(logging.ERROR, logger="wool_idle.worker.containment"),
            asyncio.Runner(loop_factory=ContainingEventLoop) as runner,
        ):
            finished, inner_exit = runner.run(main())
        # Assert
        assert finished == "finished"
        assert isinstance(inner_exit, SystemExit) and inner_exit.code == 9
        for code in (1, 2, 3, 4, 5, 9):
            assert f"contained SystemExit({code})" in caplog.text

    def test_run_exit_in_exception_handler_ends_only_it(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given the worker's loop with an exception handler that calls sys.exit (one a
        task installed), when a callback fails, then the exit is logged and the loop
        runs on to the end of the main coroutine (the worker exited 70)."""

        async def main() -> str:
            loop = asyncio.get_running_loop()
            loop.set_exception_handler(lambda _loop, _context: sys.exit(6))
            loop.call_soon(lambda: 1 / 0)
            await asyncio.sleep(0.05)
            return "finished"

        # Act
        with (
            caplog.at_level(logging.ERROR, logger="wool_idle.worker.containment"),
            asyncio.Runner(loop_factory=ContainingEventLoop) as runner,
        ):
            finished = runner.run(main())
        # Assert
        assert finished == "finished"
        assert "contained SystemExit(6)" in caplog.text

    def test_run_until_complete_from_another_thread_is_refused(self) -> None:
        """Given the worker's loop running, when a thread a task started runs it too
        (which asyncio refuses), then the thread gets asyncio's RuntimeError at once,
        and the coroutine it passed never runs (it was retried until it had run on
        the loop, unsafely, one log line a try)."""
        started = []

        async def inner() -> None:
            started.append(True)

        def run_it_too(loop: asyncio.AbstractEventLoop) -> str:
            coroutine = inner()
            try:
                loop.run_until_complete(coroutine)
            except RuntimeError as error:
                coroutine.close()
                return str(error)
            return "ran"

        async def main() -> str:
            refusal = await asyncio.to_thread(run_it_too, asyncio.get_running_loop())
            await asyncio.sleep(0.01)
            return refusal

        # Act
        with asyncio.Runner(loop_factory=ContainingEventLoop) as runner:
            refusal = runner.run(main())
        # Assert
        assert (refusal, started) == ("This event loop is already running", [])

    def test_run_until_complete_refuses_a_nested_run(self) -> None:
        """Given the worker's loop, when a task runs it again from inside (which
        asyncio refuses), then the task gets asyncio's RuntimeError, and the
        coroutine it passed never runs (it is not run again and again, nor started)."""
        started = []

        async def inner() -> None:
            started.append(True)

        async def main() -> str:
            coroutine = inner()
            try:
                asyncio.get_running_loop().run_until_complete(coroutine)
            except RuntimeError as error:
                coroutine.close()
                await asyncio.sleep(0.01)
                return str(error)
            return "ran"

        # Act
        with asyncio.Runner(loop_factory=ContainingEventLoop) as runner:
            refusal = runner.run(main())
        # Assert
        assert (refusal, started) == ("This event loop is already running", [])
