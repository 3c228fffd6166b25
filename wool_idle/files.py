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

The files a daemon writes beside one the operator named (the state file's
lock) are opened by ``open_regular_no_follow``: no FIFO, no symbolic link.

OpenSSL loads a certificate chain and its key only from a path, which it opens
itself. Handing it the operator's path would undo the checks above: between
the check and OpenSSL's ``open`` the path can be swapped for a FIFO (a hang)
or another file. ``in_memory_file`` gives OpenSSL a path of its own instead,
which reads as exactly the bytes that were checked.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
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


def open_regular_no_follow(path: str | os.PathLike[str], flags: int) -> int:
    """A descriptor of ``path`` opened with ``flags`` (a file ``O_CREAT`` creates gets
    mode 0644); ``OSError`` unless it is a regular file. Opening never blocks (a FIFO
    there must not hang the process) and follows no symbolic link: for a file a daemon,
    perhaps root, writes beside one the operator named, in a directory others may
    write to, where a planted link would have it create or lock any file."""
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:  # not "too many levels of symbolic links"
            error.strerror = "a symbolic link, not followed"
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
    return descriptor


def describe_size(size: int) -> str:
    """``size`` bytes for a message: ``16 MiB`` when whole mebibytes, else bytes."""
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB} MiB"
    return f"{size} bytes"


@contextlib.contextmanager
def in_memory_file(content: bytes) -> Iterator[str]:
    """A path that reads as ``content``, valid until the block ends.

    The file is anonymous and in memory (``memfd_create``), reached through
    ``/proc/self/fd``: no other process can swap it or see it, and a key put in it
    is never written to a disk. Where either is missing (not Linux, ``/proc`` not
    mounted) or no descriptor is left, ``OSError`` says so.
    """
    try:
        descriptor = os.memfd_create("wool-idle", os.MFD_CLOEXEC)
    except (OSError, AttributeError) as error:  # AttributeError: not Linux
        why = getattr(error, "strerror", None) or "not supported here"
        raise OSError(f"cannot make the in-memory copy OpenSSL loads: {why}") from None
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(descriptor, view) :]
        path = f"/proc/self/fd/{descriptor}"
        if not os.path.exists(path):
            raise OSError(
                f"cannot hand OpenSSL its in-memory copy: {path} is missing (mount /proc)"
            )
        yield path
    finally:
        os.close(descriptor)
