"""Fixtures for the autoscaler: a real fleet, a real exporter, an Autoscaler."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry
from support.fleet import ExporterProcess, Fleet

from wool_idle.autoscaler.daemon import ActionSettings, Autoscaler
from wool_idle.autoscaler.metrics import AutoscalerMetrics
from wool_idle.autoscaler.policy import PolicySettings
from wool_idle.autoscaler.sources import ExporterSource


@pytest.fixture
async def fleet():
    started = Fleet()
    yield started
    await started.close()


@pytest.fixture
def exporter_process():
    started: list[ExporterProcess] = []

    def start(targets) -> ExporterProcess:
        process = ExporterProcess(targets)
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
async def make_autoscaler():
    sessions: list[aiohttp.ClientSession] = []

    def make(url: str, *, grace: float = 5.0, before_stop=None, **rule) -> Autoscaler:
        session = aiohttp.ClientSession()
        sessions.append(session)
        registry = CollectorRegistry()
        autoscaler = Autoscaler(
            source=ExporterSource(session, url, [], 5.0),
            policy=PolicySettings(**rule),
            action=ActionSettings(grace=grace),
            metrics=AutoscalerMetrics(registry),
            before_stop=before_stop,
        )
        autoscaler.registry = registry
        return autoscaler

    yield make
    for session in sessions:
        await session.close()
