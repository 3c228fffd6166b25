"""The in-flight task set and the idle clock stamped on its empty edges."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any


class InFlightTasks:
    """The set of tasks a worker is running.

    It records the monotonic time at which it last became empty (construction
    counts as empty) and changes that stamp only on the empty/non-empty edges.
    ``idle_seconds`` reads the stamp and never touches the set.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()
        self._empty_since: float | None = time.monotonic()

    def track(self, task: asyncio.Future[Any]) -> None:
        """Add ``task``; it leaves the set by itself when it finishes."""
        self._tasks.add(task)
        self._empty_since = None
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not self._tasks and self._empty_since is None:
            self._empty_since = time.monotonic()

    def idle_seconds(self) -> float:
        """Seconds since the set last emptied, or 0.0 while any task runs."""
        if self._empty_since is None:
            return 0.0
        return max(0.0, time.monotonic() - self._empty_since)

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Future[Any]]:
        return iter(list(self._tasks))
