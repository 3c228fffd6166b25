"""Workers as objects: the ``WorkerLike`` protocol, the ``Worker`` base, and
``LocalWorker``, a worker in a subprocess of this one."""

from __future__ import annotations

import abc
import asyncio
import warnings
from collections.abc import Sequence
from typing import IO, Final, Protocol

from wool_idle.contract import DEFAULT_GRACE, stop_deadline
from wool_idle.worker.connection import WorkerConnection
from wool_idle.worker.process import kill_and_reap, spawn_ready
from wool_idle.worker.tls import ClientTls

EXIT_TIMEOUT: Final = 10.0
"""Seconds a stopped worker process gets to exit (after its grace) before it is killed."""


class WorkerLike(Protocol):
    """Anything that can be started and stopped like a worker."""

    address: str

    async def start(self) -> str: ...

    async def stop(self, grace: float | None = None, *, timeout: float | None = None) -> None: ...


class Worker(abc.ABC):
    """Base of workers: ``stop`` takes ``grace`` and the deprecated ``timeout`` alias."""

    address: str = ""

    @abc.abstractmethod
    async def start(self) -> str:
        """Start the worker and return its address."""

    async def stop(self, grace: float | None = None, *, timeout: float | None = None) -> None:
        """Stop the worker, draining in-flight tasks for ``grace`` seconds.

        ``timeout`` is the deprecated name of ``grace``: it still works and
        emits ``DeprecationWarning``. Passing both is a ``TypeError``.
        """
        if timeout is not None:
            if grace is not None:
                raise TypeError("pass grace only; timeout is its deprecated alias")
            warnings.warn(
                "Worker.stop(timeout=...) is deprecated; use grace=...",
                DeprecationWarning,
                stacklevel=2,
            )
            grace = timeout
        await self._stop(DEFAULT_GRACE if grace is None else grace)

    @abc.abstractmethod
    async def _stop(self, grace: float) -> None:
        """Stop with a resolved grace period."""


class LocalWorker(Worker):
    """A ``wool-idle worker`` process on this machine.

    ``start`` spawns it and waits for the address line it prints when ready
    (what it writes on stdout after that, its tasks' prints, is read and
    dropped: a pipe nobody reads fills, and the next write blocks the worker);
    ``stop`` goes through ``WorkerConnection.stop``, releases the pooled
    channel even when the stop RPC raises (the error propagates and the
    process is left to ``kill``), and otherwise reaps the process; before
    ``start`` has returned an address it raises ``RuntimeError``. Once the
    process has exited (stopped, killed, crashed) ``stop`` returns at once and
    sends nothing: whoever serves its address now is another worker.
    """

    def __init__(
        self,
        listen: str = "127.0.0.1:0",
        *,
        extra_args: Sequence[str] = (),
        tls: ClientTls | None = None,
        log_file: IO[bytes] | None = None,
    ) -> None:
        self.listen = listen
        self.extra_args = list(extra_args)
        self.tls = tls
        self.log_file = log_file
        self.process: asyncio.subprocess.Process | None = None
        self._stdout_drain: asyncio.Future[None] | None = None
        """The task dropping the process's stdout, held: the loop keeps tasks weakly."""
        self._starting = False

    async def start(self) -> str:
        """Spawn the worker process and return its address once it serves.

        ``TimeoutError`` or ``RuntimeError`` if it does not get ready (it is
        then killed; see ``spawn_ready``). ``RuntimeError`` at once while it is
        starting or its process runs: a second process would take the place of
        the first, which would run on with no one to stop it. Once the process
        has exited, ``start`` spawns a new one."""
        if self._starting or (self.process is not None and self.process.returncode is None):
            raise RuntimeError(f"worker {self.address or self.listen} is started already")
        self._starting = True
        try:
            ready = await spawn_ready(
                ["worker", "--listen", self.listen, *self.extra_args], stderr=self.log_file
            )
        finally:
            self._starting = False
        self.process = ready.process
        self.address = ready.line
        self._stdout_drain = asyncio.ensure_future(_discard(ready.process.stdout))
        return self.address

    async def _stop(self, grace: float) -> None:
        if not self.address:
            raise RuntimeError(f"worker {self.listen} has no address to stop: not started yet")
        if self.process is not None and self.process.returncode is not None:
            return  # exited: the address may be another worker's by now
        connection = WorkerConnection(self.address, tls=self.tls)
        try:
            await connection.stop(grace, timeout=stop_deadline(grace))
        finally:
            await connection.close()
        await self._reap()

    async def _reap(self) -> None:
        """Wait for the process to exit, killing it if it lingers."""
        if self.process is None:
            return
        try:
            await asyncio.wait_for(self.process.wait(), EXIT_TIMEOUT)
        except TimeoutError:
            await self.kill()

    async def kill(self) -> None:
        """Kill the process at once (no drain) and reap it."""
        if self.process is not None:
            await kill_and_reap(self.process)


async def _discard(output: asyncio.StreamReader | None) -> None:
    """Read ``output`` to its end, dropping what it says."""
    while output is not None and await output.read(65536):
        pass
