"""Attaching to a wool ``LocalDiscovery`` namespace as an observer.

Facts of wool 0.15 this relies on:

- Entering ``LocalDiscovery(ns)`` creates the namespace's shared-memory
  segment if it is missing and owns it: the owner's exit unlinks it for
  everyone. An observer never enters it; ``subscribe`` only maps an existing
  segment (and raises ``FileNotFoundError`` naming it when there is none).
- A subscriber must poll (``poll_interval``): wool's change notifications are
  missed with watchdog 7.1. Every poll re-announces every worker. wool's subscriber
  reads the namespace on the event loop that iterates it, so the namespace is read as
  it does, but on a daemon thread (``scan``): the loop that serves the scrapes only
  awaits each read, and a read that stalls is a failure of the subscription.
- A segment unlinked by its owner stays mapped, frozen, in the processes that
  attached to it, while a newcomer creates a new one under the same name. So
  the segment's inode (``/dev/shm/<name>`` on Linux) is watched, and the
  subscription made again when it changes; attaching to another segment than
  the last one is a replacement (the pools still on the old one are unlisted).
- The owner stamps the segment's capacity (``WLD1`` and a little-endian u32) in its
  first 8 bytes; wool's every read goes through that many slots and opens the block
  of each worker listed, so a capacity over ``MAX_WORKERS_FOLLOWED`` is refused
  before wool reads anything (``capacity``), and while a subscription runs.
- A worker whose publisher was killed leaves its slot behind and its record
  block unlinked: every read of the namespace then fails with
  ``FileNotFoundError`` naming that block, until someone drops the worker.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from collections.abc import AsyncIterator
from typing import Any, Final

from wool_idle.daemon_thread import DaemonThreads
from wool_idle.discovery.attachment import (
    MAX_WORKERS_FOLLOWED,
    FollowProblem,
    NamespaceMissing,
    TooManyWorkers,
)
from wool_idle.discovery.scan import SCAN_DEADLINE, scans

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


def capacity(namespace: str) -> int | None:
    """The capacity stamped in the namespace's segment (0 if not stamped yet), or None
    when the namespace does not exist. Read without mapping it, never blocking."""
    path = os.path.join(SHARED_MEMORY, segment_name(namespace))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        header = os.pread(fd, 8, 0)
    finally:
        os.close(fd)
    if len(header) < 8 or header[:4] != b"WLD1":
        return 0
    stamped: int = struct.unpack_from("<I", header, 4)[0]
    return stamped


def check_capacity(namespace: str, limit: int) -> None:
    """``TooManyWorkers`` if the namespace has room for more than ``limit`` workers."""
    if (room := capacity(namespace) or 0) > limit:
        raise TooManyWorkers(room, limit)


class LocalAttachment:
    """Subscriptions to one ``LocalDiscovery`` namespace, polling every ``poll_interval``,
    each read of it on a daemon thread of the attachment's own, stalled after
    ``scan_deadline`` seconds."""

    def __init__(
        self,
        namespace: str,
        *,
        poll_interval: float,
        max_workers: int = MAX_WORKERS_FOLLOWED,
        scan_deadline: float = SCAN_DEADLINE,
    ) -> None:
        self.namespace = namespace
        self.poll_interval = poll_interval
        self.max_workers = max_workers
        self.scan_deadline = scan_deadline
        self._inode: int | None = None
        self._attached: int | None = None  # the inode of the segment last attached
        self._announced = False
        self._threads = DaemonThreads(1, "wool-idle-scan")  # one read at a time

    @property
    def settle(self) -> float:
        """Two polls: every live worker has been announced by then."""
        return 2 * self.poll_interval

    def attach(self) -> bool:
        """Remember the segment's inode; ``NamespaceMissing`` when there is no segment,
        ``TooManyWorkers`` when its capacity is over ``max_workers``. True when it is
        another segment than the one last attached: the namespace was created again
        since (its owner exited, and a process entered it anew)."""
        self._inode = segment_inode(self.namespace)
        if self._inode is None:
            raise NamespaceMissing(self.namespace)
        check_capacity(self.namespace, self.max_workers)
        self._announced = False
        replaced = self._attached not in (None, self._inode)
        self._attached = self._inode
        return replaced

    def subscribe(self) -> AsyncIterator[Any]:
        """wool's events of the namespace, read as its polling subscriber reads it (never
        entering ``LocalDiscovery``), off the event loop (``scan.scans``)."""
        return scans(
            self.namespace,
            poll_interval=self.poll_interval,
            threads=self._threads,
            on_scanned=self._scanned,
            deadline=self.scan_deadline,
        )

    def announced(self) -> bool:
        """Whether the subscription made since ``attach`` has read the namespace once and
        every worker it lists was taken in."""
        return self._announced

    def _scanned(self) -> None:
        self._announced = True

    def detached(self) -> bool:
        """Whether the segment was unlinked or replaced since ``attach``;
        ``TooManyWorkers`` when its capacity was raised over ``max_workers``."""
        if segment_inode(self.namespace) != self._inode:
            return True
        check_capacity(self.namespace, self.max_workers)
        return False

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
