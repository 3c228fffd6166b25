"""The HTTP client session of a ``--http.config.file``.

``http_session`` gives an ``aiohttp.ClientSession`` that applies the config
to every request: the ``Authorization`` header (secret files read again, off
the event loop, on a daemon thread: a read stalled on its file system never holds
up the daemon's exit), and only to the origin the config is for, so a redirect to
another host never carries the credentials; the TLS context, whose files are
followed as they rotate; and ``follow_redirects: false``, under which a
redirect is a failure (``RedirectRefused``) as it is for Prometheus.

The URLs it is given carry no userinfo (see ``urls``).
"""

from __future__ import annotations

from typing import Final

import aiohttp
from aiohttp import ClientHandlerType, ClientRequest, ClientResponse, hdrs
from yarl import URL

from wool_idle.daemon_thread import on_daemon_thread
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


async def _header(credentials: Credentials) -> str:
    try:
        if credentials.secret.path is None:
            return credentials.header()
        return await on_daemon_thread("wool-idle-credentials", credentials.header)
    except OSError as error:
        raise CredentialsUnavailable(str(error)) from None


def http_session(config: HttpClientConfig, *, origin: str) -> aiohttp.ClientSession:
    """A session applying ``config`` to its requests; credentials go to ``origin``
    (a URL without userinfo: its scheme, host and port count) only."""
    connector = aiohttp.TCPConnector(ssl=config.ssl_context or True)
    return aiohttp.ClientSession(
        connector=connector, middlewares=(_ApplyConfig(config, URL(origin).origin()),)
    )
