"""The autoscaler process: from its parsed settings to the daemon serving its
``/metrics`` until a signal, or to one cycle (``--once``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Final

import aiohttp

from wool_idle.autoscaler.app import create_app
from wool_idle.autoscaler.daemon import ActionSettings, Autoscaler, exit_wait
from wool_idle.autoscaler.metrics import AutoscalerMetrics
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.settings import DaemonSettings, SourceSettings
from wool_idle.autoscaler.sources import Source
from wool_idle.autoscaler.state_file import StateFile
from wool_idle.cli.serve import serve_until_signal
from wool_idle.contract import RETIRED_TIMESTAMP
from wool_idle.discovery.drop import Dropper
from wool_idle.discovery.spec import DiscoveryKind, DiscoverySpec
from wool_idle.web.client_session import LiveSession
from wool_idle.web.followed_files import followed_files
from wool_idle.web.live_client_config import LiveClientConfig
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.metrics import process_registry, register_build_info
from wool_idle.web.reload import Reloads
from wool_idle.web.site import serve_app

log = logging.getLogger("wool_idle.autoscaler")

EXIT_SOURCE_FAILED: Final = 1


def local_namespaces(specs: tuple[DiscoverySpec, ...]) -> list[str]:
    """The namespaces of the ``local:`` discoveries among ``specs``."""
    return [s.namespace for s in specs if s.kind is DiscoveryKind.LOCAL]


class LeasedSource:
    """A source read through ``sessions``: each read through the session of the
    client config in force when it begins (``make`` gives the source of a session,
    made again for each new session). ``opened`` makes one."""

    def __init__(
        self,
        sessions: LiveSession,
        make: Callable[[aiohttp.ClientSession], Source],
        made: tuple[aiohttp.ClientSession, Source],
    ) -> None:
        self._sessions, self._make, self._made = sessions, make, made
        self.description, self.empty_hint = made[1].description, made[1].empty_hint

    @classmethod
    async def opened(
        cls, sessions: LiveSession, make: Callable[[aiohttp.ClientSession], Source]
    ) -> LeasedSource:
        """The source of the session in force now (opened if need be)."""
        async with sessions.lease() as session:
            return cls(sessions, make, (session, make(session)))

    async def read(self) -> list[Reading]:
        async with self._sessions.lease() as session:
            if self._made[0] is not session:
                self._made = session, self._make(session)
            return await self._made[1].read()


class FirstRead:
    """A source that remembers whether a read has succeeded yet (readiness)."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.description, self.empty_hint = source.description, source.empty_hint
        self.succeeded = False

    async def read(self) -> list[Reading]:
        readings = await self.source.read()
        self.succeeded = True
        return readings

    def not_ready(self) -> str | None:
        """None once a read has succeeded, else why the autoscaler is not ready."""
        return None if self.succeeded else "no successful read of the source yet"


def _dropper(specs: tuple[DiscoverySpec, ...]) -> Dropper | None:
    """The drops to publish, given any discovery; LAN namespaces are logged as having
    none."""
    for spec in specs:
        if spec.kind is DiscoveryKind.LAN:
            log.info(
                "%s: LAN discovery has no drop from another process; stopped workers are "
                "shown by %s only",
                spec,
                RETIRED_TIMESTAMP,
            )
    lan = [s.namespace for s in specs if s.kind is DiscoveryKind.LAN]
    return Dropper(local_namespaces(specs), lan=lan) if specs else None


async def run_daemon(
    daemon: DaemonSettings,
    source: SourceSettings,
    http: LiveClientConfig,
    policy: PolicySettings,
    action: ActionSettings,
    web: LiveWebConfig | None,
    state_file: StateFile | None,
) -> int:
    registry = process_registry()
    register_build_info(registry)
    origin = source.prometheus_url or source.metrics_url
    async with LiveSession(lambda: http.current, origin=origin) as sessions:
        watched = FirstRead(
            await LeasedSource.opened(
                sessions,
                lambda session: source.reader(session, policy.group_by, policy.max_staleness),
            )
        )
        autoscaler = Autoscaler(
            source=watched,
            policy=policy,
            action=action,
            metrics=AutoscalerMetrics(registry, group_by=policy.group_by),
            dropper=_dropper(daemon.wool_discovery),
            state_file=state_file,
        )
        if daemon.once:
            return await _once(autoscaler)
        log.info(
            "autoscaler reading %s, max idle %.1fs%s",
            watched.description,
            policy.max_idle,
            " (dry run)" if policy.dry_run else "",
        )
        reloads = Reloads(followed_files(web, http, action.tls))
        app = create_app(autoscaler, registry, watched.not_ready, reloads)

        async def until_stopped() -> None:
            following = asyncio.ensure_future(http.follow())
            try:
                await autoscaler.run(daemon.interval)
            finally:
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await following
                await reloads.close()  # a POST /-/reload it holds would hold the server

        return await serve_until_signal(
            "autoscaler",
            serve_app(app, daemon.web_listen_address, web, path="/metrics"),
            until_stopped,
            stop=_leaving(autoscaler, "autoscaler"),
            reload=reloads.request,
        )


def _leaving(autoscaler: Autoscaler, name: str) -> Callable[[], None]:
    """What SIGTERM and SIGINT do: log that ``name`` leaves (the stops it sent may hold
    it up to ``exit_wait``: said at once, not only once it has stopped), and start no
    more stops."""
    wait = exit_wait(autoscaler.action.grace)

    def leave() -> None:
        log.info(
            "%s: signalled, sending no more stops; those sent may end (%gs at most)", name, wait
        )
        autoscaler.stopping.set()

    return leave


async def _once(autoscaler: Autoscaler) -> int:
    """``--once``: one cycle, 0, or ``EXIT_SOURCE_FAILED`` if the source failed.
    SIGTERM and SIGINT during it start no more stops and let those sent end (up to
    their deadline), as the daemon's do: a wool worker whose stop call is cut never
    exits."""
    loop = asyncio.get_running_loop()
    leave = _leaving(autoscaler, "autoscaler --once")
    signals = (signal.SIGTERM, signal.SIGINT)
    for signum in signals:
        loop.add_signal_handler(signum, leave)
    try:
        return 0 if await autoscaler.once() else EXIT_SOURCE_FAILED
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
