"""The exporter's forced re-read (SIGHUP, ``POST /-/reload``): the targets file, then
the other files it follows (``web.followed_files``)."""

from __future__ import annotations

from wool_idle.exporter.targets import TargetSet
from wool_idle.web.reload import Reloads, Reread


def targets_reloads(targets: TargetSet, files: Reread | None = None) -> Reloads:
    """The coalesced forced re-reads of ``targets``' file (``TargetSet.refresh``), then
    of ``files``: ``""`` when all loaded, else why not, each failure naming what did
    not load (its last good version kept, the others taken)."""

    async def reread() -> str:
        failures = []
        if not await targets.refresh(force=True):
            failures.append(targets.failure or "the targets file did not load")
        if files is not None:
            failures.append(await files())
        return "; ".join(failure for failure in failures if failure)

    return Reloads(reread)
