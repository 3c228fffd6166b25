"""The HTTP client config in force, following ``--http.config.file`` as it changes.

Prometheus reads its scrape configs' ``http_config`` again on reload; the
autoscaler follows its ``--http.config.file`` as ``live_config`` follows
``--web.config.file`` (how: ``followed_config``). A version that does not load
(not YAML, a bad key, a file it names missing, credentials in both the source URL
and the file) keeps the last good config in force. ``reload`` (SIGHUP, ``POST
/-/reload``) reads the file at once, then the TLS files and the secret file of
the config in force.

Unlike the web config, no version that loads is refused as weaker: the client
config decides what the autoscaler sends to its source, and a version cut short
at worst sends wrong credentials (a refused read: nobody is stopped).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from wool_idle.daemon_thread import on_daemon_thread
from wool_idle.web.client_config import ClientConfigError, HttpClientConfig, parse_client_config
from wool_idle.web.followed_config import FAILED_RETRY, FollowedConfig, read_config_file
from wool_idle.web.tls_context import ReloadingContext
from wool_idle.web.yaml_fields import parse_config_content
from wool_idle.worker.tls import RECHECK_INTERVAL

Adapt = Callable[[HttpClientConfig], HttpClientConfig]
"""What the daemon adds to each version of the file (the source URL's userinfo);
raises ``ClientConfigError`` when the version cannot take it."""
THREAD: Final = "http config"


class LiveClientConfig(FollowedConfig[HttpClientConfig]):
    """``current`` is the config in force: ``first`` for good, or (``load``) the
    file's through ``adapt``, then each good new version of it while ``follow`` runs."""

    NAME = "--http.config.file"
    ERROR = ClientConfigError
    log = logging.getLogger(__name__)

    def __init__(self, first: HttpClientConfig, adapt: Adapt | None = None) -> None:
        super().__init__(first)
        self._adapt = adapt or _unchanged

    @classmethod
    def load(
        cls,
        path: str,
        adapt: Adapt | None = None,
        *,
        interval: float = RECHECK_INTERVAL,
        retry: float = FAILED_RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> LiveClientConfig:
        """The file's config (through ``adapt``), followed from now on (looked at every
        ``interval``, a refused version tried again after ``retry``, as ``clock``
        counts); ``ClientConfigError`` if it does not load."""
        try:
            content = read_config_file(path)
        except OSError as error:
            raise ClientConfigError(str(error)) from None
        adapt = adapt or _unchanged
        live = cls(_config_of(content, path, adapt), adapt)
        live._follow_file(path, content, interval=interval, retry=retry, clock=clock)
        return live

    async def reload(self) -> str:
        """Read the file now and put its version in force if good (``reload_file``),
        then the TLS files and the secret file of the config in force, whether or not
        the file loaded. Why one did not load (naming its file; what was in force
        stays), or ``""``."""
        failures = [await self.reload_file()]
        config = self.current
        if isinstance(config.ssl_context, ReloadingContext):
            failures.append(await on_daemon_thread(THREAD, config.ssl_context.force))
        if config.credentials is not None and config.credentials.secret.path is not None:
            try:
                await on_daemon_thread(THREAD, config.credentials.header)
            except OSError as error:
                failures.append(str(error))
        return "; ".join(failure for failure in failures if failure)

    def _parse(self, content: bytes) -> HttpClientConfig:
        return _config_of(content, self.path or "", self._adapt)


def _config_of(content: bytes, path: str, adapt: Adapt) -> HttpClientConfig:
    """The config of ``content``, read from ``path``, through ``adapt``;
    ``ClientConfigError`` naming the key that is wrong."""
    return adapt(parse_config_content(content, path, parse_client_config, ClientConfigError))


def _unchanged(config: HttpClientConfig) -> HttpClientConfig:
    return config
