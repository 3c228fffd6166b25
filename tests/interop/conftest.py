"""Fixtures: real wool packages in cached virtualenvs, and real wool workers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.wool import (
    WOOL_BEFORE_IDLE,
    WOOL_WITH_IDLE,
    WoolEnv,
    WoolWorker,
    start_wool_worker,
    wool_env,
)


@pytest.fixture(scope="session")
def wool15() -> WoolEnv:
    return wool_env(WOOL_WITH_IDLE, with_wool_idle=True)


@pytest.fixture(scope="session")
def wool13() -> WoolEnv:
    return wool_env(WOOL_BEFORE_IDLE)


@pytest.fixture
def wool_worker() -> Iterator:
    started: list[WoolWorker] = []

    def start(env: WoolEnv) -> WoolWorker:
        worker = start_wool_worker(env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.launcher.poll() is None:
            worker.launcher.terminate()
            worker.launcher.wait(timeout=60)
