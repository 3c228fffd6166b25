"""The planner's marks kept across restarts: taken up at start, written down before
each stop is sent, and again whenever they change (``state_file``). The workers
shown retired (``retired``) are kept with them, in the same writes: one that is
written only when a mark changed, never once a cycle for nothing. A retired mark
that the file has malformed is logged and left out; the others are taken up.

Fail closed. A state file missing or unreadable at start means the stops of an
earlier process are unknown, so the planner sends none for ``retiring_for``
(``PolicyPlanner.hold``): by then any such stop is over. A file written in this
boot is read by how long ago that was on the clock since boot: a wall clock set
forward meanwhile (``date -s``, NTP) moves its marks with it, never ends a
retiring mark, a cooldown or a hold early. A stop that cannot be
written down first is not sent. A later write that fails is logged and counted
(``wool_autoscaler_state_write_errors_total``); the file then keeps its last
content, which names every stop sent up to then (each was written before it
was sent), so a restart meanwhile counts them retiring still. Writes run one at
a time, in order, on a thread of their own, each waited for ``WRITE_TIMEOUT`` at
most: a file system that hangs fails the write (and holds the stop) rather than
the cycle, and never holds up the process's exit (a daemon thread); the writes
that timed out behind the hung one are let go, not queued up for as long as it
hangs (``DaemonThreads``). A write for which no thread can be started (a pids
limit) fails likewise, and the next one starts it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from functools import partial
from typing import Final

from prometheus_client import Counter

from wool_idle.autoscaler.planner import PolicyPlanner
from wool_idle.autoscaler.retired import RetiredWorkers
from wool_idle.autoscaler.state_file import Marks, StateFile, StateFileError, Written
from wool_idle.autoscaler.wall_clock import CLOCK_STEP, WallClock, since_boot
from wool_idle.daemon_thread import DaemonThreads

log = logging.getLogger("wool_idle.autoscaler")

WRITE_TIMEOUT: Final = 10.0
"""Seconds one write of the state file is waited for; longer, it counts as failed."""


class StopMemory:
    """``planner``'s marks and the ``retired`` ones in ``file``; ``write_errors`` counts
    the writes that failed."""

    def __init__(
        self,
        file: StateFile,
        planner: PolicyPlanner,
        write_errors: Counter,
        retired: RetiredWorkers,
    ) -> None:
        self.file, self.planner, self.write_errors = file, planner, write_errors
        self.retired = retired
        self._clock = WallClock()
        """Unix time minus monotonic time: kept while it drifts, so marks change only when
        they do; followed once the wall clock steps (``_wall_shift``)."""
        self._sending: dict[str, float] = {}
        """Workers whose stop is written down and sent, and when, until its result is
        recorded by the planner (``settled``)."""
        self._written: Marks | None = None
        self._lock = asyncio.Lock()
        self._writer = DaemonThreads(1, "wool-idle-state")

    def recall(self) -> None:
        """Take up the file's marks, or, missing or unreadable, hold every stop for the
        planner's ``retiring_for``. Call before the first plan."""
        now = time.monotonic()
        try:
            marks = self.file.load()
        except StateFileError as error:
            self.planner.hold(now)
            log.warning(
                "state file %s; the stops of an earlier autoscaler are unknown, so none is "
                "sent for %gs (held back as min_age)",
                error,
                self.planner.settings.retiring_for,
            )
            return
        shift = self._clock.shift
        if step := self._set_forward_since(marks.written, now + shift):
            log.warning(
                "state file %s: the wall clock was set %.3fs forward since it was written "
                "(by the clock since boot); its marks move with it",
                self.file.path,
                step,
            )
            marks = marks.moved(step)
        self.planner.restore(marks, shift, clock=now + shift)
        self.retired.restore(marks.retired)
        self._written = marks
        if marks.skipped:
            log.warning(
                "state file %s: %d retired mark(s) malformed, left out (%s)",
                self.file.path,
                len(marks.skipped),
                "; ".join(marks.skipped[:3]) + ("; ..." if len(marks.skipped) > 3 else ""),
            )
        log.info(
            "state file %s: %d worker(s) retiring, %d unreachable, %d cooling down, %d retired%s",
            self.file.path,
            len(marks.retiring),
            len(marks.unreachable),
            len(marks.cooldown_until),
            len(self.retired),
            "" if marks.held_until is None else "; every stop held on (min_age) as it was",
        )

    async def before_stop(self, worker: str) -> None:
        """Write ``worker`` down as retiring; ``OSError`` if that failed (the stop must
        then not be sent). Cancelled (leaving), no stop follows either: the write may
        land, but no later one names ``worker`` retiring."""
        self._sending[worker] = time.monotonic()
        try:
            await self._write()
        except BaseException as error:
            del self._sending[worker]
            if isinstance(error, OSError):
                self.write_errors.inc()
            raise

    async def settled(self, worker: str) -> None:
        """The planner has recorded what came of ``worker``'s stop (if one was sent):
        write the marks down as they are now."""
        self._sending.pop(worker, None)
        await self.save()

    async def save(self) -> None:
        """Write the marks down if they changed; a failure is logged and counted."""
        try:
            await self._write()
        except OSError as error:
            self.write_errors.inc()
            log.error("state file %s: not written: %s", self.file.path, error)

    async def _write(self) -> None:
        async with self._lock:
            shift = self._wall_shift()
            marks = replace(self.planner.marks(shift), retired=self.retired.marks())
            if self._sending:
                sending = {w: t + shift for w, t in self._sending.items()}
                marks = replace(marks, retiring={**sending, **marks.retiring})
            if (boot := since_boot()) is not None:
                marks = replace(marks, written=Written(time.monotonic() + shift, *boot))
            if marks == self._written:
                return
            try:
                submitted = self._writer.submit(partial(self.file.save, marks))
            except RuntimeError as error:  # no thread left (a pids limit): a failed write
                raise OSError(f"cannot start a thread to write it: {error}") from None
            written = asyncio.wrap_future(submitted)
            try:
                await asyncio.wait_for(written, WRITE_TIMEOUT)
            except TimeoutError:  # an OSError: the write goes on, in order, and may land
                raise TimeoutError(f"no write within {WRITE_TIMEOUT:g}s") from None
            self._written = marks

    @staticmethod
    def _set_forward_since(written: Written | None, now: float) -> float:
        """How far the wall clock (Unix time ``now``) was set forward since the marks
        were ``written``, beyond the time that passed by the clock since boot: 0.0 if
        by ``CLOCK_STEP`` at most, or unknown (another boot, no such clock, a file
        without it). A clock set back needs no move: a mark from after now counts from
        now (``PolicyPlanner.restore``)."""
        boot = since_boot()
        if written is None or boot is None or boot[0] != written.boot:
            return 0.0
        passed = boot[1] - written.since_boot
        step = now - (written.at + passed)
        return step if passed >= 0 and step > CLOCK_STEP else 0.0

    def _wall_shift(self) -> float:
        """Unix time minus monotonic time now, as far as a write goes: the marks are
        written in the wall clock of the moment, so a clock set forward since start
        (NTP after boot) never makes a restart read them as older than they are."""
        step = self._clock.follow()
        if step:
            log.info("the wall clock stepped by %+.3fs; the state file follows", step)
        return self._clock.shift
