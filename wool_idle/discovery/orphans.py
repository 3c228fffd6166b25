"""Workers a replaced ``local`` namespace may have orphaned: not seen again since.

When a namespace's holder restarts, the namespace is created again by a new owner (a
replacement: ``Attachment.attach``); pools still attached to the old one serve on,
unlisted. A planned restart of the holder with every pool publishes every worker on
the new namespace within seconds. So at each replacement the ``Orphans`` of a
``Follower`` take as ``baseline`` the workers it listed right before it (its last known
list: the one before the namespace went missing, when it did), by pool (their tags),
and count the distinct workers (by uid) of each pool listed on the new namespace since;
a worker that was listed and then left (retired) counts as having come back. A pool's
orphans are its baseline less those, at least 0: workers of another pool (one started
since, or one that came back with more workers) never make up for them. ``count`` is
their sum, and 0 for good (until the next replacement) once it is 0, or once
``ORPHANS_EXPIRY`` has passed since the replacement; 0 with no replacement (an exporter
restarted knows of none), for a namespace that was empty, and for ``lan``.

A replacement while the last one's count is above 0 keeps those workers: they are on
an older namespace still, unlisted. Its baseline is then those plus the workers of the
last list listed on the newer namespace (not those listed right before the last
replacement and not seen since, which no subscription of the newer one dropped yet:
they are among those kept); the hour begins again.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Final

from wool_idle.discovery.records import WorkerRecord

ORPHANS_EXPIRY: Final = 3600.0
"""Seconds after a replacement past which its workers not seen again count no more
(parity with the alert rule it replaces, which resolved an hour after it)."""

Tags = tuple[str, ...]
"""A pool: the tags of its workers (``WorkerRecord.tags``)."""


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
        self._kept: tuple[Counter[Tags], frozenset[str]] | None = None  # when it went missing
        self._baseline: Counter[Tags] = Counter()
        self._before: frozenset[str] = frozenset()  # the uids listed right before
        self._since = 0.0
        self._seen: dict[Tags, set[str]] = {}
        self._resolved = True

    def missing(self, listed: Mapping[str, WorkerRecord]) -> None:
        """The namespace is gone, with the workers ``listed`` (by uid) last known (before
        the follower forgets them): the baseline of a replacement before the next attach."""
        if self._kept is None:
            self._kept = (self._at_risk(listed), frozenset(listed))

    def attached(self, replaced: bool, listed: Mapping[str, WorkerRecord]) -> None:
        """A subscription starts, with the workers ``listed`` (by uid) last known;
        ``replaced`` when its namespace is another one than the last attached: count
        afresh from now on (see the module)."""
        if replaced:
            kept = self._kept or (self._at_risk(listed), frozenset(listed))
            self._baseline, self._before = kept
            self._since = self._clock()
            self._seen = {}
            self._resolved = not self._baseline
        self._kept = None

    def saw(self, uid: str, tags: Tags) -> None:
        """The namespace attached lists worker ``uid`` (valid), of the pool ``tags``, now."""
        if uid in self._before or len(self._seen.get(tags, ())) < self._baseline[tags]:
            self._seen.setdefault(tags, set()).add(uid)

    def count(self) -> int:
        """Workers listed before the last replacement, less those of their pool seen
        since (see the module); 0 for good once it is 0 or ``expiry`` has passed."""
        if self._resolved:
            return 0
        left = sum(self._left().values())
        if not left or self._clock() - self._since >= self._expiry:
            self._resolved = True
            return 0
        return left

    def _left(self) -> Counter[Tags]:
        """Each pool's workers not seen again (none when resolved)."""
        if self._resolved:
            return Counter()
        seen = self._seen
        return +Counter({tags: n - len(seen.get(tags, ())) for tags, n in self._baseline.items()})

    def _at_risk(self, listed: Mapping[str, WorkerRecord]) -> Counter[Tags]:
        """The workers a replacement now would orphan, by pool: those still left from
        the last one (``count`` above 0), and those ``listed`` but for the ones listed
        before the last replacement and not seen since."""
        at_risk = self._left() if self.count() else Counter()
        for uid, record in listed.items():
            if uid not in self._before or uid in self._seen.get(record.tags, ()):
                at_risk[record.tags] += 1
        return at_risk
