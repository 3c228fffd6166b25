"""Whether a new web config may replace the one in force without a restart.

A daemon follows its web config file (``live_config``), and a writer that stops
half way leaves a file that must not open the endpoints further. So a new
version may close them further but never let in what the config in force keeps
out, nor change what a running daemon cannot: ``weakening`` names the first
such change it finds, or None.
"""

from __future__ import annotations

import functools
import ssl

from wool_idle.web.config import WebConfig
from wool_idle.web.server_tls import ServerTlsSettings


def weakening(before: WebConfig, after: WebConfig) -> str | None:
    """What ``after`` would let in, or stop doing, that ``before`` keeps out or does
    (or what cannot change in a running daemon), or None. Header values are taken
    as written: a header removed is weaker, a value changed is not judged."""
    if (before.tls is None) != (after.tls is None):
        return "turning TLS on or off"
    if before.users and not after.users:
        return "turning basic auth off"
    if any(value and not after.headers.get(name) for name, value in before.headers.items()):
        return "removing a response header"  # or emptying it
    if before.tls is None or after.tls is None:
        return None
    old, new = before.tls, after.tls
    if new.verify_mode < old.verify_mode:
        return "asking less of client certificates (client_auth_type)"
    if old.client_ca_file and not new.client_ca_file and new.verify_mode:
        return "trusting the system's CAs for client certificates instead of client_ca_file"
    if new.least_version < old.least_version:
        return "a lower min_version"
    if not new.tls13_only and not _suites(old).issuperset(_suites(new)):
        return "allowing cipher suites that were not allowed"
    if old.curve and new.curve != old.curve:
        return "another key exchange than curve_preferences allowed"
    return None


def _suites(tls: ServerTlsSettings) -> frozenset[str]:
    """The TLS 1.2 cipher suites ``tls`` allows: its list, else the defaults."""
    return frozenset(tls.ciphers) or _default_suites()


@functools.cache
def _default_suites() -> frozenset[str]:
    """The suites a server context allows when ``cipher_suites`` is not given."""
    return frozenset(c["name"] for c in ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).get_ciphers())
