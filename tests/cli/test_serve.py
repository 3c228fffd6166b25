"""Serve until a signal: the run loop of the three daemons, in process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Iterator

import pytest

from wool_idle.cli import main
from wool_idle.cli.serve import EXIT_CANNOT_LISTEN, EXIT_OK, serve_until_signal
from wool_idle.exporter.targets import TargetSet


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


@contextlib.contextmanager
def recording(*signums: signal.Signals) -> Iterator[list[int]]:
    """Python-level handlers that record ``signums``: a signal the runner does not
    handle lands here instead of ending the test process."""
    received: list[int] = []
    before = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in signums}
    try:
        yield received
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@contextlib.asynccontextmanager
async def signalled_while_binding(signum: signal.Signals) -> AsyncIterator[str]:
    os.kill(os.getpid(), signum)  # before the daemon is bound
    await asyncio.sleep(0)  # the loop runs the handler
    yield "h:1"


class TestServeUntilSignalHandlesEverySignal:
    async def test_serve_sighup_without_reload_is_logged_and_ignored(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a daemon with nothing to reload (the worker), when
        SIGHUP arrives while it serves, then it is logged as ignored and the daemon
        goes on (it does not end, nor reach the handler of before)."""
        # Arrange
        stopped = asyncio.Event()

        async def wait() -> None:
            os.kill(os.getpid(), signal.SIGHUP)
            while "SIGHUP ignored, nothing to reload" not in caplog.text:
                await asyncio.sleep(0.01)
            stopped.set()

        # Act
        with (
            caplog.at_level(logging.INFO, logger="wool_idle.test"),
            recording(signal.SIGHUP) as received,
        ):
            status = await asyncio.wait_for(
                serve_until_signal("test", bound("h:1", []), wait, stop=lambda: None), 30
            )
        # Assert
        assert (status, stopped.is_set(), received) == (EXIT_OK, True, [])

    @pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
    async def test_serve_signal_while_binding_is_the_daemons(self, signum: signal.Signals) -> None:
        """Given a signal that arrives while the daemon binds (a slow start), then the
        daemon's own handling applies: SIGTERM calls stop (so the run ends at once),
        SIGHUP is ignored; never the handler of before (by default: death)."""
        # Arrange
        stopped = asyncio.Event()

        async def wait() -> None:
            if signum == signal.SIGHUP:
                stopped.set()
            await stopped.wait()

        # Act
        with recording(signum) as received:
            status = await asyncio.wait_for(
                serve_until_signal("test", signalled_while_binding(signum), wait, stop=stopped.set),
                30,
            )
        # Assert
        assert (status, received) == (EXIT_OK, [])


class TestDaemonStart:
    def test_main_ignores_sighup_while_a_daemon_starts(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given an exporter that gets SIGHUP while it reads its targets file at start
        (before its loop and handlers exist), then the signal is ignored, not the
        handler of before (by default: death), and the start goes on (here to a
        "cannot listen", exit 1, on an unbindable address)."""
        # Arrange
        original = TargetSet.reload

        def reload_with_hangup(self: TargetSet, *, force: bool = False) -> bool:
            os.kill(os.getpid(), signal.SIGHUP)
            return original(self, force=force)

        monkeypatch.setattr(TargetSet, "reload", reload_with_hangup)
        missing_parent = "unix:/nonexistent-wool-idle-dir/exporter.sock"
        # Act
        with recording(signal.SIGHUP) as received:
            status = main(["exporter", "--web.listen-address", missing_parent])
        # Assert
        assert (status, received) == (EXIT_CANNOT_LISTEN, [])
