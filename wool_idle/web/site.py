"""Serving an aiohttp app on ``host:port`` or ``unix:/path`` with a web config.

The base URL of a Unix socket is ``http+unix://`` (``https+unix://`` with
TLS) followed by the socket path with ``/`` percent-encoded, the form of
requests-unixsocket and docker-py: ``unix:/run/wool.sock`` serves at
``http+unix://%2Frun%2Fwool.sock``. With curl: ``curl --unix-socket
/run/wool.sock http://localhost/metrics``.

The web config's ``http2`` changes nothing here: aiohttp serves HTTP/1.1
only, over TLS too (as exporter-toolkit does with ``http2: false``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from wool_idle.logs import OncePerKind
from wool_idle.unix_socket import claim_unix_socket
from wool_idle.web.basicauth import BasicAuth
from wool_idle.web.config import WebConfig
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.unread import UnreadAnswers
from wool_idle.worker.address import UNIX_PREFIX, split_host_port

EXPORTER_PORT: Final = 9478
AUTOSCALER_PORT: Final = 9479
"""Default HTTP ports. They clash with none of Prometheus 9090, Alertmanager 9093,
node_exporter 9100, blackbox_exporter 9115 and OpenTelemetry 9464."""
EXPORTER_LISTEN: Final = f"127.0.0.1:{EXPORTER_PORT}"
AUTOSCALER_LISTEN: Final = f"127.0.0.1:{AUTOSCALER_PORT}"
EXPORTER_METRICS_URL: Final = f"http://{EXPORTER_LISTEN}/metrics"
"""Where the autoscaler reads by default: the exporter's default address."""
REQUEST_WAIT: Final = 75.0
"""Seconds a connection is kept without a whole request: one that sends none, or
sends its head a byte at a time (slowloris), or stays idle between requests is
closed (aiohttp keeps it an hour: anyone who can connect could hold every file
descriptor). Clients such as Prometheus reconnect. Also the seconds a client has
to take an answer (``UnreadAnswers``)."""
LEAVING_ANSWER_WAIT: Final = 1.0
"""Seconds a daemon, leaving, lets the answers under way end before it cuts them: a
``/metrics`` scrape that waits on workers that do not answer (up to its timeout) never
holds up SIGTERM (aiohttp waited 60 s for it)."""


def _malformed_request(record: logging.LogRecord) -> bool:
    """Whether ``record`` is aiohttp's report of a request it could not parse."""
    return record.exc_info is not None and isinstance(record.exc_info[1], HttpProcessingError)


MALFORMED_REQUESTS_ONCE: Final = OncePerKind(_malformed_request)
"""aiohttp logs a traceback for each malformed HTTP request, and anyone who can
connect can send them: the first of each kind is logged, the rest only at debug
level. (A handler's own exception, a 500, is logged every time.)"""


@contextlib.asynccontextmanager
async def serve_app(
    app: web.Application,
    listen: str,
    config: LiveWebConfig | None = None,
    *,
    path: str = "",
    request_wait: float = REQUEST_WAIT,
) -> AsyncIterator[str]:
    """Serve ``app`` on ``listen`` (``host:port``, port 0 for any, or ``unix:/path``)
    with the TLS, basic auth and headers of ``config`` in force (followed as its
    file changes), yielding the URL of ``path`` (the base URL by default); stop
    on exit. A connection without a whole request for ``request_wait`` seconds is
    closed, and one that still holds unsent bytes ``request_wait`` seconds after an
    answer began is aborted; on exit, answers under way get ``LEAVING_ANSWER_WAIT``
    seconds, then are cut. Raises ``OSError`` if the address cannot be bound."""
    server_log = logging.getLogger("aiohttp.server")
    if MALFORMED_REQUESTS_ONCE not in server_log.filters:
        server_log.addFilter(MALFORMED_REQUESTS_ONCE)
    config = config or LiveWebConfig(WebConfig())
    if config.followed or config.current.users:
        app.middlewares.append(BasicAuth(lambda: config.current.users).middleware)
    if config.followed or config.current.headers:
        app.on_response_prepare.append(_with_headers(config))
    unread = UnreadAnswers(request_wait)
    app.on_response_prepare.append(unread)
    runner = web.AppRunner(
        app, access_log=None, keepalive_timeout=request_wait, shutdown_timeout=LEAVING_ANSWER_WAIT
    )
    await runner.setup()
    try:
        base = await _start(runner, listen, config.server_context())
    except BaseException:
        await runner.cleanup()
        raise
    following = asyncio.ensure_future(config.follow())
    try:
        yield base + path
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        await runner.cleanup()
        unread.close()
        if listen.startswith(UNIX_PREFIX):  # ours: we bound it
            with contextlib.suppress(FileNotFoundError):
                os.unlink(listen.removeprefix(UNIX_PREFIX))


def _with_headers(
    config: LiveWebConfig,
) -> Callable[[web.Request, web.StreamResponse], Awaitable[None]]:
    """A response-prepare hook setting the headers in force on every response (401s
    and 404s too)."""

    async def add(request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(config.current.headers)

    return add


async def _start(runner: web.AppRunner, listen: str, ssl_context: ssl.SSLContext | None) -> str:
    scheme = "https" if ssl_context else "http"
    site: web.BaseSite
    if listen.startswith(UNIX_PREFIX):
        path = listen.removeprefix(UNIX_PREFIX)
        claim_unix_socket(path)
        site = web.UnixSite(runner, path, ssl_context=ssl_context)
        try:
            await site.start()
        except OSError as error:  # bind's own names no path (a missing directory)
            raise OSError(error.errno, f"{path}: {error.strerror or error}") from None
        return f"{scheme}+unix://{urllib.parse.quote(path, safe='')}"
    host, port = split_host_port(listen)
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    return f"{scheme}://{_bound(runner, listen)}"


def _bound(runner: web.AppRunner, requested: str) -> str:
    """The first address bound, as a URL's host and port: an IPv6 zone (a link-local
    address's) as RFC 6874 writes it, ``[fe80::1%25eth0]`` (without it, nothing
    reaches the address)."""
    for address in runner.addresses:
        host, port = address[0], address[1]
        if ":" not in host:
            return f"{host}:{port}"
        if len(address) > 3 and address[3]:  # the zone: its interface's name, or index
            zone = str(address[3])
            with contextlib.suppress(OSError):
                zone = socket.if_indextoname(address[3])
            host = f"{host}%25{zone}"
        return f"[{host}]:{port}"
    return requested
