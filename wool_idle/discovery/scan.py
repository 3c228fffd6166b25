"""Reading a wool ``LocalDiscovery`` namespace off the event loop.

wool 0.15's own subscriber reads the namespace on the event loop that iterates it: every
poll walks every slot of the segment and maps, reads and decodes the block of every worker
listed (some 0.2 s at ``MAX_WORKERS_FOLLOWED``, during which no scrape is answered), then
re-announces every worker. ``scans`` reads as that subscriber does, through wool's own
helpers, but every read is a job on a daemon thread (``DaemonThreads``); the loop only
awaits it:

- the segment is mapped once per subscription, as wool does (a segment unlinked and created
  again reads as it was until ``LocalAttachment.detached`` sees the new one);
- each poll yields wool's events: ``worker-added`` for a uid not listed before,
  ``worker-dropped`` for one no more listed, ``worker-updated`` for one whose metadata
  changed (not for the others: wool re-announces them on every poll, to no effect);
- what wool raises reading (``FileNotFoundError`` naming a block gone, or the segment)
  ends the subscription, as in wool; so does a read not done within ``deadline`` seconds
  (``ScanStalled``: a stalled /dev/shm), and a job no thread can be started for
  (``RuntimeError``: a pids limit);
- a poll's events are yielded ``CHUNK`` at a time, the loop let run between; ``on_scanned``
  is called once every event of a poll was taken.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, Future
from typing import Any, Final, TypeVar

CHUNK: Final = 256
"""Events yielded between two turns of the loop (the consumer converts each one)."""
SCAN_DEADLINE: Final = 5.0
"""Seconds one read of the namespace may take before it counts as stalled (at
``MAX_WORKERS_FOLLOWED`` a read takes some 0.2 s, a few times that on a busy host)."""

Result = TypeVar("Result")


class ScanStalled(TimeoutError):
    """A read of the namespace did not end in time (it may still be under way)."""

    def __init__(self, namespace: str, deadline: float) -> None:
        super().__init__(f"reading namespace {namespace} took more than {deadline:g} s")


def map_segment(namespace: str) -> Any:
    """The namespace's segment, mapped untracked as wool's subscriber maps it
    (``FileNotFoundError`` naming it when there is none)."""
    from wool.runtime.discovery import local

    return local._attach(local._short_hash(namespace))


def scan(segment: Any, parsed: dict[bytes, tuple[bytes, Any]]) -> dict[str, Any]:
    """The ``WorkerMetadata`` of every worker listed in the mapped ``segment``, by uid:
    wool's subscriber's read (``FileNotFoundError`` for a block gone). ``parsed`` holds
    each slot's record and its metadata from the last read: a record unchanged is not
    decoded again (nothing is allocated for it, so a read of an unchanged namespace
    does not drive the collector); it becomes this read's."""
    from wool import WorkerMetadata
    from wool.runtime.discovery import local

    found: dict[str, Any] = {}
    read: dict[bytes, tuple[bytes, Any]] = {}
    for _, slot in local._iter_slots(segment.buf):
        if slot != local.NULL_REF:
            with local._shared_memory(str(local._WorkerReference.from_bytes(slot))) as block:
                (size,) = struct.unpack_from("I", block.buf, 0)
                (serialized,) = struct.unpack_from(f"{size}s", block.buf, 4)
            known = parsed.get(slot)
            if known is None or known[0] != serialized:
                message = local.wire.WorkerMetadata.FromString(serialized)
                known = (serialized, WorkerMetadata.from_protobuf(message))
            read[slot] = known
            found[str(known[1].uid)] = known[1]
    parsed.clear()
    parsed.update(read)
    return found


def changes(known: dict[str, Any], found: dict[str, Any]) -> list[Any]:
    """wool's events from ``known`` to ``found`` (updates only where the metadata
    changed); ``known`` becomes ``found``."""
    from wool import DiscoveryEvent

    added = [
        DiscoveryEvent("worker-added", metadata=found[uid]) for uid in found.keys() - known.keys()
    ]
    dropped = [
        DiscoveryEvent("worker-dropped", metadata=known[uid]) for uid in known.keys() - found.keys()
    ]
    updated = [
        DiscoveryEvent("worker-updated", metadata=found[uid])
        for uid in found.keys() & known.keys()
        if found[uid] != known[uid]
    ]
    known.clear()
    known.update(found)
    return added + dropped + updated


async def scans(
    namespace: str,
    *,
    poll_interval: float,
    threads: Executor,
    on_scanned: Callable[[], None],
    deadline: float = SCAN_DEADLINE,
) -> AsyncIterator[Any]:
    """wool's events of ``namespace``, read every ``poll_interval`` on ``threads``."""
    job: Future[Any] = threads.submit(map_segment, namespace)
    segment = await _outcome(job, namespace, deadline)
    known: dict[str, Any] = {}
    parsed: dict[bytes, tuple[bytes, Any]] = {}
    try:
        while True:
            job = threads.submit(lambda: changes(known, scan(segment, parsed)))
            events: list[Any] = await _outcome(job, namespace, deadline)
            for start in range(0, len(events), CHUNK):
                if start:
                    await asyncio.sleep(0)
                for event in events[start : start + CHUNK]:
                    yield event
            on_scanned()
            await asyncio.sleep(poll_interval)
    finally:
        if job.done():  # else a stalled read still uses it: it is closed once collected
            segment.close()


async def _outcome(job: Future[Result], namespace: str, deadline: float) -> Result:
    """What ``job`` returned or raised; ``ScanStalled`` when it is not done in ``deadline``
    seconds. Cancelled (or stalled), a job not yet started never runs."""
    waited = asyncio.wrap_future(job)
    try:
        done, _ = await asyncio.wait((waited,), timeout=deadline)
    finally:
        waited.cancel()  # nothing once it is done
    if not done:
        raise ScanStalled(namespace, deadline)
    return waited.result()
