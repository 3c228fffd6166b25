"""Fixtures of the worker tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from support.raw import RawWorker


@pytest.fixture
async def raw_worker() -> AsyncIterator[Callable[..., Awaitable[RawWorker]]]:
    """Start raw-bytes gRPC servers (see ``support.raw``); closed after the test."""
    started: list[RawWorker] = []

    async def start(**fields: object) -> RawWorker:
        worker = RawWorker(**fields)  # type: ignore[arg-type]
        await worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        await worker.close()
