"""Looking at HTTP(S) daemons from outside: the certificate a server presents now,
and waiting for a daemon to say it is ready."""

from __future__ import annotations

import socket
import ssl
import time
import urllib.parse
import urllib.request


def presented_serial(url: str, ca: str) -> int:
    """The serial number of the certificate the HTTPS server at ``url`` presents
    now (verified by ``ca`` for the name ``localhost``), read with ``ssl``."""
    parts = urllib.parse.urlsplit(url)
    client = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection((parts.hostname, parts.port), timeout=5) as raw,
        client.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return int(tls.getpeercert()["serialNumber"], 16)


def serial_after_rotation(url: str, ca: str, rotated: int, timeout: float = 30.0) -> int:
    """Handshake until the server presents ``rotated`` (or ``timeout`` passes); the
    serial last seen."""
    deadline = time.monotonic() + timeout
    while True:
        seen = presented_serial(url, ca)
        if seen == rotated or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def wait_ready(base: str, timeout: float = 30.0) -> bool:
    """Whether ``base``/-/ready answered 200 within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/-/ready", timeout=5) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False
