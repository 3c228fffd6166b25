"""The bound on a stopped worker's clean-up (the process ending past it is tested
through the CLI, in test_cli)."""

from __future__ import annotations

import threading
import time

from wool_idle.worker.leaving import ExitDeadline


def deadline_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "exit deadline"]


class TestExitDeadline:
    def test_block_left_in_time_disarms_it(self) -> None:
        """Given a started deadline, when its block is left before it, then its timer
        thread ends (armed, it would end this very process)."""
        # Arrange
        with ExitDeadline(30.0) as deadline:
            # Act
            deadline.start(3)
            armed = [t.is_alive() for t in deadline_threads()]
        ended = time.monotonic() + 5
        while deadline_threads() and time.monotonic() < ended:
            time.sleep(0.01)
        # Assert
        assert armed == [True]
        assert deadline_threads() == []
