"""Where the wall clock stands against the monotonic one, steps followed.

The marks a restart must find are kept in Unix time, the only clock two processes
share; their ages are measured on the monotonic clock, which no one sets. The wall
clock is stepped now and then (NTP after boot, ``date -s``, a VM resumed from
suspend, which the monotonic clock does not count): a mark kept in Unix time is
moved by each step, so its age never jumps with it (a mark made before the wall
clock was set a day forward does not read as a day old; set back, it does not
read as from the future), and it stays in the wall clock of the moment, as a
restart reads it. A drift (NTP slewing) is no step and moves nothing. Across a
restart, the clock since boot (``since_boot``) tells how long ago a file was
written, however the wall clock was set meanwhile.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Final

CLOCK_STEP: Final = 1.0
"""Seconds the wall clock must move against the monotonic one to count as set."""
BOOT_ID: Final = "/proc/sys/kernel/random/boot_id"
"""The kernel's id of the current boot."""


class WallClock:
    """``shift``: Unix time (``wall``) minus monotonic time (``monotonic``), as last
    followed; each clock the module ``time``'s unless given."""

    def __init__(
        self,
        wall: Callable[[], float] | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self._wall = wall or (lambda: time.time())
        self._monotonic = monotonic or (lambda: time.monotonic())
        self.shift = self._wall() - self._monotonic()

    def follow(self) -> float:
        """The step the wall clock took since the last one followed: 0.0 if it moved by
        ``CLOCK_STEP`` at most (a drift, kept), else the step, followed from now on."""
        shift = self._wall() - self._monotonic()
        step = shift - self.shift
        if abs(step) <= CLOCK_STEP:
            return 0.0
        self.shift = shift
        return step


def since_boot() -> tuple[str, float] | None:
    """This boot's id and the seconds since it (``CLOCK_BOOTTIME``: no one sets it, and
    it counts a suspend), or None where either is unknown (not Linux)."""
    try:
        return _boot_id(), time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, AttributeError, UnicodeDecodeError):
        return None


@functools.cache
def _boot_id() -> str:
    """The kernel's id of this boot (it changes with each boot only)."""
    with open(BOOT_ID, encoding="ascii") as file:
        return file.read().strip()
