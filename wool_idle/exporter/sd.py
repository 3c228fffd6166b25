"""``/sd``: the exporter's targets for Prometheus's ``http_sd_configs``.

The body is what Prometheus's HTTP service discovery reads: a JSON list of
``{"targets": ["host:port"], "labels": {...}}``, one group per target of every
source (flags, file, wool discovery), with the labels of the target's series
(``wool_namespace``, ``wool_tags``, the file's labels). A discovered worker's
volatile facts come as ``__meta_wool_uid``, ``__meta_wool_pid``,
``__meta_wool_version`` and ``__meta_wool_secure``: usable in relabelling, and
dropped by Prometheus after it, so they never become target labels.

Each group also carries ``__param_pool``: a digest of the target's labels
(``Target.pool_digest``), which Prometheus sends back as ``/probe``'s ``pool`` parameter.
Prometheus refreshes ``/sd`` only every ``refresh_interval`` (and keeps its list
while ``/sd`` fails), so it can probe a worker under labels the exporter no longer
gives it: an address it dropped (a contested or gone record, another pool's worker
now on its port), or whose pool changed. Prometheus attaches those old labels to
the series, so ``/probe`` withholds the idle value of a target whose ``pool`` is
not its current labels' digest (``pool_changed``).

Until the targets file (if any) has loaded once and every wool discovery has
been read once, ``/sd`` answers 503, not an empty list: an exporter restarted
with a broken file, or whose discoveries have not announced their workers yet,
knows no targets, and a 200 ``[]`` would have every shard drop all its workers
at once (and no alert of the sharded layout reads the exporter's own
``/metrics``). On an error Prometheus keeps the targets it had.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from aiohttp import web

from wool_idle.exporter.target import Target
from wool_idle.exporter.targets import TargetSet

META_PREFIX: Final = "__meta_wool_"
POOL_PARAM: Final = "pool"
"""The ``/probe`` parameter naming the labels Prometheus holds for the target."""


def sd_groups(targets: Sequence[Target]) -> list[dict[str, object]]:
    """The http_sd target groups of ``targets``."""
    return [
        {
            "targets": [target.address],
            "labels": {
                **dict(target.labels),
                **{META_PREFIX + name: value for name, value in target.info},
                "__param_" + POOL_PARAM: target.pool_digest(),
            },
        }
        for target in targets
    ]


class SdBody:
    """The ``/sd`` body of a target set, built again only when the set changed."""

    def __init__(self, targets: TargetSet) -> None:
        self.targets = targets
        self._built_from: list[Target] | None = None
        self._body = b""

    def __call__(self) -> bytes:
        current = self.targets.all()
        if current is not self._built_from:
            self._body = json.dumps(sd_groups(current)).encode()
            self._built_from = current
        return self._body


def add_sd_route(app: web.Application, targets: TargetSet) -> None:
    """Serve ``/sd`` on ``app`` from ``targets``: 503 until they are known."""
    body = SdBody(targets)

    async def sd(request: web.Request) -> web.Response:
        if (why := targets.unloaded) is not None:
            raise web.HTTPServiceUnavailable(text=f"{why}\n")
        return web.Response(body=body(), content_type="application/json", charset="utf-8")

    app.router.add_get("/sd", sd)
