"""Fixtures for the autoscaler: a real fleet, a real exporter, an Autoscaler, and
real servers that answer what real workers and exporters never should."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import grpc
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from support import unix_http
from support.fleet import ExporterProcess, Fleet
from support.generic_server import serve_worker_methods

from wool_idle.autoscaler.daemon import ActionSettings, Autoscaler
from wool_idle.autoscaler.metrics import AutoscalerMetrics
from wool_idle.autoscaler.policy import PolicySettings
from wool_idle.autoscaler.sources import ExporterSource, Source
from wool_idle.autoscaler.state_file import StateFile
from wool_idle.discovery.drop import Dropper
from wool_idle.proto import StopRequest, Void

UNDECODABLE: bytes = b"\xff\xff\xff\xff"
"""Bytes that no protobuf message decodes from (a truncated varint tag)."""


@pytest.fixture
async def fleet():
    started = Fleet()
    yield started
    await started.close()


@pytest.fixture
def exporter_process():
    started: list[ExporterProcess] = []

    def start(targets, listen: str = "127.0.0.1:0") -> ExporterProcess:
        process = ExporterProcess(targets, listen)
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
async def make_autoscaler():
    sessions: list[aiohttp.ClientSession] = []

    def make(
        url: str,
        *,
        grace: float = 5.0,
        before_stop=None,
        source: Source | None = None,
        dropper: Dropper | None = None,
        state_file: StateFile | None = None,
        **rule,
    ) -> Autoscaler:
        session, url = unix_http.client_for(url)
        sessions.append(session)
        registry = CollectorRegistry()
        policy = PolicySettings(**rule)
        autoscaler = Autoscaler(
            source=source or ExporterSource(session, url, [], 5.0, policy.group_by),
            policy=policy,
            action=ActionSettings(grace=grace),
            metrics=AutoscalerMetrics(registry, group_by=policy.group_by),
            before_stop=before_stop,
            dropper=dropper,
            state_file=state_file,
        )
        autoscaler.registry = registry
        return autoscaler

    yield make
    for session in sessions:
        await session.close()


@pytest.fixture
async def serve_text(aiohttp_server) -> Callable[[str], Any]:
    """Serve a fixed body at ``/metrics`` over real HTTP; return its URL."""

    async def serve(text: str) -> str:
        async def metrics(request: web.Request) -> web.Response:
            return web.Response(text=text)

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        server = await aiohttp_server(app)
        return str(server.make_url("/metrics"))

    return serve


@dataclass
class StalledSource:
    """A real HTTP ``/metrics`` (``url``) that never answers (a stalled Prometheus or
    exporter); ``asked`` is set once a read came in."""

    url: str
    asked: asyncio.Event


@pytest.fixture
async def stalled_source(aiohttp_server) -> AsyncIterator[Callable[[], Any]]:
    """Start ``StalledSource`` servers; their reads are answered (empty) only as the
    test ends, so that closing the server does not wait for them."""
    released = asyncio.Event()

    async def start() -> StalledSource:
        asked = asyncio.Event()

        async def metrics(request: web.Request) -> web.Response:
            asked.set()
            await released.wait()
            return web.Response(text="")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        server = await aiohttp_server(app)
        return StalledSource(str(server.make_url("/metrics")), asked)

    yield start
    released.set()


@dataclass
class UndecodableWorker:
    """A real gRPC server whose ``idle`` reply does not decode as ``IdleTime``."""

    stops: int = 0
    address: str = ""
    _server: Any = None

    async def _idle(self, request: Void, context: Any) -> bytes:
        return UNDECODABLE

    async def _stop(self, request: StopRequest, context: Any) -> Void:
        self.stops += 1
        return Void()

    async def start(self) -> str:
        methods = {
            "idle": grpc.unary_unary_rpc_method_handler(
                self._idle, request_deserializer=Void.FromString, response_serializer=bytes
            ),
            "stop": grpc.unary_unary_rpc_method_handler(
                self._stop,
                request_deserializer=StopRequest.FromString,
                response_serializer=Void.SerializeToString,
            ),
        }
        self._server, self.address = await serve_worker_methods(methods)
        return self.address


@pytest.fixture
async def undecodable_worker():
    worker = UndecodableWorker()
    await worker.start()
    yield worker
    await worker._server.stop(0)
