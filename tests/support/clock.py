"""A clock a test sets by hand."""

from __future__ import annotations


class Clock:
    """Callable like ``time.monotonic``; returns ``now``, which the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now
