"""Reading the files an operator names: regular files only, and bounded.

Every file wool-idle reads on an operator's word (PEM files, the web config,
the HTTP client config and its secret files, the targets file) is read through
``read_regular_file``, so that none of them can hang or exhaust the process:

- the file is opened with ``O_NONBLOCK``, so opening a FIFO returns at once
  instead of waiting for a writer;
- anything ``fstat`` does not call a regular file (a FIFO, a character device
  such as ``/dev/zero``, a directory, a socket) is refused;
- at most ``limit`` bytes are read: a larger file, or one that grows past the
  limit while it is read, is refused.

A refusal is a ``FileRefused`` (an ``OSError``) whose ``strerror`` and text say
why; callers name the path and what the file is for.
"""

from __future__ import annotations

import os
import stat
from typing import Final

MIB: Final = 1024 * 1024
CONFIG_FILE_LIMIT: Final = 16 * MIB
"""The largest web or HTTP client config, secret or PEM file read (real ones are a
few kB)."""
TARGETS_FILE_LIMIT: Final = 64 * MIB
"""The largest targets (file_sd) file read: about half a million targets."""
_CHUNK: Final = 1024 * 1024
_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(OSError):
    """A file that is not read: not a regular file, or larger than the limit."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(reason)
        self.strerror = reason
        self.filename = os.fspath(path)

    def __str__(self) -> str:
        return str(self.strerror)


def read_regular_file(path: str | os.PathLike[str], *, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises ``FileRefused`` for a file that is not regular or is larger than
    ``limit``, and the ``OSError`` of ``open`` for a missing or unreadable one.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            kind = next((name for test, name in _KINDS if test(status.st_mode)), "special")
            raise FileRefused(path, f"{kind}, not a regular file")
        too_large = FileRefused(path, f"larger than the limit of {describe_size(limit)}")
        if status.st_size > limit:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(descriptor, min(_CHUNK, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while being read
                raise too_large
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def describe_size(size: int) -> str:
    """``size`` bytes for a message: ``16 MiB`` when whole mebibytes, else bytes."""
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB} MiB"
    return f"{size} bytes"
