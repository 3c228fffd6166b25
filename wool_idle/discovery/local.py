"""Attaching to a wool ``LocalDiscovery`` namespace as an observer.

Facts of wool 0.15 this relies on:

- Entering ``LocalDiscovery(ns)`` creates the namespace's shared-memory
  segment if it is missing and owns it: the owner's exit unlinks it for
  everyone. An observer never enters it; ``subscribe`` only maps an existing
  segment (and raises ``FileNotFoundError`` naming it when there is none).
- A subscriber must poll (``poll_interval``): wool's change notifications are
  missed with watchdog 7.1. Every poll re-announces every worker.
- A segment unlinked by its owner stays mapped, frozen, in the processes that
  attached to it, while a newcomer creates a new one under the same name. So
  the segment's inode (``/dev/shm/<name>`` on Linux) is watched, and the
  subscription made again when it changes.
- A worker whose publisher was killed leaves its slot behind and its record
  block unlinked: every read of the namespace then fails with
  ``FileNotFoundError`` naming that block, until someone drops the worker.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import AsyncIterator
from typing import Any, Final

from wool_idle.discovery.attachment import FollowProblem, NamespaceMissing

SHARED_MEMORY: Final = "/dev/shm"
"""Where POSIX shared memory segments show as files (Linux)."""


def segment_name(namespace: str) -> str:
    """wool's name for the namespace's shared-memory segment: the URL-safe base64 of
    its SHA-256, unpadded, first 30 characters."""
    digest = hashlib.sha256(namespace.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")[:30]


def segment_inode(namespace: str) -> int | None:
    """The inode of the namespace's segment, or None when the namespace does not exist."""
    try:
        return os.stat(os.path.join(SHARED_MEMORY, segment_name(namespace))).st_ino
    except FileNotFoundError:
        return None


class LocalAttachment:
    """Subscriptions to one ``LocalDiscovery`` namespace, polling every ``poll_interval``."""

    def __init__(self, namespace: str, *, poll_interval: float) -> None:
        self.namespace = namespace
        self.poll_interval = poll_interval
        self._inode: int | None = None

    @property
    def settle(self) -> float:
        """Two polls: every live worker has been announced by then."""
        return 2 * self.poll_interval

    def attach(self) -> None:
        """Remember the segment's inode; ``NamespaceMissing`` when there is no segment."""
        self._inode = segment_inode(self.namespace)
        if self._inode is None:
            raise NamespaceMissing(self.namespace)

    def subscribe(self) -> AsyncIterator[Any]:
        """wool's polling subscriber of the namespace (never entering ``LocalDiscovery``)."""
        from wool import LocalDiscovery

        subscriber: AsyncIterator[Any] = aiter(
            LocalDiscovery(self.namespace).subscribe(poll_interval=self.poll_interval)
        )
        return subscriber

    def detached(self) -> bool:
        """Whether the segment was unlinked or replaced since ``attach``."""
        return segment_inode(self.namespace) != self._inode

    def problem(self, error: BaseException) -> FollowProblem:
        """A missing segment is ``namespace_missing``; a missing record block ``stale_record``."""
        if isinstance(error, NamespaceMissing):
            return FollowProblem.NAMESPACE_MISSING
        if isinstance(error, FileNotFoundError):
            missing = str(error.filename or "").lstrip("/")
            if missing == segment_name(self.namespace):
                return FollowProblem.NAMESPACE_MISSING
            return FollowProblem.STALE_RECORD
        return FollowProblem.FAILED
