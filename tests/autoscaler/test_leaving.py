"""``unless_leaving``: work given up once the daemon leaves."""

from __future__ import annotations

import asyncio

import pytest

from wool_idle.autoscaler.leaving import unless_leaving


async def endless(started: asyncio.Event, cancelled: list[bool]) -> int:
    """Work that never ends: sets ``started``, and notes in ``cancelled`` its
    cancellation."""
    started.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancelled.append(True)
        raise
    return 7


class TestUnlessLeaving:
    async def test_unless_leaving_work_that_ends_first_is_its_result(self) -> None:
        """Given work that ends while the daemon stays, when awaited unless leaving, then
        its result comes back."""

        # Arrange
        async def work() -> int:
            return 7

        # Act
        result = await unless_leaving(asyncio.Event(), work())
        # Assert
        assert result == 7

    async def test_unless_leaving_set_during_the_work_cuts_it(self) -> None:
        """Given work that never ends, when the daemon leaves during it, then None comes
        back and the work was cancelled and has ended (nothing of it goes on)."""
        # Arrange
        leaving, started, cancelled = asyncio.Event(), asyncio.Event(), []
        waiting = asyncio.ensure_future(unless_leaving(leaving, endless(started, cancelled)))
        await started.wait()
        # Act
        leaving.set()
        result = await asyncio.wait_for(waiting, 30)
        # Assert
        assert result is None
        assert cancelled == [True]

    async def test_unless_leaving_set_as_the_work_ends_drops_its_result(self) -> None:
        """Given work during whose last step the daemon leaves (the signal handled in
        the turn of the loop the work ended in), when awaited unless leaving, then None
        comes back: what comes after it (a stop) is not done after the signal."""
        # Arrange
        leaving = asyncio.Event()

        async def work() -> int:
            await asyncio.sleep(0)
            leaving.set()
            return 7

        # Act
        result = await unless_leaving(leaving, work())
        # Assert
        assert result is None

    async def test_unless_leaving_already_set_never_runs_the_work(self) -> None:
        """Given the daemon leaving already, when work is given (one that would end at
        once), then None comes back and the work never ran (a read, a confirmation not
        even begun)."""
        # Arrange
        leaving = asyncio.Event()
        leaving.set()
        ran: list[bool] = []

        async def work() -> int:
            ran.append(True)
            return 7

        # Act
        result = await unless_leaving(leaving, work())
        # Assert
        assert result is None
        assert ran == []

    async def test_unless_leaving_error_of_the_work_is_raised(self) -> None:
        """Given work that fails while the daemon stays, when awaited unless leaving,
        then its error is raised, as the work's own would be."""

        # Arrange
        async def work() -> int:
            raise ValueError("bad read")

        # Act / Assert
        with pytest.raises(ValueError, match="bad read"):
            await unless_leaving(asyncio.Event(), work())

    async def test_unless_leaving_cancelled_cancels_the_work(self) -> None:
        """Given work that never ends, when the waiting itself is cancelled, then the
        work is cancelled too (nothing of it goes on)."""
        # Arrange
        started, cancelled = asyncio.Event(), []
        waiting = asyncio.ensure_future(
            unless_leaving(asyncio.Event(), endless(started, cancelled))
        )
        await started.wait()
        # Act
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # Assert
        assert cancelled == [True]
