"""Claiming a Unix socket path before binding it, without taking over a live one.

gRPC and asyncio both remove a socket file found at the path they are asked
to bind, so a second daemon started on the path of a live one would silently
take it over (the first keeps running, unreachable for good). Every daemon
calls ``claim_unix_socket`` first, which treats the path as TCP treats a port:

- nothing there: free;
- a socket that accepts a connection: in use, ``OSError(EADDRINUSE)``;
- a socket nobody listens on (the connection is refused): a leftover of a
  process that died, removed so the path can be bound again;
- anything else (a regular file, a directory, a symlink, a socket whose
  listener cannot be determined): refused, never removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from typing import Final

CONNECT_TIMEOUT: Final = 1.0
"""Seconds to wait for a connection to an existing socket; a listener too busy
to accept within it counts as live."""


def claim_unix_socket(path: str) -> None:
    """Make ``path`` free to bind a Unix socket on, or raise ``OSError`` saying why not."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(errno.EEXIST, f"{path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(CONNECT_TIMEOUT)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        pass  # a leftover: nobody listens
    except OSError as error:
        raise OSError(
            errno.EADDRINUSE, f"{path}: cannot tell whether a process serves on it ({error})"
        ) from None
    else:
        raise OSError(errno.EADDRINUSE, f"{path}: address in use (a process serves on it)")
    finally:
        probe.close()
    with contextlib.suppress(FileNotFoundError):  # another claimant removed it first
        os.unlink(path)
