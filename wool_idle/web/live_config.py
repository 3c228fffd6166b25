"""The web config in force, following ``--web.config.file`` as it changes.

As exporter-toolkit does, the daemons follow their web config file without a
restart: a user added, removed or given a new hash, new response headers, new
TLS settings. Unlike exporter-toolkit, which answers 500 while its file is
invalid, a file that does not load keeps the last good config in force (how the
file is followed: ``followed_config``; a version that does not load: not YAML, a
bad key or hash, a certificate that does not fit its key, the file gone).

A version that would let in what the config in force keeps out is refused the
same way and takes a restart (see ``weakening``): turning TLS on or off (the
listener was opened with or without it), turning basic auth off, asking less of
client certificates, trusting the system's CAs instead of ``client_ca_file``, a
lower least TLS version, cipher suites or key exchanges that were not allowed, a
response header removed or emptied (and it is not tried again until the file
changes). A writer that stops half way (a full disk, a killed ``cat >``) leaves a
file that can only close the endpoints further (a header value cut short is the
one thing taken as written).

``reload`` (SIGHUP, ``POST /-/reload``) reads the file and its TLS files at once;
new TLS settings apply to new connections, open connections keep theirs; the
garbage of TLS handshakes that failed is collected as ``handshake_garbage`` says.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from typing import Final

from wool_idle.daemon_thread import on_daemon_thread
from wool_idle.web.config import WebConfig, WebConfigError, web_config_of
from wool_idle.web.followed_config import FAILED_RETRY, FollowedConfig, read_config_file
from wool_idle.web.tls_context import ContextInForce, ReloadingContext
from wool_idle.web.weakening import weakening
from wool_idle.worker.tls import RECHECK_INTERVAL

THREAD: Final = "web config"


class LiveWebConfig(FollowedConfig[WebConfig]):
    """``current`` is the config in force: ``first`` for good, or (``load``) the
    file's, then each good new version of it, no weaker, while ``follow`` runs."""

    NAME = "web config"
    ERROR = WebConfigError
    log = logging.getLogger(__name__)

    @classmethod
    def load(
        cls,
        path: str,
        *,
        interval: float = RECHECK_INTERVAL,
        retry: float = FAILED_RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> LiveWebConfig:
        """The file's config, followed from now on (looked at every ``interval``, a
        refused version tried again after ``retry``, as ``clock`` counts);
        ``WebConfigError`` if it does not load."""
        try:
            content = read_config_file(path)
        except OSError as error:
            raise WebConfigError(str(error)) from None
        live = cls(web_config_of(content, path))
        live._follow_file(path, content, interval=interval, retry=retry, clock=clock)
        return live

    def server_context(self) -> ssl.SSLContext | None:
        """The TLS context to serve with: each new connection gets the TLS context
        in force when it arrives. None when the config serves plain HTTP."""
        if self.current.ssl_context is None:
            return None
        return ContextInForce(self._tls_in_force)

    def _tls_in_force(self) -> ssl.SSLContext:
        context = self.current.ssl_context
        assert context is not None  # a version that turns TLS off is refused
        return context

    async def reload(self) -> str:
        """Read the file now and put its version in force if good and no weaker
        (``reload_file``), then the TLS files of the config in force
        (``ReloadingContext.force``), whether or not the file loaded. Why the file or
        its TLS files did not load (each naming its file; what was in force stays),
        or ``""`` when they did."""
        failed = await self.reload_file()
        failures = [f"web config {failed}" if failed else ""]
        context = self.current.ssl_context
        if isinstance(context, ReloadingContext):  # read even when the file was refused
            failures.append(await on_daemon_thread(THREAD, context.force))
        return "; ".join(failure for failure in failures if failure)

    def _parse(self, content: bytes) -> WebConfig:
        return web_config_of(content, self.path or "")

    def _refusal(self, config: WebConfig) -> str | None:
        weaker = weakening(self.current, config)
        return None if weaker is None else f"{weaker} takes a restart"
