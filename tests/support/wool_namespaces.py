"""Real wool ``LocalDiscovery`` namespaces held, published to and followed inside the
test process. ``fresh_namespace`` gives each test a namespace of its own and removes
its leftovers in /tmp."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from wool import LocalDiscovery, WorkerMetadata
from wool.runtime.discovery.local import _short_hash

from support.wool_pools import unique_namespace
from wool_idle.demo.fleet import remove_namespace_files
from wool_idle.discovery.follow import Follower


@contextlib.contextmanager
def fresh_namespace() -> Iterator[str]:
    """A namespace no other test uses; its /tmp files are removed afterwards."""
    name = unique_namespace("unit")
    try:
        yield name
    finally:
        remove_namespace_files(name)


class Publications:
    """Workers published on a namespace by this process, through wool's own publisher."""

    def __init__(self, publisher: object) -> None:
        self.publisher = publisher

    async def add(
        self,
        address: str,
        *,
        tags: tuple[str, ...] = (),
        secure: bool = False,
        uid: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Publish a worker (or re-publish ``uid``); return its uid."""
        uid = uid or uuid.uuid4()
        metadata = WorkerMetadata(
            uid=uid,
            address=address,
            pid=4242,
            version="0.15.7",
            tags=frozenset(tags),
            secure=secure,
        )
        await self.publisher.publish("worker-added", metadata)  # type: ignore[attr-defined]
        return uid

    async def drop(self, uid: uuid.UUID) -> None:
        """Publish the drop of ``uid``."""
        metadata = WorkerMetadata(uid=uid, address="", pid=0, version="")
        await self.publisher.publish("worker-dropped", metadata)  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def publishing(namespace: str) -> AsyncIterator[Publications]:
    """Publish to ``namespace`` (attached; it must exist)."""
    async with LocalDiscovery.Publisher(namespace) as publisher:
        yield Publications(publisher)


@contextlib.asynccontextmanager
async def held(namespace: str) -> AsyncIterator[Publications]:
    """Own ``namespace`` (as wool's first entrant does) and publish to it."""
    with LocalDiscovery(namespace):
        async with publishing(namespace) as publications:
            yield publications


@contextlib.asynccontextmanager
async def running(follower: Follower) -> AsyncIterator[Follower]:
    """Run ``follower`` for the block's duration."""
    task = asyncio.ensure_future(follower.run())
    try:
        yield follower
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def published(namespace: str, *, quiet: float = 1.0) -> dict[str, Any]:
    """The workers a fresh polling wool subscriber finds in its first scan of
    ``namespace``, by address (the scan is over once no event came for ``quiet``
    seconds)."""
    found: dict[str, Any] = {}
    stream = aiter(LocalDiscovery(namespace).subscribe(poll_interval=0.2))
    try:
        while (event := await asyncio.wait_for(anext(stream), quiet)).type == "worker-added":
            found[event.metadata.address] = event.metadata
    except TimeoutError:
        pass
    finally:
        await stream.aclose()
    return found


async def listed(namespace: str) -> set[str]:
    """The addresses a fresh polling wool subscriber finds in its first scan."""
    return set(await published(namespace))


def lock_path(namespace: str) -> Path:
    """The lock file wool takes for ``namespace`` (computed apart from ours)."""
    return Path(tempfile.gettempdir()) / f"wool-lock-{_short_hash(namespace)}"
