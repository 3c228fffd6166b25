"""The exporter's targets: ``--target`` flags, a Prometheus file_sd file, and the
workers of followed wool discoveries (set by ``discovered``).

The file is read as Prometheus reads it (see ``file_sd``); each target must
be a worker address (``host:port`` or ``unix:/path``). Labels whose name
starts with ``__`` are accepted and dropped (Prometheus drops them after
relabelling too), as are empty values; a ``worker`` label gives way to the
address, which is the ``worker`` label of every series. A group whose labels take
more than ``MAX_LABELS_TEXT`` characters in exposition text makes the file invalid,
as does an address listed again with other labels than the first time.

A file that cannot be read or parsed leaves the last good set in place; so does
one that is not a regular file (a FIFO, ``/dev/zero``) or is larger than
``TARGETS_FILE_LIMIT`` (64 MiB), which is never read at all.
``watch`` checks the file's content (not its timestamp) every interval and
parses it off the event loop, on a daemon thread (a read stalled on its file
system never holds up the exporter's exit), only when the bytes changed.

A file target whose labels changed against the last loaded file (a file rewritten
in place can be read cut inside a label value) is ``regrouped`` for
``REGROUP_GRACE``: its idle value is withheld, and released by the first check
after the grace that finds the file unchanged (``FileRegroupings``; ``watch``
checks it even when nothing changes), so a cut read is never released before the
file is read again. So is a target new to the file after its first load.
``--target`` flags never change.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from wool_idle.contract import MAX_LABELS_TEXT, WORKER_LABEL, labels_text
from wool_idle.daemon_thread import on_daemon_thread
from wool_idle.exporter.file_sd import FileSdError, Syntax, parse_groups, syntax_of
from wool_idle.exporter.regrouped import REGROUP_GRACE, FileRegroupings
from wool_idle.exporter.target import Labels, Target
from wool_idle.files import TARGETS_FILE_LIMIT, read_regular_file
from wool_idle.logs import bounded
from wool_idle.worker.address import parse_address

log = logging.getLogger(__name__)


class TargetsFileError(ValueError):
    """The targets file is unreadable or not a valid file_sd document."""


def parse_targets_document(data: bytes | str, *, syntax: Syntax = "yaml") -> list[Target]:
    """The targets of file_sd ``data`` (each address once, where first listed), or
    ``TargetsFileError``: also for an address in two groups with other series labels
    (which pool its worker serves is unknown)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    try:
        groups = parse_groups(raw, syntax=syntax)
    except FileSdError as error:
        raise TargetsFileError(str(error)) from None
    targets: dict[str, tuple[int, Target]] = {}  # by address: its first group, its target
    checked: set[Labels] = set()  # YAML aliases give many groups one label set
    for index, (addresses, labels) in enumerate(groups):
        kept = _series_labels(labels)
        if kept not in checked and (size := labels_text(kept)) > MAX_LABELS_TEXT:
            why = f"its labels take {size} characters as exposition text, over {MAX_LABELS_TEXT}"
            raise TargetsFileError(f"group {index}: {why}")
        checked.add(kept)
        for address in addresses:
            first, target = targets.get(address, (index, None))
            if target is None:
                try:
                    targets[parse_address(address)] = (index, Target(address, kept))
                except ValueError as error:
                    raise TargetsFileError(f"group {index}: {error}") from None
            elif target.labels != kept:
                why = f"{address!r} is in group {first} with other labels"
                raise TargetsFileError(f"group {index}: {why}")
    return [target for _, target in targets.values()]


def _series_labels(labels: dict[str, str]) -> Labels:
    return tuple(
        sorted(
            (name, value)
            for name, value in labels.items()
            if value and not name.startswith("__") and name != WORKER_LABEL
        )
    )


@dataclass(frozen=True)
class _Read:
    """What one look at the file found: new content parsed, or a failure."""

    digest: bytes | None
    targets: tuple[Target, ...] | None = None
    error: str | None = None


class TargetSet:
    """Static targets, those of an optional file_sd file, and discovered ones (in
    that order of precedence: an address is one target, the first source's).

    ``reload`` (on the calling thread) and ``refresh`` (off the event loop)
    re-read the file when its content changed, or when forced; a failure
    keeps the previous file targets and is logged once per distinct failure.
    ``reload_timestamp`` is the time of the last successful read: 0 until the
    file is first read, the set's creation time without a file.
    """

    def __init__(
        self,
        *,
        static: Sequence[Target] = (),
        path: str | None = None,
        grace: float = REGROUP_GRACE,
    ) -> None:
        """``grace``: how long a file target whose labels changed is ``regrouped``."""
        self._static = tuple(static)
        self.path = path
        self.reload_success = True
        self.reload_timestamp = time.time() if path is None else 0.0
        self._file = FileRegroupings(grace, source=f"targets file {path}")
        self._discovered: tuple[Target, ...] = ()
        self.discovery_read = True
        """Whether every followed wool discovery has been read once (set by
        ``discovered``; True when none is followed)."""
        self._digest: bytes | None = None
        self._loaded = False
        self._failure: str | None = None
        self._lock = asyncio.Lock()
        self._index()

    @property
    def discovered(self) -> tuple[Target, ...]:
        """The targets of the followed wool discoveries."""
        return self._discovered

    def set_discovered(self, targets: Sequence[Target]) -> None:
        """Make ``targets`` the discovered targets (re-indexing only when they changed)."""
        found = tuple(targets)
        if found != self._discovered:
            self._discovered = found
            self._index()

    @property
    def failure(self) -> str | None:
        """Why the last read of the file failed, or None if it succeeded."""
        return self._failure

    @property
    def loaded(self) -> bool:
        """Whether the file (if any) has been read successfully at least once."""
        return self.path is None or self._loaded

    @property
    def unloaded(self) -> str | None:
        """Why the targets are not known yet (the file not loaded once, or a wool
        discovery not read once), or None once they are."""
        if not self.loaded:
            return "targets file not loaded yet"
        return None if self.discovery_read else "wool discovery not read yet"

    def all(self) -> list[Target]:
        """Every target, static, file, discovered, each address once. The same list object
        until the set changes: do not modify it."""
        return self._all

    def get(self, address: str) -> Target | None:
        """The configured target at ``address``, if any."""
        return self._by_address.get(address)

    def reload(self, *, force: bool = False) -> bool:
        """Re-read the file now if its content changed (or ``force``); return
        whether the set is good."""
        return self._apply(self._read(force=force), force=force)

    async def refresh(self, *, force: bool = False) -> bool:
        """``reload`` with the reading and parsing done on a daemon thread: cancelled
        while the file system stalls the read (SIGTERM), it lets the process leave.
        No thread to be had (a pids limit) is a failed read: the next one reads anew."""
        async with self._lock:
            read = functools.partial(self._read, force=force)
            try:
                found = await on_daemon_thread("wool-idle-targets", read)
            except RuntimeError as error:  # the thread could not be started
                found = _Read(None, error=f"cannot start a thread to read it: {error}")
            return self._apply(found, force=force)

    async def watch(self, interval: float) -> None:
        """``refresh`` every ``interval`` seconds, forever."""
        while True:
            await asyncio.sleep(interval)
            await self.refresh()

    def _read(self, *, force: bool) -> _Read | None:
        """Read and parse the file; None when its content is what was read last."""
        if self.path is None:
            return None
        try:
            data = read_regular_file(self.path, limit=TARGETS_FILE_LIMIT)
        except OSError as error:
            return _Read(None, error=f"cannot read: {error}")
        digest = hashlib.blake2b(data, digest_size=16).digest()
        if digest == self._digest and not force:
            return None
        try:
            targets = parse_targets_document(data, syntax=syntax_of(self.path))
        except TargetsFileError as error:  # it may quote a label or target of any length
            return _Read(digest, error=bounded(str(error)))
        except Exception as error:  # a parser fault on odd input: the file's failure
            return _Read(digest, error=bounded(f"parser failed: {error!r}"))
        return _Read(digest, targets=tuple(targets))

    def _apply(self, found: _Read | None, *, force: bool) -> bool:
        if found is None:  # unchanged: a held target whose grace ended is released
            if self.reload_success and self._file.release(time.monotonic()):
                self._index()
            return self.reload_success
        self._digest = found.digest
        if found.targets is None:
            if found.error != self._failure or force:
                log.error(
                    "targets file %s not loaded, keeping %d targets: %s",
                    self.path,
                    len(self._file.read),
                    found.error,
                )
            self._failure = found.error
            self.reload_success = False
            return False
        if found.targets != self._file.read or not self.reload_success or force:
            log.info("targets file %s loaded: %d targets", self.path, len(found.targets))
        if self._file.set(found.targets, time.monotonic()):
            self._index()
        self._failure = None
        self._loaded = True
        self.reload_success = True
        self.reload_timestamp = time.time()
        return True

    def _index(self) -> None:
        seen: dict[str, Target] = {}
        for target in (*self._static, *self._file.targets, *self._discovered):
            seen.setdefault(target.address, target)
        self._by_address = seen
        self._all = list(seen.values())
