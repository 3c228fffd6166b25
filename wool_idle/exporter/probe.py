"""Asking workers for their idle time: one probe, and a fan-out over many.

A probe never raises for its target's sake: whatever the call does (an
answer, an RPC error, an undecodable reply, a fault in the client, a channel
closed under it) becomes that target's ``ProbeResult`` (see ``outcome``).
Only the cancellation of the probe itself propagates.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence

from wool_idle.exceptions import WoolError
from wool_idle.exporter.coalesce import Coalescer, Results
from wool_idle.exporter.connections import CONNECT_TIMEOUT, ConnectionCache
from wool_idle.exporter.outcome import (
    ErrorReason,
    ProbeResult,
    classify,
    tls_mismatch,
    unanswered,
)
from wool_idle.exporter.target import Target
from wool_idle.logs import field_value
from wool_idle.worker import ClientTls

__all__ = ["AdhocProbesBusy", "ErrorReason", "Listener", "ProbeResult", "Prober"]
"""``ErrorReason`` and ``ProbeResult`` live in ``outcome``; they are named here too
because callers of the prober read them."""

log = logging.getLogger(__name__)

Listener = Callable[[Sequence[ProbeResult], float | None], None]
"""Told of every probe's result: a fan-out's with its duration, a ``/probe``'s with None."""


class AdhocProbesBusy(Exception):
    """``probe_adhoc`` refused: the cache's ad-hoc limit of probes of targets outside
    the configured set are already in flight (or their connects still pending)."""


class Prober:
    """Probes targets over the connections of one ``ConnectionCache``. A fan-out has
    at most ``concurrency`` calls in flight, and concurrent fan-outs share the one in
    flight (``coalesce``); probes of unconfigured targets in flight are at most the
    cache's ad-hoc limit (beyond it, ``AdhocProbesBusy``: never queued), and one whose
    worker did not answer keeps its place ``CONNECT_TIMEOUT`` longer, as long as
    the connect it started may still hold a socket.

    The prober keeps no metrics: ``subscribe`` a listener to count results.
    ``last`` holds the latest fan-out's result per configured target.
    """

    def __init__(
        self,
        *,
        tls: ClientTls | None,
        timeout: float,
        concurrency: int,
        connections: ConnectionCache | None = None,
    ) -> None:
        self.timeout = timeout
        self.connections = connections or ConnectionCache(tls=tls)
        self.last: dict[str, ProbeResult] = {}
        self.concurrency = concurrency
        self._adhoc_in_flight = 0
        self._rounds = Coalescer(self._run, longest=timeout)
        self._listeners: list[Listener] = []
        self._configured: Sequence[Target] | None = None
        self._logged: set[type[BaseException]] = set()
        self._took: dict[str, float] = {}
        """How long each target of the last round took when last asked (inf: it missed
        the deadline), which decides the order of the next round."""

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` with the results of every fan-out and ``/probe``."""
        self._listeners.append(listener)

    def configure(self, targets: Sequence[Target]) -> None:
        """Make ``targets`` the configured set (``ConnectionCache.keep``), at once and
        only when it is another sequence than last time: connections of targets that
        left the set close once no call uses them."""
        if targets is not self._configured:
            self.connections.keep(target.address for target in targets)
            self._configured = targets

    async def fan_out(self, targets: Sequence[Target], budget: float) -> list[ProbeResult]:
        """Probe ``targets`` (made the configured set) within ``budget`` seconds,
        sharing a fan-out in flight."""
        self.configure(targets)
        return await self._rounds(targets, budget)

    async def probe_adhoc(
        self, target: Target, deadline: float, *, detail: bool = False
    ) -> ProbeResult:
        """``probe`` for ``/probe``: the configured set is left as it is, and a
        connection opened for an unconfigured target is ad hoc (see ``connections``);
        ``detail`` as for ``classify``.
        ``AdhocProbesBusy`` if the target is unconfigured and the ad-hoc limit of
        such probes is in flight (see the class docstring)."""
        if self.connections.configured(target.address):
            result = await self.probe(target, deadline, adhoc=True, detail=detail)
        elif self._adhoc_in_flight >= self.connections.adhoc_limit:
            busy = AdhocProbesBusy(
                f"{self._adhoc_in_flight} probes of unconfigured targets or their connects"
            )
            if AdhocProbesBusy not in self._logged:
                self._logged.add(AdhocProbesBusy)
                log.warning("/probe answers 503 beyond %s in flight (--probe.adhoc-limit)", busy)
            raise busy
        else:
            self._adhoc_in_flight += 1
            up = False
            try:
                result = await self.probe(target, deadline, adhoc=True, detail=detail)
                up = result.up
            finally:
                self._free_adhoc_place(held=not up)
        self._announce([result], None)
        return result

    async def close(self) -> None:
        """Close every connection."""
        await self.connections.close()

    async def _run(self, targets: Sequence[Target], budget: float, results: Results) -> None:
        """One round: ``concurrency`` lanes take the targets in turn from one iterator
        (no task per target), each filling in its target's result as it comes.

        Lanes take first the targets that answered when last asked, fastest first,
        then those never asked (new, or left without time), then those that missed
        the deadline: a hung worker holds a lane up to the deadline, and as many of
        them as lanes, taken first, would leave every other target without time."""
        started = time.monotonic()
        deadline = started + budget
        took, unknown = self._took, self.timeout
        pending = iter(sorted(targets, key=lambda t: took.get(t.address, unknown)))
        probe = self.probe
        kept: dict[str, float] = {}

        async def lane() -> None:
            for target in pending:
                address = target.address
                asked = time.monotonic() < deadline
                results[address] = result = await probe(target, deadline)
                if asked:
                    missed = result.error is ErrorReason.DEADLINE
                    kept[address] = math.inf if missed else result.duration
                elif address in took:
                    kept[address] = took[address]

        await asyncio.gather(*(lane() for _ in range(min(self.concurrency, len(targets)))))
        self.last = results  # every lane is done: nothing writes to it any more
        self._took = kept
        self._announce(list(results.values()), time.monotonic() - started)

    async def probe(
        self, target: Target, deadline: float, *, adhoc: bool = False, detail: bool = False
    ) -> ProbeResult:
        """Ask one target for its idle time, giving up at ``deadline`` (monotonic);
        ``detail`` as for ``classify``.

        TLS or not: a discovered worker's record decides (``Target.secure``); a
        worker that serves TLS is not dialled without client TLS (reason ``tls``).
        Any other target uses TLS exactly when client TLS is configured.
        """
        started = time.monotonic()
        timeout = min(self.timeout, deadline - started)
        if timeout <= 0:
            return unanswered(target, 0.0)
        if target.secure and self.connections.tls is None:
            return tls_mismatch(target)
        try:
            lease = self.connections.lease(
                target.address, adhoc=adhoc, plaintext=target.secure is False
            )
        except Exception as error:  # a client that cannot be made is this target's failure
            self._log_unexpected(target, error)
            return classify(target, error, time.monotonic() - started, detail=detail)
        # Each branch classifies at once and keeps no reference to the error: an
        # error kept in this frame forms a cycle (error, traceback, frame) that keeps
        # the failed gRPC call, and so its channel reconnecting, alive until the
        # garbage collector runs, even after the channel is closed.
        healthy = False
        try:
            try:
                seconds = await lease.connection.idle_time(timeout=timeout)
            except asyncio.CancelledError as error:
                if _cancelled_by_caller():
                    raise
                # Cut off under us (its channel was closed), not cancelled by our caller.
                result = classify(target, error, time.monotonic() - started, detail=detail)
            except Exception as error:
                self._log_unexpected(target, error)
                result = classify(target, error, time.monotonic() - started, detail=detail)
            else:
                result = classify(target, seconds, time.monotonic() - started)
            healthy = result.up
        finally:
            self.connections.release(lease, healthy=healthy)
        return result

    def _announce(self, results: Sequence[ProbeResult], duration: float | None) -> None:
        for listener in self._listeners:
            listener(results, duration)

    def _free_adhoc_place(self, *, held: bool = False) -> None:
        """End an ad-hoc probe's hold on its place, at once, or ``held`` (the worker did
        not answer: its channel closed) ``CONNECT_TIMEOUT`` from now, when no connect
        the channel left pending can still hold a socket: else a flood of probes to
        addresses that drop handshakes keeps far more sockets than the limit."""
        if held:
            asyncio.get_running_loop().call_later(CONNECT_TIMEOUT, self._free_adhoc_place)
        else:
            self._adhoc_in_flight -= 1

    def _log_unexpected(self, target: Target, error: Exception) -> None:
        """Log a fault the client does not map, once per exception type (with traceback)."""
        if isinstance(error, WoolError):
            return
        kind = type(error)
        if kind in self._logged:
            log.debug("probe of %s raised %r", field_value(target.address), error)
            return
        self._logged.add(kind)
        log.warning("probe of %s raised %r", field_value(target.address), error, exc_info=error)


def _cancelled_by_caller() -> bool:
    """Whether the running task itself is being cancelled (not just a call inside it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
