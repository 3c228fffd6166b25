"""``local:NAMESPACE`` and ``lan:NAMESPACE``: which wool discovery to follow."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

_NAMESPACE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}\Z")
"""Letters, digits and ``. _ : -``, starting with a letter or digit: no blank or
slash, as wool uses a local namespace in a file path (``/tmp/wool-<namespace>``).
A namespace wool would accept beyond these (``team@prod``) is refused (exit 2). ``\\Z``, as ``$``
would pass a final newline."""


class DiscoveryKind(StrEnum):
    """The wool discovery classes a namespace can be followed through."""

    LOCAL = "local"
    """``wool.LocalDiscovery``: workers on this machine, in shared memory."""
    LAN = "lan"
    """``wool.LanDiscovery``: workers on the local network, over DNS-SD (zeroconf)."""


@dataclass(frozen=True)
class DiscoverySpec:
    """One namespace of one discovery kind."""

    kind: DiscoveryKind
    namespace: str

    @classmethod
    def parse(cls, text: str) -> DiscoverySpec:
        """Parse ``local:NAMESPACE`` or ``lan:NAMESPACE``; ``ValueError`` says what is wrong."""
        kind, sep, namespace = text.partition(":")
        if not sep or kind not in set(DiscoveryKind):
            choices = " or ".join(f"{k.value}:NAMESPACE" for k in DiscoveryKind)
            raise ValueError(f"invalid discovery {text!r}: expected {choices}")
        if not _NAMESPACE.match(namespace):
            raise ValueError(
                f"invalid discovery {text!r}: the namespace must be 1-128 characters of "
                "letters, digits and . _ : - (starting with a letter or digit)"
            )
        return cls(DiscoveryKind(kind), namespace)

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.namespace}"
