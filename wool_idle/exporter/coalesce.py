"""Concurrent scrapes share one round of probes.

The first scrape starts a round; scrapes arriving while it runs join it
instead of starting their own, so an HA pair of Prometheus servers does not
double the load on workers. A scrape joins only a round given at least its own
budget: one with a shorter budget (a scraper announcing a short timeout) would
cut its probes short, so the scrape starts a round of its own, given the longest
budget any scrape may have, which every later scrape joins (were it given the
scrape's own, scrapes announcing ever longer timeouts would start a round each:
one request, a probe of every worker). Every scrape waits at most its own
budget: a target the round has not heard from by then counts as a missed
deadline in that scrape's answer (no idle value, never an old one).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from wool_idle.exporter.outcome import ProbeResult, unanswered
from wool_idle.exporter.target import Target

log = logging.getLogger(__name__)

Results = dict[str, ProbeResult]
"""A round's results so far, by target address."""
RunRound = Callable[[Sequence[Target], float, Results], Awaitable[None]]
"""Probe the targets within the budget, filling in the results as they come."""


@dataclass
class _Round:
    targets: Sequence[Target]
    budget: float
    results: Results = field(default_factory=dict)
    task: asyncio.Future[None] = field(init=False)

    def answers(self, budget: float) -> list[ProbeResult]:
        """A result per target; one not heard from yet is a missed deadline."""
        results = self.results
        return [results.get(t.address) or unanswered(t, budget) for t in self.targets]


class Coalescer:
    """Runs ``run`` for one scrape at a time, sharing the round in flight; ``longest``
    is the longest budget a scrape may have (the exporter's ``--timeout``)."""

    def __init__(self, run: RunRound, *, longest: float) -> None:
        self._run = run
        self.longest = longest
        self._in_flight: _Round | None = None

    async def __call__(self, targets: Sequence[Target], budget: float) -> list[ProbeResult]:
        """The results of a round over ``targets`` within ``budget`` seconds.

        With no round in flight, the scrape starts one with its own ``budget`` and
        waits for all of it (each probe is bounded by the budget). Over a round
        given less, it starts one given ``longest`` (or ``budget`` if more); a scrape
        that joins a round or starts a longer one waits at most ``budget``. A
        round that fails, or a scrape cancelled while waiting, never cancels the
        round.
        """
        joined = self._in_flight
        if joined is not None and joined.budget >= budget:
            await asyncio.wait((joined.task,), timeout=budget)
            return joined.answers(budget)
        given = budget if joined is None else max(budget, self.longest)
        started = self._in_flight = _Round(targets, given)
        started.task = asyncio.ensure_future(self._run(targets, given, started.results))
        started.task.add_done_callback(functools.partial(self._finished, started))
        await asyncio.wait((started.task,), timeout=None if given == budget else budget)
        return started.answers(budget)

    def _finished(self, finished: _Round, task: asyncio.Future[None]) -> None:
        if self._in_flight is finished:  # not already superseded by a longer round
            self._in_flight = None
        if not task.cancelled() and task.exception() is not None:
            log.error("probe round failed", exc_info=task.exception())
