"""The autoscaler's marks, kept in a file across restarts (``--state-file``).

Without it a restarted autoscaler knows nothing of the stops it sent before: a
worker still draining, or one whose old sample the source still serves, counts
alive for ``--min-workers`` again, and a worker the floor needs can be stopped
for it. The file holds, in Unix time, the marks that prevent that (``Marks``),
and the workers shown retired, so that a restart shows them retired, not down.

Format: one JSON object, ``{"version": 1, "retiring": {worker: t, ...},
"unreachable": {...}, "cooldown_until": {...}, "retired": {worker: {"at": t,
"labels": {name: value, ...}}, ...}}``, every ``t`` a finite number, and, while
stops are held (``held_until``), ``"held_until": t``. ``retired`` is optional (a
file written before it existed has none), and a malformed retired mark is left
out (named in ``Marks.skipped``), never failing the read of the others.
It is written whole to a temporary file in the same directory, flushed to disk
and renamed over the old one, so a crash leaves the old file or the new one,
never a part of either. One autoscaler per file: ``lock`` holds an exclusive
lock on ``<path>.lock`` for the life of the process, and removes the temporary
files a process killed while writing left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from wool_idle.contract import encodes_as_utf8
from wool_idle.files import open_regular_no_follow

VERSION: Final = 1
MAX_BYTES: Final = 64 * 1024 * 1024
"""The largest state file read (a few hundred bytes per worker marked)."""
_KINDS: Final = ("retiring", "unreachable", "cooldown_until")
_HELD: Final = "held_until"
_RETIRED: Final = "retired"
_TEMPORARY_SUFFIX: Final = ".tmp"
"""Ends the name of a temporary file ``save`` writes (``.<name>.XXXXXXXX.tmp``)."""


class StateFileError(Exception):
    """The state file is missing, unreadable or malformed: its marks are unknown."""


@dataclass(frozen=True)
class Retired:
    """A worker shown retired: the Unix time of its stop, and its group labels."""

    at: float
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Marks:
    """What an autoscaler must not forget, by worker, in Unix time: when a stop was
    sent to it, or was about to be (``retiring``); when a planned stop found it
    unreachable (``unreachable``); until when it is left alone (``cooldown_until``)."""

    retiring: Mapping[str, float] = field(default_factory=dict)
    unreachable: Mapping[str, float] = field(default_factory=dict)
    cooldown_until: Mapping[str, float] = field(default_factory=dict)
    held_until: float | None = None
    """Until when no stop is sent at all: the marks of an earlier process were lost,
    and a restart meanwhile must hold them still (``PolicyPlanner.hold``)."""
    retired: Mapping[str, Retired] = field(default_factory=dict)
    skipped: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> str:
        """The file's content (times to the millisecond, retired ones as shown, sorted)."""
        content: dict[str, Any] = {"version": VERSION}
        for kind in _KINDS:
            marks: Mapping[str, float] = getattr(self, kind)
            content[kind] = {w: round(t, 3) for w, t in sorted(marks.items())}
        if self.held_until is not None:
            content[_HELD] = round(self.held_until, 3)
        content[_RETIRED] = {
            w: {"at": r.at, "labels": dict(sorted(r.labels.items()))}
            for w, r in sorted(self.retired.items())
        }
        return json.dumps(content, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Marks:
        """``Marks`` from a file's content; ``StateFileError`` for anything but the
        format above (another version, a worker that is not a non-empty string, a
        time that is not a finite number), but for a malformed retired mark."""
        try:
            content = json.loads(text)
        except (ValueError, RecursionError) as error:  # not JSON, or nested too deep
            raise StateFileError(f"not JSON: {error}") from None
        if type(content) is not dict or content.get("version") != VERSION:
            raise StateFileError(f"not a version {VERSION} state object")
        if set(content) - {_HELD, _RETIRED} != {"version", *_KINDS}:
            raise StateFileError(
                f"expected the keys version, {', '.join(_KINDS)} (and {_HELD}, {_RETIRED}) only"
            )
        retiring, unreachable, cooldown_until = (_times(kind, content[kind]) for kind in _KINDS)
        held = _time(_HELD, content[_HELD]) if _HELD in content else None
        retired, skipped = _retired(content.get(_RETIRED, {}))
        return cls(retiring, unreachable, cooldown_until, held, retired, skipped)


def _times(kind: str, marks: object) -> dict[str, float]:
    if type(marks) is not dict:
        raise StateFileError(f"{kind}: not an object")
    times = {}
    for worker, at in marks.items():
        if not worker:
            raise StateFileError(f"{kind}: an empty worker")
        times[worker] = _time(f"{kind}: {worker!r}", at)
    return times


def _retired(marks: object) -> tuple[dict[str, Retired], tuple[str, ...]]:
    """The well-formed retired ``marks``, and what was wrong with each other one."""
    if type(marks) is not dict:
        return {}, (f"{_RETIRED}: not an object",)
    retired, skipped = {}, []
    for worker, mark in marks.items():
        try:
            retired[worker] = _retired_mark(f"{_RETIRED}: {worker!r}", worker, mark)
        except StateFileError as error:
            skipped.append(str(error))
    return retired, tuple(skipped)


def _retired_mark(what: str, worker: str, mark: object) -> Retired:
    """One retired mark; ``StateFileError`` naming ``what`` unless ``{at, labels}`` of a
    non-empty worker, with text labels that all encode as UTF-8 (the series shows them:
    one lone surrogate would fail every scrape of the autoscaler's ``/metrics``)."""
    if not worker or type(mark) is not dict or set(mark) != {"at", "labels"}:
        raise StateFileError(f"{what}: not {{at, labels}} of a worker")
    labels = mark["labels"]
    if type(labels) is not dict or not all(type(value) is str for value in labels.values()):
        raise StateFileError(f"{what}: labels not text")
    if not encodes_as_utf8(worker + "".join(labels) + "".join(labels.values())):
        raise StateFileError(f"{what}: not valid UTF-8")
    return Retired(_time(what, mark["at"]), labels)


def _time(what: str, at: object) -> float:
    """``at`` as seconds; ``StateFileError`` naming ``what`` unless a finite number."""
    if isinstance(at, bool) or not isinstance(at, int | float) or not _finite(at):
        raise StateFileError(f"{what}: not a finite number of seconds")
    return float(at)


def _finite(number: float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # a JSON integer too large for a float
        return False


class StateFile:
    """The file at ``path`` (its directory must exist). A symbolic link there is
    followed once, at start: the file it names is the one locked, read and replaced
    (replacing the link itself would leave that file behind, stale)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(os.path.realpath(path))
        self._lock: IO[bytes] | None = None

    def lock(self) -> None:
        """Hold the exclusive lock of this file until the process ends; ``StateFileError``
        if another process holds it (or it cannot be taken)."""
        lock_path = self.path.with_name(self.path.name + ".lock")
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
        self._lock = handle
        self._remove_temporaries()

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
        if it cannot be written (the old content then stays)."""
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
