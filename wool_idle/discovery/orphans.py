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

A replacement while the last one's count is above 0 keeps those workers: they are on
an older namespace still, unlisted. Its baseline is then that count plus the workers
of the last list that were seen since the last replacement (the others, not dropped
yet because no subscription of the new namespace settled, are among that count);
the hour begins again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
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

    def missing(self, listed: Collection[str]) -> None:
        """The namespace is gone, with the workers ``listed`` (uids) last known (before
        the follower forgets them): the baseline of a replacement before the next attach."""
        if self._kept is None:
            self._kept = self._at_risk(listed)

    def attached(self, replaced: bool, listed: Collection[str]) -> None:
        """A subscription starts, with the workers ``listed`` (uids) last known;
        ``replaced`` when its namespace is another one than the last attached: count
        afresh from now on (see the module)."""
        if replaced:
            self._baseline = self._at_risk(listed) if self._kept is None else self._kept
            self._since = self._clock()
            self._seen = set()
        self._kept = None

    def _at_risk(self, listed: Collection[str]) -> int:
        """The workers a replacement now would orphan: those ``listed``, or while the
        last replacement's count is above 0, that count and those ``listed`` seen since."""
        if not (outstanding := self.count()):
            return len(listed)
        return outstanding + sum(1 for uid in listed if uid in self._seen)

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
