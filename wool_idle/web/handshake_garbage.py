"""The garbage that TLS connections whose handshake failed leave behind.

A connection whose TLS handshake fails (plain HTTP sent to the HTTPS port, a
client that leaves half way) is left by asyncio in a reference cycle with its
256 KiB read buffer (CPython gh-109534, as on the 3.11.7 it was found on), which
only the garbage collector frees; the exporter collects its young generation
seldom (``exporter.runtime``), so a stream of them piled up hundreds of megabytes.

Every ``COLLECT_EVERY`` new TLS connections the young generations are collected (a
few milliseconds), every ``FULL_COLLECT_EVERY`` all of them (the handshakes under
way at a young collection are moved to the oldest): at most ``COLLECT_EVERY``
failed handshakes wait for a young collection, and those then under way at most
``FULL_COLLECT_EVERY`` connections longer. A scraper that keeps its connection
open starts neither.
"""

from __future__ import annotations

import gc
from typing import Final

COLLECT_EVERY: Final = 64
"""New TLS connections between two collections of the young generations: 16 MiB of
failed handshakes' buffers at most."""
FULL_COLLECT_EVERY: Final = 1024
"""New TLS connections between two full collections: one costs tens of milliseconds
over a large fleet's objects (start-up ones are frozen)."""


class HandshakeGarbage:
    """Counts the new TLS connections of one server and collects as above."""

    def __init__(self) -> None:
        self._connections = 0

    def new_connection(self) -> None:
        """One more TLS connection is about to shake hands: collect if it is due."""
        self._connections += 1
        if self._connections % FULL_COLLECT_EVERY == 0:
            gc.collect()
        elif self._connections % COLLECT_EVERY == 0:
            gc.collect(1)
