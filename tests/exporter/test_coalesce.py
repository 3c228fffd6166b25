"""Concurrent scrapes sharing one round of probes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from wool_idle.exporter.coalesce import Coalescer, Results, RunRound
from wool_idle.exporter.outcome import ErrorReason, classify
from wool_idle.exporter.target import Target

TARGETS = [Target("a:1"), Target("b:2")]


def held_round(release: asyncio.Event, idle: float, runs: list[float]) -> RunRound:
    """A round that notes its budget in ``runs``, waits for ``release``, then answers
    ``idle`` for every target."""

    async def run(targets: Sequence[Target], budget: float, results: Results) -> None:
        runs.append(budget)
        await release.wait()
        for target in targets:
            results[target.address] = classify(target, idle, 0.0)

    return run


class TestCoalescer:
    async def test_call_concurrent_scrapes_share_one_round(self) -> None:
        """Given a round that takes a moment, when three scrapes arrive together, then
        the round runs once and each gets its results."""
        # Arrange
        runs = []

        async def run(targets: Sequence[Target], budget: float, results: Results) -> None:
            runs.append(budget)
            await asyncio.sleep(0.05)
            for target in targets:
                results[target.address] = classify(target, 1.0, 0.05)

        coalesce = Coalescer(run, longest=5.0)
        # Act
        answers = await asyncio.gather(*(coalesce(TARGETS, 5.0) for _ in range(3)))
        # Assert
        assert runs == [5.0]
        assert [[r.idle for r in a] for a in answers] == [[1.0, 1.0]] * 3

    async def test_call_failed_round_answers_missed_deadlines(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Given a round that raises after one result, when scraped, then the scrape
        gets that result and a missed deadline for the other instead of the error,
        and the failure is logged."""

        # Arrange
        async def run(targets: Sequence[Target], budget: float, results: Results) -> None:
            results["a:1"] = classify(targets[0], 2.0, 0.0)
            raise RuntimeError("a bug in the round")

        # Act
        answers = await Coalescer(run, longest=5.0)(TARGETS, 0.5)
        # Assert
        assert [(r.idle, r.error) for r in answers] == [(2.0, None), (None, ErrorReason.DEADLINE)]
        assert "probe round failed" in caplog.text

    async def test_call_cancelled_scrape_leaves_round_to_the_others(self) -> None:
        """Given a scrape that started a round and one that joined it, when the first
        is cancelled (its client went away), then the round goes on and the joiner
        gets every result."""
        # Arrange
        release = asyncio.Event()
        coalesce = Coalescer(held_round(release, 3.0, []), longest=5.0)
        first = asyncio.ensure_future(coalesce(TARGETS, 5.0))
        await asyncio.sleep(0)
        joined = asyncio.ensure_future(coalesce(TARGETS, 5.0))
        await asyncio.sleep(0)
        # Act
        first.cancel()
        await asyncio.sleep(0)
        release.set()
        answers = await joined
        # Assert
        assert first.cancelled()
        assert [r.idle for r in answers] == [3.0, 3.0]

    async def test_call_longer_budget_starts_its_own_round(self) -> None:
        """Given a round in flight with a budget shorter than a new scrape's (a scraper
        announcing a short timeout), when the scrape arrives, then it starts a round with
        its own budget instead of joining the short one, and gets every result."""
        # Arrange
        runs: list[float] = []
        release = asyncio.Event()

        async def run(targets: Sequence[Target], budget: float, results: Results) -> None:
            runs.append(budget)
            if budget < 1.0:
                await release.wait()  # the short round, still in flight
                return
            for target in targets:
                results[target.address] = classify(target, 4.0, 0.0)

        coalesce = Coalescer(run, longest=5.0)
        short = asyncio.ensure_future(coalesce(TARGETS, 0.01))
        await asyncio.sleep(0)
        # Act
        answers = await coalesce(TARGETS, 5.0)
        release.set()
        await short
        # Assert
        assert runs == [0.01, 5.0]
        assert [r.idle for r in answers] == [4.0, 4.0]

    async def test_call_ever_longer_budgets_share_one_longest_round(self) -> None:
        """Given a short round in flight, when scrapes announcing ever longer timeouts
        arrive together, then one more round starts, given the longest budget, and
        every scrape joins it and gets its results (not a round, a probe of every
        worker, per request)."""
        # Arrange
        runs: list[float] = []
        release = asyncio.Event()
        coalesce = Coalescer(held_round(release, 6.0, runs), longest=5.0)
        short = asyncio.ensure_future(coalesce(TARGETS, 0.5))
        await asyncio.sleep(0)
        # Act
        longer = [asyncio.ensure_future(coalesce(TARGETS, 1.0 + i / 100)) for i in range(20)]
        await asyncio.sleep(0)
        release.set()
        answers = await asyncio.gather(*longer)
        await short
        # Assert
        assert runs == [0.5, 5.0]
        assert [[r.idle for r in a] for a in answers] == [[6.0, 6.0]] * 20
