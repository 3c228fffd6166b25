"""Fixtures shared by every test: TLS material, transports, real servers."""

from __future__ import annotations

import os

os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # before grpc loads: no C-core chatter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.scripted import ScriptedWorker
from support.tls import TlsMaterial, make_tls_material

from wool_idle.worker import ClientTls, ServerTls, WorkerServer, WorkerService

IDENTITIES = ("exporter", "autoscaler", "caller", "stranger")


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    """A throw-away CA with a localhost server certificate and client identities."""
    return make_tls_material(tmp_path_factory.mktemp("tls"), IDENTITIES)


@dataclass(frozen=True)
class Transport:
    """How to listen and how to connect for one transport."""

    name: str
    listen: str
    server_tls: ServerTls | None
    client_tls: ClientTls | None


@pytest.fixture(params=["tcp", "unix", "tls"])
def transport(
    request: pytest.FixtureRequest, tmp_path: Path, tls_material: TlsMaterial
) -> Transport:
    """Each transport a worker serves: TCP loopback, a Unix socket, and TLS."""
    if request.param == "tcp":
        return Transport("tcp", "127.0.0.1:0", None, None)
    if request.param == "unix":
        # Unix socket paths are limited to ~108 bytes; tmp_path can be longer.
        path = f"/tmp/wool-idle-{os.getpid()}-{abs(hash(tmp_path)) % 10**8}.sock"
        return Transport("unix", f"unix:{path}", None, None)
    return Transport(
        "tls",
        "localhost:0",
        ServerTls(cert_file=tls_material.server.cert, key_file=tls_material.server.key),
        ClientTls(ca_file=tls_material.ca),
    )


StartServer = Callable[..., Awaitable[WorkerServer]]


@pytest.fixture
async def start_server() -> AsyncIterator[StartServer]:
    """Start real in-process worker servers; all are closed after the test."""
    servers: list[WorkerServer] = []

    async def start(
        listen: str = "127.0.0.1:0",
        *,
        service: WorkerService | None = None,
        tls: ServerTls | None = None,
    ) -> WorkerServer:
        server = WorkerServer(listen, service or WorkerService(), tls=tls)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[..., Awaitable[ScriptedWorker]]]:
    """Start scripted gRPC servers (see ``support.scripted``); closed after the test."""
    started: list[ScriptedWorker] = []

    async def start(**fields: object) -> ScriptedWorker:
        worker = ScriptedWorker(**fields)  # type: ignore[arg-type]
        await worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        await worker.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print every ``summary`` a test recorded (``record_property``), passed or
    failed: counts a run should show. Recorded, not printed, so that they also
    reach the end of the run from pytest-xdist's workers, whose output is not shown."""
    summaries = [
        str(value)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == "summary"
    ]
    if summaries:
        terminalreporter.section("summaries")
        for summary in summaries:
            terminalreporter.line(summary)
