"""The HTTP client session of a ``--http.config.file``.

``http_session`` gives an ``aiohttp.ClientSession`` that applies the config
to every request: the ``Authorization`` header (secret files read again, off
the event loop, on one daemon thread: a read stalled on its file system never
holds up the daemon's exit, and the requests after it wait for it, each until its
own timeout, rather than start a thread each), and only to the origin the config
is for, so a redirect to another host never carries the credentials; the TLS
context, whose files are followed as they rotate; and ``follow_redirects: false``,
under which a redirect is a failure (``RedirectRefused``) as it is for Prometheus.
Its name lookups run on daemon threads (``DaemonResolver``): aiohttp's own run on
the loop's default executor, which ``asyncio.run`` waits for at exit, so a DNS
server that does not answer held up the exit of a daemon signalled during a read
(cut short: ``autoscaler.leaving``) for as long as the lookup hung.

A session applies one config for good. ``LiveSession`` follows a config that
changes (``LiveClientConfig``) with a session per version: ``lease`` gives the
session of the version in force when the lease begins, for the whole lease (a
read of several requests makes them all with one config); the first lease after
a new version opens its session, and a session no longer in force is closed as
its last lease ends, its kept-alive connections with it. A new session rather
than a new value read by the middleware: the TLS context is the connector's,
and a connection kept alive carries the TLS of its handshake (its CA, its client
certificate) into every later request, whatever the middleware reads.

The URLs it is given carry no userinfo (see ``urls``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Final

import aiohttp
from aiohttp import ClientHandlerType, ClientRequest, ClientResponse, hdrs
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from wool_idle.daemon_thread import DaemonThreads
from wool_idle.web.client_config import Credentials, HttpClientConfig
from wool_idle.web.urls import redact

REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


class CredentialsUnavailable(aiohttp.ClientError):
    """A secret file of the config could not be read for this request."""


class RedirectRefused(aiohttp.ClientError):
    """The server redirected and the config says ``follow_redirects: false``."""


class _ApplyConfig:
    """Client middleware: credentials to ``origin`` only; redirects per the config."""

    def __init__(self, config: HttpClientConfig, origin: URL) -> None:
        self.config, self.origin = config, origin

    async def __call__(self, request: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        credentials = self.config.credentials
        if credentials is not None and request.url.origin() == self.origin:
            request.headers[hdrs.AUTHORIZATION] = await _header(credentials)
        response = await handler(request)
        if response.status in REDIRECTS and not self.config.follow_redirects:
            response.release()
            location = redact(response.headers.get(hdrs.LOCATION, "?"))
            raise RedirectRefused(
                f"HTTP {response.status} to {location} not followed (follow_redirects: false)"
            )
        return response


_SECRET_READS: Final = DaemonThreads(1, "wool-idle-credentials")
"""The thread that reads secret files. One: while a read stalls (a hung mount), each
request that times out gives up its own read, which then never starts, so no thread
is added however many requests time out (a thread per read piled up one a cycle for
as long as the mount hung)."""


async def _header(credentials: Credentials) -> str:
    try:
        if credentials.secret.path is None:
            return credentials.header()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_SECRET_READS, credentials.header)
    except OSError as error:
        raise CredentialsUnavailable(str(error)) from None
    except RuntimeError as error:  # no thread left (a pids limit): this request's failure
        why = f"cannot start a thread to read its secret file: {error}"
        raise CredentialsUnavailable(why) from None


_LOOKUPS: Final = DaemonThreads(4, "wool-idle-http-resolve")
"""The threads that run the sessions' name lookups: a lookup that hangs never holds up
the exit; the lookups of requests given up meanwhile never start."""


class DaemonResolver(AbstractResolver):
    """aiohttp's ``ThreadedResolver`` (``getaddrinfo``, the addresses a stream socket
    can connect to), on ``_LOOKUPS``' daemon threads rather than the default executor."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        loop = asyncio.get_running_loop()
        flags = socket.AI_ADDRCONFIG
        infos = await loop.run_in_executor(
            _LOOKUPS, lambda: socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, 0, flags)
        )
        found: list[ResolveResult] = []
        for kind, _, proto, _, address in infos:
            if kind == socket.AF_INET6 and len(address) < 3:  # no IPv6 in this Python
                continue
            host_found, port_found = str(address[0]), int(address[1])
            if len(address) == 4 and address[3]:  # a link-local address's zone, named
                numeric = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
                host_found, named_port = socket.getnameinfo(
                    (host_found, port_found, *address[2:]), numeric
                )
                port_found = int(named_port)
            flags_found = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
            found.append(
                ResolveResult(
                    hostname=host,
                    host=host_found,
                    port=port_found,
                    family=kind,
                    proto=proto,
                    flags=flags_found,
                )
            )
        return found

    async def close(self) -> None:
        """Nothing to close: the threads are shared and stay."""


def http_session(config: HttpClientConfig, *, origin: str) -> aiohttp.ClientSession:
    """A session applying ``config`` to its requests; credentials go to ``origin``
    (a URL without userinfo: its scheme, host and port count) only; its name lookups
    on daemon threads (``DaemonResolver``)."""
    connector = aiohttp.TCPConnector(ssl=config.ssl_context or True, resolver=DaemonResolver())
    return aiohttp.ClientSession(
        connector=connector, middlewares=(_ApplyConfig(config, URL(origin).origin()),)
    )


@dataclass(eq=False)
class _Version:
    """The session of one config, and the leases holding it."""

    config: HttpClientConfig
    session: aiohttp.ClientSession
    leases: int = 0


class LiveSession:
    """The sessions of the config ``in_force`` returns (a new object: a new version),
    its credentials to ``origin`` only. Closing it (``close``, or leaving its ``async
    with``) closes the session in force; one still leased is closed as its lease ends."""

    def __init__(self, in_force: Callable[[], HttpClientConfig], *, origin: str) -> None:
        self._in_force, self._origin = in_force, origin
        self._current: _Version | None = None
        self._closed = False

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[aiohttp.ClientSession]:
        """The session of the config in force now, for the lease (``RuntimeError``
        once closed)."""
        if self._closed:
            raise RuntimeError("the HTTP client sessions are closed")
        config = self._in_force()
        version, old = self._current, None
        if version is None or version.config is not config:
            old, version = version, _Version(config, http_session(config, origin=self._origin))
            self._current = version
        # Counted before the old one is closed: a lease begun during that close may put
        # yet another version in force, and closes this one unless it is leased.
        version.leases += 1
        try:
            if old is not None and old.leases == 0:
                await old.session.close()
            yield version.session
        finally:
            version.leases -= 1
            if version is not self._current and version.leases == 0:
                await version.session.close()

    async def close(self) -> None:
        """Close the session in force (an earlier one closes as its last lease ends)."""
        self._closed = True
        version, self._current = self._current, None
        if version is not None and version.leases == 0:
            await version.session.close()

    async def __aenter__(self) -> LiveSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
