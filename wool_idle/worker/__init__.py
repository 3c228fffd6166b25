"""The worker: a runtime that reports its idle time, and the client to reach it."""

from __future__ import annotations

from wool_idle.worker.connection import IdleReport, WorkerConnection
from wool_idle.worker.local import LocalWorker, Worker, WorkerLike
from wool_idle.worker.server import WorkerServer
from wool_idle.worker.service import WorkerService
from wool_idle.worker.tls import ClientTls, ServerTls

__all__ = [
    "ClientTls",
    "IdleReport",
    "LocalWorker",
    "ServerTls",
    "Worker",
    "WorkerConnection",
    "WorkerLike",
    "WorkerServer",
    "WorkerService",
]
