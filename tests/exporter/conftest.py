"""Fixtures for the exporter: an app over real targets, served over real HTTP."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import pytest
from aiohttp.typedefs import Middleware

from wool_idle.exporter.app import ExporterSettings, create_app
from wool_idle.exporter.connections import ADHOC_LIMIT, ConnectionCache
from wool_idle.exporter.probe import Prober
from wool_idle.exporter.target import Target
from wool_idle.exporter.targets import TargetSet
from wool_idle.web.metrics import process_registry


@pytest.fixture
def exporter(aiohttp_client) -> Callable[..., Awaitable[object]]:
    """Serve an exporter app over the given targets (``middlewares`` around its routes);
    returns an HTTP client for it."""

    async def serve(
        addresses: list[str] | None = None,
        *,
        path: str | None = None,
        timeout: float = 5.0,
        concurrency: int = 64,
        adhoc_limit: int = ADHOC_LIMIT,
        middlewares: Sequence[Middleware] = (),
    ) -> object:
        targets = TargetSet(static=tuple(Target(a) for a in addresses or []), path=path)
        targets.reload(force=True)
        connections = ConnectionCache(adhoc_limit=adhoc_limit)
        prober = Prober(tls=None, timeout=timeout, concurrency=concurrency, connections=connections)
        app = create_app(targets, prober, process_registry(), ExporterSettings(timeout=timeout))
        app.middlewares.extend(middlewares)  # around the exporter's own
        client = await aiohttp_client(app)
        client.targets, client.prober = targets, prober
        return client

    return serve
