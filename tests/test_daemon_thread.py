"""A blocking call awaited on a daemon thread of its own."""

from __future__ import annotations

import asyncio
import threading

import pytest

from wool_idle.daemon_thread import on_daemon_thread


class TestOnDaemonThread:
    async def test_result_from_a_daemon_thread_of_the_name(self) -> None:
        """Given a call, then its result comes back, made on a daemon thread named as
        asked (not the loop's thread)."""
        # Arrange
        caller = threading.current_thread()

        def where() -> tuple[str, bool, bool]:
            thread = threading.current_thread()
            return thread.name, thread.daemon, thread is caller

        # Act
        found = await on_daemon_thread("looking", where)
        # Assert
        assert found == ("looking", True, False)

    async def test_exception_reaches_the_awaiting_task(self) -> None:
        def fail() -> None:
            raise OSError("no such file")

        with pytest.raises(OSError, match="no such file"):
            await on_daemon_thread("failing", fail)

    async def test_stop_iteration_still_settles(self) -> None:
        """Given a call raising StopIteration (which a future refuses), then the
        awaiting task gets a RuntimeError instead of waiting forever."""

        def exhausted() -> None:
            next(iter(()))

        with pytest.raises(RuntimeError, match="raised StopIteration"):
            await asyncio.wait_for(on_daemon_thread("exhausted", exhausted), 10)
