"""Following one wool discovery: its current workers, kept up to date, and its health.

A ``Follower`` subscribes through wool's own classes (see ``local`` and ``lan``), keeps a
``WorkerRecord`` per worker uid, and diffs what wool announces itself (wool re-announces
every worker on every poll), so a change is a change. It never stops for its input:

- a namespace that does not exist (yet) is retried every ``retry_interval``,
  and has no workers;
- a subscription that fails or ends, or whose source cannot be checked for a
  replacement, is retried; the workers last known stay (the discovery is
  unreadable, not empty), and ``down_since`` says since when (the exporter
  withholds their idle values once that lasts: see ``exporter.discovered``);
- a new subscription replays every live worker; a worker kept from before that it
  has not announced within its settle time (and once it announced all: ``announced``)
  has gone, and is dropped;
- a discovery listing over ``max_workers`` is not read (``too_many_workers``): the
  follower is down, whatever it announces, until a subscription settles under it;
- a record whose address is not a worker address, or whose tags or version are
  not valid UTF-8, is skipped, logged once and counted once per record (not per
  poll).

``up`` is True from the moment a subscription announces a worker or has run
its settle time without failing, until it fails; ``down_since`` is None while
up, else the monotonic time it last stopped being up (its creation, at first);
``read_once`` once a subscription ran its settle time or the namespace was
found missing. ``errors`` counts ``FollowProblem``s; ``replacements`` the sources
attached that were another one than the last (a ``local`` namespace created again by a
new owner: its holder restarted), each logged as a warning (``REPLACED``): the pools
still attached to the old one serve on, unlisted; ``orphans`` counts the workers listed
before the last one that were not seen again since (see ``orphans``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

from wool_idle.discovery.attachment import (
    MAX_WORKERS_FOLLOWED,
    REPLACED,
    Attachment,
    FollowProblem,
    TooManyWorkers,
    explain,
)
from wool_idle.discovery.lan import LanAttachment
from wool_idle.discovery.local import LocalAttachment
from wool_idle.discovery.orphans import Orphans
from wool_idle.discovery.records import InvalidRecord, WorkerRecord
from wool_idle.discovery.spec import DiscoveryKind, DiscoverySpec
from wool_idle.logs import field_value

log = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL: Final = 0.5
"""Seconds between two reads of a ``local`` namespace (and between retries)."""
WOOL_EXTRA: Final = "pip install 'wool-idle[wool]'"


class WoolMissing(RuntimeError):
    """The ``wool`` package, needed to follow its discovery, cannot be imported."""


def require_wool() -> None:
    """Import ``wool`` now, or raise ``WoolMissing`` saying how to install it."""
    try:
        import wool  # noqa: F401
    except ImportError as error:
        raise WoolMissing(
            f"following a wool discovery needs the wool package ({WOOL_EXTRA}): {error}"
        ) from None


def follower(
    spec: DiscoverySpec,
    *,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    on_change: Callable[[], None] | None = None,
) -> Follower:
    """A ``Follower`` of ``spec`` through the wool class of its kind."""
    kind = LocalAttachment if spec.kind is DiscoveryKind.LOCAL else LanAttachment
    attachment: Attachment = kind(spec.namespace, poll_interval=poll_interval)
    return Follower(spec, attachment, retry_interval=poll_interval, on_change=on_change)


class Follower:
    """The workers of one discovery; ``run`` keeps them current (see the module)."""

    def __init__(
        self,
        spec: DiscoverySpec,
        attachment: Attachment,
        *,
        retry_interval: float,
        on_change: Callable[[], None] | None = None,
        max_workers: int = MAX_WORKERS_FOLLOWED,
        orphans: Orphans | None = None,
    ) -> None:
        self.spec = spec
        self.max_workers = max_workers
        self._over_limit = self.up = self.read_once = False
        self.down_since: float | None = time.monotonic()
        self.errors: Counter[FollowProblem] = Counter({problem: 0 for problem in FollowProblem})
        self.replacements = 0
        self.orphans = orphans or Orphans()
        self._attachment = attachment
        self._retry_interval = retry_interval
        self._on_change = on_change or (lambda: None)
        self._records: dict[str, WorkerRecord] = {}
        self._rejected: dict[str, str] = {}
        self._logged: tuple[FollowProblem, str] | None = None

    @property
    def records(self) -> Mapping[str, WorkerRecord]:
        """The current workers by uid (a live view: do not modify)."""
        return self._records

    async def run(self) -> None:
        """Follow the discovery until cancelled."""
        while True:
            await self._attempt()
            await asyncio.sleep(self._retry_interval)

    async def _attempt(self) -> None:
        """One subscription, from attaching until it fails or its source is replaced."""
        try:
            replaced = self._attachment.attach()
        except Exception as error:
            self._failed(error)
            return
        self.orphans.attached(replaced, self._records)
        if replaced:
            self.replacements += 1
            log.warning("wool discovery %s: %s", self, REPLACED)
        loop = asyncio.get_running_loop()
        settle_at: float | None = loop.time() + self._attachment.settle
        seen: set[str] = set()
        consumer = asyncio.ensure_future(self._consume(seen))
        try:
            while not consumer.done():
                await asyncio.wait((consumer,), timeout=self._retry_interval)
                if consumer.done():
                    break
                due = settle_at is not None and loop.time() >= settle_at
                if due and self._attachment.announced():
                    settle_at = None
                    self._settled(seen)
                try:
                    changed = self._attachment.detached()
                except Exception as error:  # its source cannot even be looked at now
                    self._failed(error)
                    return
                if changed:  # unlinked, or created again (counted when attached)
                    log.debug("wool discovery %s: its namespace changed; re-attaching", self)
                    return
        finally:
            consumer.cancel()
            await asyncio.gather(consumer, return_exceptions=True)
        if not consumer.cancelled():
            self._failed(consumer.exception() or EOFError("the subscription ended"))

    async def _consume(self, seen: set[str]) -> None:
        async for event in self._attachment.subscribe():
            self._apply(event.type, event.metadata, seen)

    def _apply(self, kind: str, metadata: Any, seen: set[str]) -> None:
        """Take in one of wool's events; ``TooManyWorkers`` past ``max_workers``."""
        if not self._over_limit:
            self._working()
        uid = str(metadata.uid)
        if kind == "worker-dropped":
            seen.discard(uid)
            self._rejected.pop(uid, None)
            self._forget(uid)
            return
        if uid not in seen and len(seen) >= self.max_workers:
            raise TooManyWorkers(len(seen) + 1, self.max_workers)
        seen.add(uid)
        try:
            record = WorkerRecord.from_metadata(metadata)
        except InvalidRecord as error:
            self._reject(error)
            self._forget(uid)
            return
        self._rejected.pop(uid, None)
        self.orphans.saw(uid, record.tags)
        if self._records.get(uid) != record:
            log.debug("wool discovery %s: worker %s at %s", self, uid, field_value(record.address))
            self._records[uid] = record
            self._on_change()

    def _forget(self, uid: str) -> None:
        if self._records.pop(uid, None) is not None:
            log.debug("wool discovery %s: worker %s gone", self, uid)
            self._on_change()

    def _reject(self, error: InvalidRecord) -> None:
        """Count and log a bad record once (until what is wrong with it changes)."""
        if self._rejected.get(error.uid) == str(error):
            return
        self._rejected[error.uid] = str(error)
        self.errors[error.problem] += 1
        log.warning("wool discovery %s: skipping %s", self, error)

    def _settled(self, seen: set[str]) -> None:
        """The subscription has announced every live worker: drop the others, and the
        skipped records it did not announce (gone while detached: no drop of them comes)."""
        for uid in [uid for uid in self._records if uid not in seen]:
            self._forget(uid)
        for uid in [uid for uid in self._rejected if uid not in seen]:
            del self._rejected[uid]
        self._over_limit, self.read_once = False, True
        self._working()

    def _working(self) -> None:
        """The subscription works (it announced a worker, or ran its settle time): up."""
        if not self.up:
            log.info("wool discovery %s: following", self)
        self.up = True
        self.down_since = None
        self._logged = None

    def _failed(self, error: BaseException) -> None:
        over = isinstance(error, TooManyWorkers)
        problem = FollowProblem.TOO_MANY_WORKERS if over else self._attachment.problem(error)
        if over and self._over_limit:
            return  # counted and logged once each time it goes over
        self._over_limit = over
        if self.down_since is None:
            self.down_since = time.monotonic()
        self.up = False
        self.errors[problem] += 1
        if problem is FollowProblem.NAMESPACE_MISSING:
            self.orphans.missing(self._records)
            self._rejected.clear()
            for uid in list(self._records):
                self._forget(uid)
            self.read_once = True
        if self._logged != (problem, str(error)):
            self._logged = (problem, str(error))
            log.warning("wool discovery %s: %s; retrying", self, explain(problem, error))

    def __str__(self) -> str:
        return str(self.spec)
