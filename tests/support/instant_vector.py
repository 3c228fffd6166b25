"""Prometheus query API answers (instant vectors) as a test scripts them."""

from __future__ import annotations

import time

SERIES = ("wool_worker_idle_seconds", "wool_worker_up", "wool_worker_idle_supported")


def vector(*items: tuple[dict, object], behind: float = 0.0) -> dict:
    """An instant-vector answer evaluated ``behind`` seconds before now."""
    at = round(time.time() - behind, 3)
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": labels, "value": [at, value]} for labels, value in items],
        },
    }


def healthy(worker: str, idle: str, **extra: str) -> list[tuple[dict, str]]:
    """The three series of one up worker that supports idle."""
    values = dict(zip(SERIES, (idle, "1", "1"), strict=True))
    return [({"__name__": n, "worker": worker, **extra}, v) for n, v in values.items()]
