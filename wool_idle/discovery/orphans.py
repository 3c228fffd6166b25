"""Workers a replaced ``local`` namespace may have orphaned: not seen again since.

When a namespace's holder restarts, the namespace is created again by a new owner (a
replacement: ``Attachment.attach``); pools still attached to the old one serve on,
unlisted. A planned restart of the holder with every pool publishes every worker on
the new namespace within seconds. So at each replacement the ``Orphans`` of a
``Follower`` take as ``baseline`` the workers it listed right before it (its last known
list: the one before the namespace went missing, when it did), and count the distinct
workers (by uid) listed on the new namespace since; a worker that was listed and then
left (retired) counts as having come back. ``count`` is ``baseline`` less those, at
least 0, and 0 for good (until the next replacement) once they reach ``baseline``, or
once ``ORPHANS_EXPIRY`` has passed since the replacement; 0 with no replacement (an
exporter restarted knows of none), for a namespace that was empty, and for ``lan``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

ORPHANS_EXPIRY: Final = 3600.0
"""Seconds after a replacement past which its workers not seen again count no more
(parity with the alert rule it replaces, which resolved an hour after it)."""


class Orphans:
    """The workers not seen again since the last replacement of one followed namespace
    (see the module); ``clock`` is monotonic seconds."""

    def __init__(
        self,
        *,
        expiry: float = ORPHANS_EXPIRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._expiry = expiry
        self._clock = clock
        self._kept: int | None = None  # listed when the namespace went missing
        self._baseline = 0
        self._since = 0.0
        self._seen: set[str] = set()

    def missing(self, listed: int) -> None:
        """The namespace is gone, with ``listed`` workers last known (before the
        follower forgets them): the baseline of a replacement before the next attach."""
        if self._kept is None:
            self._kept = listed

    def attached(self, replaced: bool, listed: int) -> None:
        """A subscription starts, with ``listed`` workers last known; ``replaced`` when its
        namespace is another one than the last attached: count afresh from now on."""
        if replaced:
            self._baseline = listed if self._kept is None else self._kept
            self._since = self._clock()
            self._seen = set()
        self._kept = None

    def saw(self, uid: str) -> None:
        """The namespace attached lists worker ``uid`` (valid) now."""
        if len(self._seen) < self._baseline:
            self._seen.add(uid)

    def count(self) -> int:
        """Workers listed before the last replacement, less those seen since (see the
        module); 0 for good once they are all seen or ``expiry`` has passed."""
        if self._baseline and self._clock() - self._since >= self._expiry:
            self._baseline = 0
        if len(self._seen) >= self._baseline:
            self._baseline, self._seen = 0, set()
        return self._baseline - len(self._seen)
