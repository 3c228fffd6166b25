"""Loopback ports that never answer a TCP handshake (a host behind a firewall that
drops): a listener that never accepts, its accept queue already full, so Linux drops
every further SYN and a client's connect stays pending until it gives up."""

from __future__ import annotations

import socket
from typing import Self

SYN_SENT = "02"
"""A connecting socket's state in ``/proc/net/tcp``."""


class Blackhole:
    """A loopback port nobody's handshake completes on; ``connecting()`` counts the
    sockets of this host still trying to reach it. Use it as ``with Blackhole() as b``."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(0)
        self.port = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        # With a backlog of 0 the queue holds one connection: this one fills it.
        self._filler = socket.create_connection(("127.0.0.1", self.port), timeout=5.0)

    def connecting(self) -> int:
        """How many sockets on this host are connecting to the port right now."""
        with open("/proc/net/tcp", encoding="ascii") as table:
            rows = [line.split() for line in table.readlines()[1:]]
        return sum(
            1 for row in rows if row[3] == SYN_SENT and int(row[2].split(":")[1], 16) == self.port
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening."""
        self._filler.close()
        self._listener.close()
