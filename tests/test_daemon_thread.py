"""A blocking call awaited on a daemon thread of its own."""

from __future__ import annotations

import asyncio
import threading

import pytest

from wool_idle.daemon_thread import DaemonThreads, on_daemon_thread


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


class TestDaemonThreads:
    def test_submit_runs_in_order_on_daemon_threads_of_the_name(self) -> None:
        """Given an executor of one thread, when jobs are submitted, then they run in
        the order submitted, on a daemon thread named after the executor."""
        # Arrange
        threads = DaemonThreads(1, "ordered")
        ran: list[int] = []

        def job(n: int) -> tuple[str, bool]:
            ran.append(n)
            return threading.current_thread().name, threading.current_thread().daemon

        # Act
        futures = [threads.submit(job, n) for n in range(5)]
        results = {future.result(timeout=10) for future in futures}
        # Assert
        assert ran == [0, 1, 2, 3, 4]
        assert results == {("ordered-1", True)}

    def test_submit_thread_not_started_lets_the_job_go_and_tries_again(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given no thread can be started (a pids limit) at the first submit, when a
        job is submitted once threads can be started again, then it runs: the failed
        start neither counts as a thread nor leaves its job queued."""
        # Arrange
        threads = DaemonThreads(1, "retried")
        start = threading.Thread.start

        def refuse(thread: threading.Thread) -> None:
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(threading.Thread, "start", refuse)
        with pytest.raises(RuntimeError, match="can't start new thread"):
            threads.submit(lambda: "refused")
        monkeypatch.setattr(threading.Thread, "start", start)
        # Act
        result = threads.submit(lambda: "ran").result(timeout=10)
        # Assert
        assert result == "ran"
