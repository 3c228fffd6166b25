"""Per-method authorization on the worker, by client-certificate identity.

An identity is a subject alternative name (DNS, URI, email or IP) of the
client certificate that mutual TLS verified, matched exactly. A method with an
allow-list admits only those identities; a method without one admits every
client that got through the TLS handshake. ``idle`` never has an allow-list,
so a read-only identity (the exporter's) can always poll it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

SAN_PROPERTY: Final = "x509_subject_alternative_name"


def identities(context: Any) -> frozenset[str]:
    """The SANs of the caller's verified certificate (empty without one)."""
    auth: Mapping[str, Iterable[bytes]] = context.auth_context() or {}
    return frozenset(value.decode(errors="replace") for value in auth.get(SAN_PROPERTY, ()))


def describe(context: Any) -> str:
    """The caller for logs: its identities, or its peer address."""
    names = identities(context)
    return ",".join(sorted(names)) if names else str(context.peer())


@dataclass(frozen=True)
class MethodPolicy:
    """Allow-lists per method name; a method absent from ``allowed`` is open."""

    allowed: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def permits(self, method: str, context: Any) -> bool:
        """Whether the caller of ``context`` may call ``method``."""
        allow = self.allowed.get(method)
        return allow is None or not allow.isdisjoint(identities(context))
