"""How long a worker may take to exit after SIGTERM, which supervisors must wait out."""

from __future__ import annotations

from wool_idle.worker.leaving import LEAVING_TIME
from wool_idle.worker.server import CLOSE_GRACE
from wool_idle.worker.service import CANCEL_WAIT


def worker_shutdown_at_most(grace: float) -> float:
    """The longest a worker takes to exit after SIGTERM with ``grace``: the drain, the
    wait for cancelled tasks, the server's close and the time left to clean up (only
    reached when tasks ignore their cancellation)."""
    return grace + CANCEL_WAIT + CLOSE_GRACE + LEAVING_TIME
