"""A daemon's forced re-read (SIGHUP, ``POST /-/reload``) of the files it follows,
read now rather than at their next look:

- ``--web.config.file`` and the TLS files it names (``LiveWebConfig.reload``);
- ``--http.config.file`` (``LiveClientConfig.reload``), its ``tls_config`` files,
  and its secret file (read for every request anyway: read here to say whether it
  can be), the autoscaler's;
- the client TLS files it dials workers with (``--tls-*``, ``ChannelPool.force``).

Each that does not load keeps its last good version, the others are taken. The
files are read on daemon threads, never on the event loop.
"""

from __future__ import annotations

import logging

from wool_idle.web.live_client_config import LiveClientConfig
from wool_idle.web.live_config import LiveWebConfig
from wool_idle.web.reload import Reread
from wool_idle.worker import ClientTls
from wool_idle.worker.channels import pool

log = logging.getLogger(__name__)


def followed_files(
    web: LiveWebConfig | None, http: LiveClientConfig | None, tls: ClientTls | None
) -> Reread:
    """The re-read of the files ``web``, ``http`` and ``tls`` name (None: the daemon
    has none): ``""`` when all loaded, else the failures, each naming its file, on
    one line (logged too)."""

    async def reread() -> str:
        failures = []
        if web is not None and web.followed:
            failures.append(await web.reload())
        if http is not None:
            failed = await http.reload()
            failures.append(failed and f"--http.config.file {failed}")
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
