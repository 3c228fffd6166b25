"""Before a group loses a worker, the workers its floor counts on must answer now.

The plan counts a worker toward its group's floor when its reading shows it
alive (``floor``), and a reading can be a scrape interval old: a worker that
crashed since still reads alive. It would hold the floor, and the group's other
workers, its only live ones, could be stopped, leaving the group empty. So in
a cycle with stops in a group, ``min_workers`` of its holders (``floor.holders``)
are asked their idle time first, a few more at once than are still needed and
in ``MAX_ROUNDS`` rounds at most. A holder counts when it answers a valid idle
time (busy or not) or that it predates the idle RPC (UNIMPLEMENTED); no answer,
a refusal (a worker stopping for another caller's stop), an invalid value or any
other error does not. A group where fewer than ``min_workers`` count keeps every
stop planned in it (``min_workers``): its floor is unknown, and what is unknown
never leads to a stop. Its next read shows the gone worker down, or the stops
go ahead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Final

from wool_idle.autoscaler.actuator import CHANNEL_OPTIONS, ActionSettings
from wool_idle.autoscaler.floor import holders
from wool_idle.autoscaler.leaving import unless_leaving
from wool_idle.autoscaler.policy import Plan
from wool_idle.autoscaler.verdicts import Verdict
from wool_idle.contract import valid_idle
from wool_idle.exceptions import IdleUnavailable
from wool_idle.logs import bounded, field_value
from wool_idle.worker import WorkerConnection

log = logging.getLogger("wool_idle.autoscaler")

Answers = Callable[[str], Awaitable[bool]]
"""Whether the worker at a label answers now (see the module docstring)."""
MAX_ROUNDS: Final = 3
"""Rounds of questions per group; holders not asked by then count as not answering."""
ASKED_AT_ONCE: Final = 64
"""Holders asked at once, over every group of the cycle."""


async def answers(worker: str, settings: ActionSettings) -> bool:
    """Whether ``worker`` answers its idle RPC now (within ``settings.rpc_timeout``)
    with a valid idle time, or as a worker that predates the RPC."""
    try:
        connection = WorkerConnection(worker, tls=settings.tls, options=CHANNEL_OPTIONS)
    except Exception:  # not an address after all, unreadable TLS files
        return False
    try:
        report = await connection.idle_report(timeout=settings.rpc_timeout)
    except IdleUnavailable:
        return True
    except Exception:  # no answer, a refusal, a reply that does not decode
        return False
    finally:
        await connection.close()
    return valid_idle(report.seconds)


async def confirm_floors(
    plan: Plan, min_workers: int, ask: Answers, leaving: asyncio.Event | None = None
) -> Plan:
    """``plan``, with every stop of a group whose holders did not confirm its floor
    now held back as ``min_workers`` (logged). Raises nothing but cancellation: an
    ``ask`` that raises counts as a holder not answering. Once ``leaving`` is set (the
    daemon shutting down: it starts no stop), the questions still open are given up
    and every stop is held back: hung holders never hold up the exit."""
    stops = plan.stops
    if not stops or min_workers == 0:
        return plan
    by_group = holders(plan.decisions, plan.state.retiring)
    at_once = asyncio.Semaphore(ASKED_AT_ONCE)

    async def asked(worker: str) -> bool:
        async with at_once:
            try:
                return await ask(worker)
            except Exception:
                log.exception("worker %s: asking it for the floor failed", field_value(worker))
                return False

    groups = list(dict.fromkeys(d.group for d in stops))
    checks = (_confirmed(g, by_group.get(g, []), min_workers, asked) for g in groups)
    confirmed = await unless_leaving(leaving, asyncio.gather(*checks))
    if confirmed is None:
        log.info("shutting down: floors left unconfirmed, no worker stopped this cycle")
    unconfirmed = (
        set(groups)
        if confirmed is None
        else {g for g, ok in zip(groups, confirmed, strict=True) if not ok}
    )
    if not unconfirmed:
        return plan
    return replace(
        plan,
        decisions=tuple(
            replace(d, verdict=Verdict.MIN_WORKERS)
            if d.verdict is Verdict.STOP and d.group in unconfirmed
            else d
            for d in plan.decisions
        ),
    )


async def _confirmed(
    group: tuple[str, ...], held_by: Sequence[str], needed: int, asked: Answers
) -> bool:
    """Whether ``needed`` of ``held_by`` answer: asked in rounds, each asking twice as
    many as are still needed; logged when not."""
    counted, left, silent = 0, list(held_by), []
    for _ in range(MAX_ROUNDS):
        if counted >= needed or not left:
            break
        batch, left = left[: 2 * (needed - counted)], left[2 * (needed - counted) :]
        answered = await asyncio.gather(*(asked(w) for w in batch))
        counted += sum(answered)
        silent += [w for w, ok in zip(batch, answered, strict=True) if not ok]
    if counted >= needed:
        return True
    log.warning(
        "group %s: %d of the %d workers its --min-workers %d counts on answered now, so "
        "it loses no worker this cycle (not answering: %s)",
        field_value(bounded(",".join(group))) if group else "(all)",  # a source's text
        counted,
        len(held_by),
        needed,
        bounded(", ".join(field_value(w) for w in silent) or "none asked"),
    )
    return False
