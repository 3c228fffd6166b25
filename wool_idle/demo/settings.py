"""What the demo runs and when. Durations in seconds; the command line reads its
defaults from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

HOT: Final = "hot"
"""The tag of the pool the demo's wool client dispatches to."""
COLD: Final = "cold"
"""The tag of the pool no client uses."""


@dataclass(frozen=True, kw_only=True)
class DemoSettings:
    """The fleet (workers per tag) and the timeline, counted from the moment every
    process is up."""

    hot: int = 3
    """wool workers tagged ``hot``: the pool the client needs."""
    cold: int = 2
    """wool workers tagged ``cold``: a pool nobody uses."""
    max_idle: float = 10.0
    """The autoscaler retires workers idle this long (all are idle at the start)."""
    client_after: float = 18.0
    """When the wool client on the hot tag starts: after the first retirements."""
    duration: float = 45.0
    """How long the demo runs (0: until Ctrl-C)."""
    refresh: float = 1.0
    """How often the table is redrawn."""

    def __post_init__(self) -> None:
        if self.duration and self.client_after >= self.duration:
            raise ValueError("client_after must be less than duration")

    @property
    def interval(self) -> float:
        """The autoscaler's cycle: a fifth of ``max_idle``, within 0.5 s and 2 s."""
        return max(0.5, min(2.0, self.max_idle / 5))
