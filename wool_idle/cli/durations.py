"""Durations as flags take them, and as ``--help`` shows them.

A duration is seconds (``1.5``) or Prometheus-style (``30s``, ``5m``,
``1h30m``, ``500ms``; units from the largest down, each once), from 0 to
``MAX_DURATION``; anything else raises ``ValueError`` saying why. A grace is a
duration too, or ``forever`` (``FOREVER``: drain without limit), and never
shorter than ``LEAST_GRACE`` but for 0. ``format_duration`` spells a duration
the way a flag takes it.
"""

from __future__ import annotations

import itertools
import re
from typing import Final

MAX_DURATION: Final = 10 * 365 * 86400.0
"""Ten years: the longest duration any flag takes. gRPC deadlines overflow
(int64 nanoseconds since 1970) about 230 years from now; nothing here needs
more than hours."""
FOREVER: Final = -1.0
"""The grace ``forever`` stands for: drain without limit."""
LEAST_GRACE: Final = 0.001
"""The shortest grace but 0, in seconds."""

_NUMBER: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_DURATION_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS: Final = {
    "y": 31536000.0,
    "w": 604800.0,
    "d": 86400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 0.001,
}
_UNITS: Final = tuple(_UNIT_SECONDS)
"""The units from the largest down: a duration names each at most once, in this
order (``1h30m``; Prometheus refuses ``1h1h`` and ``30m1h``)."""


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ``ValueError`` unless it is a duration in 0..``MAX_DURATION``."""
    stripped = text.strip()
    if stripped.startswith("-"):
        raise ValueError(f"invalid duration {text!r}: must be >= 0")
    if _NUMBER.fullmatch(stripped):
        seconds = float(stripped)
    elif stripped and not _DURATION_PART.sub("", stripped):
        parts = _DURATION_PART.findall(stripped)
        ranks = [_UNITS.index(unit) for _, unit in parts]
        if any(earlier >= later for earlier, later in itertools.pairwise(ranks)):
            raise ValueError(
                f"invalid duration {text!r}: units go from the largest down, each at most once"
            )
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    else:
        raise ValueError(f"invalid duration {text!r} (use seconds or e.g. 30s, 5m, 1h30m)")
    if seconds > MAX_DURATION:
        raise ValueError(f"invalid duration {text!r}: longer than the maximum of 10y")
    return seconds


def format_duration(seconds: float) -> str:
    """``seconds`` the way a flag takes it: ``30s``, ``5m``, ``1h30m``, ``500ms``."""
    if seconds == FOREVER:
        return "forever"
    if seconds == 0:
        return "0s"
    text, rest = "", round(seconds * 1000)
    for unit in ("h", "m", "s", "ms"):
        size = round(_UNIT_SECONDS[unit] * 1000)
        if rest >= size:
            text += f"{rest // size}{unit}"
            rest %= size
    return text or f"{seconds:g}s"


def positive_duration(text: str) -> float:
    """Seconds in ``text``; ``ValueError`` unless it is a duration greater than 0."""
    seconds = parse_duration(text)
    if seconds == 0:
        raise ValueError(f"invalid duration {text!r}: must be greater than 0")
    return seconds


def parse_grace(text: str) -> float:
    """``forever``, 0, or a duration of at least ``LEAST_GRACE`` (a stop carries its grace
    as a 32-bit float, and a tinier one would reach the worker as 0: cancel at once)."""
    if text.strip().lower() == "forever":
        return FOREVER
    seconds = parse_duration(text)
    if 0 < seconds < LEAST_GRACE:
        raise ValueError(f"invalid grace {text!r}: 0, or at least 1ms")
    return seconds
