"""Serve until a signal: the run loop of the three daemons, in process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator

from wool_idle.cli.serve import EXIT_CANNOT_LISTEN, EXIT_OK, serve_until_signal


@contextlib.asynccontextmanager
async def bound(address: str, events: list[str]) -> AsyncIterator[str]:
    events.append("bound")
    yield address
    events.append("closed")


@contextlib.asynccontextmanager
async def unbindable() -> AsyncIterator[str]:
    raise OSError("address in use")
    yield "never"


class TestServeUntilSignal:
    async def test_serve_prints_ready_line_and_stops_on_sigterm(self, capsys) -> None:
        """Given a daemon that binds, when SIGTERM arrives while it waits, then `stop`
        is called, the address was printed on one line, it closes and returns 0."""
        # Arrange
        events: list[str] = []
        stopped = asyncio.Event()

        async def wait() -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # handled by the runner's handler
            await stopped.wait()

        # Act
        status = await serve_until_signal("test", bound("unix:/x", events), wait, stop=stopped.set)
        # Assert
        assert status == EXIT_OK
        assert capsys.readouterr().out == "unix:/x\n"
        assert events == ["bound", "closed"]

    async def test_serve_reloads_on_sighup(self) -> None:
        """Given a reload callback, when SIGHUP arrives, then it is called."""
        # Arrange
        reloaded = asyncio.Event()

        async def wait() -> None:
            os.kill(os.getpid(), signal.SIGHUP)
            await reloaded.wait()

        # Act
        status = await serve_until_signal(
            "test", bound("h:1", []), wait, stop=lambda: None, reload=reloaded.set
        )
        # Assert
        assert status == EXIT_OK and reloaded.is_set()

    async def test_serve_cannot_bind_returns_1(self, capsys) -> None:
        """Given a daemon whose address cannot be bound, then 1 and no ready line."""
        # Act
        status = await serve_until_signal(
            "test", unbindable(), lambda: asyncio.sleep(0), stop=lambda: None
        )
        # Assert
        assert status == EXIT_CANNOT_LISTEN
        assert capsys.readouterr().out == ""

    async def test_serve_removes_its_signal_handlers(self) -> None:
        """Given a run that ended, then SIGTERM and SIGHUP are handled as before it."""
        # Arrange
        before = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)]
        # Act
        await serve_until_signal(
            "test",
            bound("h:1", []),
            lambda: asyncio.sleep(0),
            stop=lambda: None,
            reload=lambda: None,
        )
        # Assert
        assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)] == before
