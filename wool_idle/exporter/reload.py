"""The exporter's forced re-read (SIGHUP, ``POST /-/reload``): the targets file."""

from __future__ import annotations

from wool_idle.exporter.targets import TargetSet
from wool_idle.web.reload import Reloads


def targets_reloads(targets: TargetSet) -> Reloads:
    """The coalesced forced re-reads of ``targets``' file (``TargetSet.refresh``):
    ``""`` when it loaded, else why not (the last good targets kept)."""

    async def reread() -> str:
        if await targets.refresh(force=True):
            return ""
        return targets.failure or "the targets file did not load"

    return Reloads(reread)
