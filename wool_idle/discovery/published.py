"""The records of a wool ``LocalDiscovery`` namespace, read without owning it: which
of them a drop (``drop``) may publish ``worker-dropped`` for.

It reads wool 0.15's layout through wool's own private helpers (a segment of
16-byte worker uids after a 16-byte header; one block per worker holding a
length-prefixed ``WorkerMetadata`` protobuf); ``wool`` is imported only when a
namespace is read.
"""

from __future__ import annotations

import logging
import struct
import uuid
from dataclasses import dataclass

from wool_idle.discovery.attachment import MAX_WORKERS_FOLLOWED
from wool_idle.discovery.local import check_capacity
from wool_idle.worker.address import parse_address, same_endpoint

log = logging.getLogger("wool_idle.discovery")


@dataclass(frozen=True)
class PublishedRecord:
    """The two facts of a published wool worker record a drop needs (the follower's
    full record is ``records.WorkerRecord``)."""

    uid: uuid.UUID
    address: str


def read_records(namespace: str) -> list[PublishedRecord]:
    """The records of a ``LocalDiscovery`` namespace, read without owning it.

    ``FileNotFoundError`` if the namespace does not exist; ``TooManyWorkers`` (before
    reading a record) if it has room for more than ``MAX_WORKERS_FOLLOWED``. A record
    whose block is gone (its publisher was killed) or does not decode is skipped.
    """
    from wool.runtime.discovery import local

    check_capacity(namespace, MAX_WORKERS_FOLLOWED)
    with local._shared_memory(local._short_hash(namespace)) as segment:
        uids = [
            uuid.UUID(bytes=slot)
            for _, slot in local._iter_slots(segment.buf)
            if slot != local.NULL_REF
        ]
    return [record for uid in uids if (record := _read_record(uid)) is not None]


def _read_record(uid: uuid.UUID) -> PublishedRecord | None:
    """The record in ``uid``'s block, or None if the block is gone or unreadable."""
    from wool import protocol
    from wool.runtime.discovery import local

    try:
        with local._shared_memory(local._short_hash(uid.hex)) as block:
            (size,) = struct.unpack_from("I", block.buf, 0)
            message = protocol.WorkerMetadata.FromString(bytes(block.buf[4 : 4 + size]))
    except Exception as error:  # gone, truncated, not a protobuf: not a record to drop
        log.debug("worker record %s unreadable: %s: %s", uid, type(error).__name__, error)
        return None
    return PublishedRecord(uid, message.address)


def listed_at(namespace: str, address: str) -> set[uuid.UUID]:
    """The uids of ``namespace``'s records at ``address`` (a valid worker address):
    spelt so, or another spelling of its IP address (``[::1]:P`` listed, the worker
    read as ``[0:0:0:0:0:0:0:1]:P``; see ``same_endpoint``)."""
    return {r.uid for r in read_records(namespace) if _at(r.address, address)}


def _at(listed: str, address: str) -> bool:
    """Whether a record listing ``listed`` (any text) is at ``address``."""
    try:
        return listed == address or same_endpoint(parse_address(listed), address)
    except ValueError:  # not a worker address: no other spelling of one
        return False
