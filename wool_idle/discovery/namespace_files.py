"""The files of a wool ``LocalDiscovery`` namespace a drop writes, opened only as
wool makes them.

``notify_path`` is the file wool's subscribers watch, ``lock_path`` the file its
publishers lock. Anyone may create either first (``/tmp/wool-lock-*``,
``/tmp/wool-<namespace>``), so neither is written unless it is what wool makes:
a regular file with one link, not a symbolic link, opened without blocking
(``check_lock`` also requires this process's user to own the lock file).
Anything else is an ``OSError`` that names the file, with nothing written.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def notify_path(namespace: str) -> Path:
    """The file wool's subscribers of ``namespace`` watch for changes."""
    return Path(tempfile.gettempdir()).resolve() / f"wool-{namespace}" / "notify"


def lock_path(namespace: str) -> Path:
    """The file wool's publishers of ``namespace`` lock (opened for writing, truncated)."""
    from wool.runtime.discovery import local

    return Path(tempfile.gettempdir()).resolve() / f"wool-lock-{local._short_hash(namespace)}"


def check_lock(path: Path) -> None:
    """Raise ``OSError`` unless wool may open ``path``, a namespace's lock file, by its
    name next: it is what wool makes (``_open_as_made``; created if missing) and this
    process's user owns it. Checked, a file of another user could still be swapped by
    that user (for a FIFO, whose opening blocks the event loop for good) before wool
    opens it; in sticky ``/tmp``, one of ours can be by nobody else."""
    fd = _open_as_made(path, os.O_CREAT)
    try:
        owner = os.fstat(fd).st_uid
    finally:
        os.close(fd)
    if owner != os.geteuid():
        raise OSError(f"{path} is owned by uid {owner}, not by this process's user; left alone")


def wake_subscribers(notify: Path) -> None:
    """Truncate ``notify`` (a modification wool's subscribers see), only if it is
    what wool makes (``_open_as_made``)."""
    fd = _open_as_made(notify)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _open_as_made(path: Path, flags: int = 0) -> int:
    """``path`` opened for writing (with ``flags``), only if it is what wool makes: a
    regular file with one link, not a symlink. Anyone may create ``/tmp/wool-lock-*``
    or ``/tmp/wool-<namespace>`` first, so anything else there could be a planted
    link to a file of ours (which opening for writing would truncate) or a FIFO
    (whose opening would block the event loop until someone reads it): ``OSError``,
    nothing written."""
    fd = os.open(path, flags | os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_nlink != 1:
            raise OSError(f"{path} is not a regular file with one link; left alone")
    except BaseException:
        os.close(fd)
        raise
    return fd
