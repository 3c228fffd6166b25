"""A daemon's forced re-read (SIGHUP, ``POST /-/reload``) of the files it follows,
read now rather than at their next look:

- ``--web.config.file`` and the TLS files it names (``LiveWebConfig.reload``);
- ``--http.config.file``'s ``tls_config`` files, and its secret file (read for
  every request anyway: read here to say whether it can be), the autoscaler's;
- the client TLS files it dials workers with (``--tls-*``, ``ChannelPool.force``).

Each that does not load keeps its last good version, the others are taken. The
files are read on daemon threads, never on the event loop. The config files
themselves are read at start only, ``--web.config.file`` aside.
"""

from __future__ import annotations

import logging

from wool_idle.daemon_thread import on_daemon_thread
from wool_idle.web.client_config import HttpClientConfig
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.reload import Reread
from wool_idle.web.tls_context import ReloadingContext
from wool_idle.worker import ClientTls
from wool_idle.worker.channels import pool

log = logging.getLogger(__name__)


def followed_files(
    web: LiveWebConfig | None, http: HttpClientConfig | None, tls: ClientTls | None
) -> Reread:
    """The re-read of the files ``web``, ``http`` and ``tls`` name (None: the daemon
    has none): ``""`` when all loaded, else the failures, each naming its file, on
    one line (logged too)."""

    async def reread() -> str:
        failures = []
        if web is not None and web.followed:
            failures.append(await web.reload())
        if http is not None and isinstance(http.ssl_context, ReloadingContext):
            failed = await on_daemon_thread("wool-idle-reload", http.ssl_context.force)
            failures.append(failed and f"--http.config.file {failed}")
        credentials = None if http is None else http.credentials
        if credentials is not None and credentials.secret.path is not None:
            try:
                await on_daemon_thread("wool-idle-reload", credentials.header)
            except OSError as error:
                failures.append(f"--http.config.file {error}")
        if tls is not None:
            failed = await pool().force(tls)
            failures.append(failed and f"worker client {failed}")
        failed = "; ".join(" ".join(f.split()) for f in failures if f)
        if failed:
            log.warning("reload: kept the last good version of what did not load: %s", failed)
        else:
            log.info("reload: every followed file read again")
        return failed

    return reread
