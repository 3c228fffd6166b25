"""A value followed from files, loaded again on a thread of its own."""

from __future__ import annotations

import logging
import threading

import pytest
from support.clock import Clock
from support.waiting import eventually

from wool_idle.followed import STALLED_AFTER, Followed


class Files:
    """What a load reads: ``content``, or ``OSError(failure)``; ``gate`` (when set)
    holds every load after the first, as a stalled network file system would."""

    def __init__(self) -> None:
        self.content = "v1"
        self.failure = ""
        self.fault: Exception | None = None
        self.gate: threading.Event | None = None
        self.loads = 0

    def load(self, previous: str | None) -> str:
        self.loads += 1
        if previous is not None and self.gate is not None:
            self.gate.wait(30)
        if self.fault is not None:
            raise self.fault
        if self.failure:
            raise OSError(self.failure)
        return previous if previous == self.content else self.content


def followed(files: Files, clock: Clock) -> Followed[str]:
    return Followed(files.load, what="TLS files", names="'a'", interval=1.0, clock=clock)


class TestFollowed:
    def test_init_load_fails_raises(self) -> None:
        """Given files that do not load at start, then construction raises their error."""
        files = Files()
        files.failure = "cannot read 'a': No such file or directory"
        with pytest.raises(OSError, match="No such file"):
            followed(files, Clock())

    def test_current_within_interval_reads_nothing(self) -> None:
        """Given a value just loaded, when asked for before the interval passed, then
        the files are not read again."""
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.content = "v2"
        clock.now = 0.9
        assert value.current() == "v1"
        assert files.loads == 1

    def test_current_never_waits_for_a_stalled_read(self) -> None:
        """Given a read of the files that hangs (a stalled file system), when asked
        for again and again past the interval, then each answer is the last good value
        at once, one read only runs, and its value is used once it ends."""
        # Arrange
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.content, files.gate = "v2", threading.Event()
        # Act
        answers = []
        for step in range(1, 6):
            clock.now = 2.0 * step
            answers.append(value.current())
        reads_while_stalled = files.loads
        files.gate.set()
        updated = eventually(lambda: value.current() == "v2")
        # Assert
        assert answers == ["v1"] * 5
        assert reads_while_stalled == 2
        assert updated

    def test_reload_bad_files_keep_the_last_good_and_log_each_failure_once(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given files that stop loading, when read again three times with the same
        failure and once with another, then the last good value is kept, each failure
        is logged once, and good files are taken again (logged as reloaded)."""
        # Arrange
        files, clock = Files(), Clock()
        value = followed(files, clock)
        caplog.set_level(logging.INFO, "wool_idle.followed")
        # Act
        files.failure = "cannot read 'a': Permission denied"
        kept = [value.reload() for _ in range(3)]
        files.failure = "cannot read 'a': No such file or directory"
        kept.append(value.reload())
        files.failure, files.content = "", "v2"
        fresh = value.reload()
        # Assert
        assert kept == ["v1"] * 4
        assert fresh == value.value == "v2"
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [
            "keeping the TLS files loaded before: cannot read 'a': Permission denied",
            "keeping the TLS files loaded before: cannot read 'a': No such file or directory",
        ]
        assert "TLS files reloaded: 'a'" in caplog.text

    def test_reload_logs_new_files_before_anyone_uses_them(self) -> None:
        """Given files that changed, when read again, then the reload is logged while
        the value is still the one before (a caller that saw the new value before the
        log line was written could act on files the log has not named yet)."""
        # Arrange
        files, clock = Files(), Clock()
        value = followed(files, clock)
        seen_when_logged: list[str] = []

        class Seen(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                seen_when_logged.append(value.value)

        handler = Seen(logging.INFO)
        logger = logging.getLogger("wool_idle.followed")
        logger.addHandler(handler)
        previous_level, logger.level = logger.level, logging.INFO
        files.content = "v2"
        # Act
        try:
            fresh = value.reload()
        finally:
            logger.removeHandler(handler)
            logger.setLevel(previous_level)
        # Assert
        assert (fresh, seen_when_logged) == ("v2", ["v1"])

    def test_reload_unchanged_files_keep_the_value_itself(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given files that did not change, when read again, then the value is the
        same object and nothing is logged."""
        files, clock = Files(), Clock()
        value = followed(files, clock)
        first = value.value
        caplog.set_level(logging.INFO, "wool_idle.followed")
        assert value.reload() is first
        assert caplog.records == []

    def test_current_stalled_read_is_logged_once(self, caplog: pytest.LogCaptureFixture) -> None:
        """Given a read that hangs, when asked for past ``STALLED_AFTER`` seconds
        after it began, then the stall is logged once, naming the files, and the last
        good value is kept."""
        # Arrange
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.gate = threading.Event()
        caplog.set_level(logging.WARNING, "wool_idle.followed")
        clock.now = 1.0
        value.current()  # starts the read that hangs
        assert eventually(lambda: files.loads == 2)  # the read began (at 1.0)
        # Act
        answers = []
        for seconds in (5.0, 1.0 + STALLED_AFTER, 5.0 + STALLED_AFTER, 60.0):
            clock.now = seconds
            answers.append(value.current())
        files.gate.set()
        # Assert
        stalls = [r.getMessage() for r in caplog.records if "has taken" in r.getMessage()]
        assert answers == ["v1"] * 4
        assert stalls == [
            "reading the TLS files has taken 10 s so far (a stalled file system?); "
            "the ones loaded before stay in use: 'a'"
        ]

    def test_current_thread_not_started_keeps_the_value_and_tries_again(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given no thread can be started (a pids limit), when the interval passed,
        then the last good value is answered, the failure is logged, and the files are
        read once a thread can be started again."""
        # Arrange
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.content = "v2"
        start = threading.Thread.start

        def refuse(thread: threading.Thread) -> None:
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(threading.Thread, "start", refuse)
        # Act
        clock.now = 1.0
        refused = value.current()
        monkeypatch.setattr(threading.Thread, "start", start)
        clock.now = 2.0
        value.current()
        updated = eventually(lambda: value.current() == "v2")
        # Assert
        assert refused == "v1"
        assert "cannot start a thread to read them: can't start new thread" in caplog.text
        assert updated

    def test_reload_unexpected_fault_keeps_the_value_and_logs_its_traceback(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a load that fails in a way no file explains (a fault of ours), when
        read again twice, then the last good value is kept and the fault is logged
        once, with its traceback."""
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.fault = KeyError("boom")
        kept = [value.reload(), value.reload()]
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert kept == ["v1", "v1"]
        assert len(warnings) == 1
        assert "KeyError: 'boom'" in warnings[0].getMessage()
        assert warnings[0].exc_info is not None

    def test_reload_while_another_runs_answers_at_once(self) -> None:
        """Given a reload stalled on its files (gRPC's handshake threads ask for the
        worker's certificate this way), when another thread reloads, then it gets the
        last good value at once rather than wait; once the first ends, its value is
        taken."""
        # Arrange
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.content, files.gate = "v2", threading.Event()
        first = threading.Thread(target=value.reload)
        first.start()
        assert eventually(lambda: files.loads == 2)
        # Act
        second = value.reload()
        files.gate.set()
        first.join(10)
        # Assert
        assert second == "v1"
        assert value.value == "v2"

    async def test_fresh_waits_for_the_read_it_starts(self) -> None:
        """Given files changed since the last look, an interval ago, when asked for
        fresh, then the answer is the new value (the read ran on a thread, and the
        caller waited for it)."""
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.content = "v2"
        clock.now = 1.0
        assert await value.fresh(10.0) == "v2"

    async def test_fresh_waits_a_bounded_time_for_a_stalled_read(self) -> None:
        """Given a read that hangs, when asked for fresh with a short wait, then the
        last good value comes back once the wait is over."""
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.content, files.gate = "v2", threading.Event()
        clock.now = 1.0
        answer = await value.fresh(0.2)
        files.gate.set()
        assert answer == "v1"

    def test_force_waits_for_a_running_read_then_reads(self) -> None:
        """Given a read of the files under way on another thread (stalled), when a
        forced read is asked for, then it waits for that one to end and reads again:
        what it answers is of the files as they were when it was asked."""
        # Arrange
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.content, files.gate = "v2", threading.Event()
        clock.now = 2.0
        value.current()  # starts a read, held at the gate
        assert eventually(lambda: files.loads == 2)
        files.content = "v3"
        answers: list[str] = []
        forced = threading.Thread(target=lambda: answers.append(value.force()))
        forced.start()
        # Act
        files.gate.set()
        forced.join(30)
        # Assert
        assert (answers, value.value, files.loads) == ([""], "v3", 3)

    def test_force_bad_files_say_why_and_keep_the_last_good(self) -> None:
        """Given files that no longer load, when a forced read runs, then it answers
        their error and the last good value stays; mended, it answers ``""``."""
        # Arrange
        files, clock = Files(), Clock()
        value = followed(files, clock)
        files.failure = "cannot read 'a': No such file or directory"
        # Act
        failed = value.force()
        kept = value.value
        files.failure, files.content = "", "v2"
        mended = value.force()
        # Assert
        assert (failed, kept) == ("cannot read 'a': No such file or directory", "v1")
        assert (mended, value.value) == ("", "v2")
