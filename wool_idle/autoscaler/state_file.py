"""The autoscaler's marks, kept in a file across restarts (``--state-file``).

Without it a restarted autoscaler knows nothing of the stops it sent before: a
worker still draining, or one whose old sample the source still serves, counts
alive for ``--min-workers`` again, and a worker the floor needs can be stopped
for it. The file holds, in Unix time, the marks that prevent that (``Marks``),
and the workers shown retired, so that a restart shows them retired, not down.

Its content: ``state_marks``. It is written whole to a temporary file in the
same directory, flushed to disk and renamed over the old one, so a crash leaves
the old file or the new one, never a part of either. One autoscaler per file:
``lock`` holds an exclusive lock on ``<path>.lock`` for the life of the
process, and removes the temporary files a process killed while writing left
behind; a lock file removed or replaced meanwhile (a cleaner of old files) is
locked again before the next write, which fails if another process has it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from pathlib import Path
from typing import IO, Final

from wool_idle.autoscaler.state_marks import Marks, Retired, StateFileError, Written
from wool_idle.files import open_regular_no_follow

__all__ = ["Marks", "Retired", "StateFile", "StateFileError", "Written"]

MAX_BYTES: Final = 64 * 1024 * 1024
"""The largest state file read (a few hundred bytes per worker marked)."""
_TEMPORARY_SUFFIX: Final = ".tmp"
"""Ends the name of a temporary file ``save`` writes (``.<name>.XXXXXXXX.tmp``)."""


class StateFile:
    """The file at ``path`` (its directory must exist). A symbolic link there is
    followed once, at start: the file it names is the one locked, read and replaced
    (replacing the link itself would leave that file behind, stale)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(os.path.realpath(path))
        self._lock: IO[bytes] | None = None

    @property
    def _lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def lock(self) -> None:
        """Hold the exclusive lock of this file until the process ends; ``StateFileError``
        if another process holds it (or it cannot be taken)."""
        lock_path = self._lock_path
        try:
            descriptor = open_regular_no_follow(lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        except OSError as error:
            raise StateFileError(f"cannot open {lock_path}: {error.strerror}") from None
        handle = os.fdopen(descriptor, "ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise StateFileError(f"{self.path} is in use by another autoscaler") from None
        held, self._lock = self._lock, handle
        if held is not None:
            held.close()
        self._remove_temporaries()

    def _keep_lock(self) -> None:
        """Make sure the lock held (if any) is still the lock file's: one removed (by
        a cleaner of old files in ``/tmp``, say) or replaced lets another autoscaler
        lock the new one. It is taken again; ``OSError`` if another process holds it."""
        if self._lock is None:
            return
        held = os.fstat(self._lock.fileno())
        try:
            found = os.stat(self._lock_path, follow_symlinks=False)
        except FileNotFoundError:
            found = None
        if found is not None and (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino):
            return
        try:
            self.lock()
        except StateFileError as error:
            raise OSError(errno.EAGAIN, f"its lock file was removed or replaced: {error}") from None

    @property
    def _temporary_prefix(self) -> str:
        return f".{self.path.name}."

    def _remove_temporaries(self) -> None:
        """Remove the temporary files of ``save`` a process killed while writing left (only
        the lock's holder writes them); one that cannot be removed stays, others are kept."""
        prefix = self._temporary_prefix
        length = len(prefix) + 8 + len(_TEMPORARY_SUFFIX)  # mkstemp's 8 random characters
        with contextlib.suppress(OSError), os.scandir(self.path.parent) as entries:
            for entry in entries:
                name = entry.name
                if (
                    len(name) == length
                    and name.startswith(prefix)
                    and name.endswith(_TEMPORARY_SUFFIX)
                    and entry.is_file(follow_symlinks=False)
                ):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)

    def load(self) -> Marks:
        """The marks in the file; ``StateFileError`` if it is missing, unreadable,
        larger than ``MAX_BYTES`` or malformed."""
        try:
            with os.fdopen(open_regular_no_follow(self.path, os.O_RDONLY), "rb") as file:
                data = file.read(MAX_BYTES + 1)
        except FileNotFoundError:
            raise StateFileError(f"{self.path}: no state file (a first start, or lost)") from None
        except OSError as error:
            raise StateFileError(f"{self.path}: unreadable: {error.strerror}") from None
        if len(data) > MAX_BYTES:
            raise StateFileError(f"{self.path}: larger than {MAX_BYTES} bytes")
        try:
            return Marks.from_json(data.decode())
        except UnicodeDecodeError:
            raise StateFileError(f"{self.path}: not UTF-8") from None
        except StateFileError as error:
            raise StateFileError(f"{self.path}: {error}") from None

    def save(self, marks: Marks) -> None:
        """Replace the file's content with ``marks``, atomically and durably; ``OSError``
        if it cannot be written (the old content then stays), or if its lock was lost to
        another process (``_keep_lock``)."""
        self._keep_lock()
        directory = self.path.parent
        handle, temporary = tempfile.mkstemp(
            prefix=self._temporary_prefix, suffix=_TEMPORARY_SUFFIX, dir=directory
        )
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(marks.to_json())
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        directory_handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_handle)
        finally:
            os.close(directory_handle)
