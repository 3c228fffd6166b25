"""The exporter's targets: ``--target`` flags plus a Prometheus file_sd file.

The file is a JSON or YAML list of ``{"targets": [...], "labels": {...}}``
groups. A file that cannot be read or parsed leaves the last good set in
place; ``TargetSet`` records the outcome for the reload metrics.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from wool_idle.contract import LABEL_NAME, WORKER_LABEL
from wool_idle.worker.address import parse_address

log = logging.getLogger(__name__)


class TargetsFileError(ValueError):
    """The targets file is unreadable or not a valid file_sd document."""


@dataclass(frozen=True)
class Target:
    """One worker to scrape: its address and the extra labels of its series."""

    address: str
    labels: tuple[tuple[str, str], ...] = ()

    def label_dict(self) -> dict[str, str]:
        """``worker`` plus the file's labels."""
        return {WORKER_LABEL: self.address, **dict(self.labels)}


def parse_targets_document(text: str) -> list[Target]:
    """Parse file_sd ``text`` (JSON is YAML) into targets, or raise ``TargetsFileError``."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise TargetsFileError(f"not valid YAML/JSON: {error}".splitlines()[0]) from None
    if document is None:
        return []
    if not isinstance(document, list):
        raise TargetsFileError("expected a list of {targets, labels} groups")
    targets: dict[str, Target] = {}
    for index, group in enumerate(document):
        for target in _parse_group(index, group):
            targets.setdefault(target.address, target)
    return list(targets.values())


def _parse_group(index: int, group: Any) -> Iterable[Target]:
    where = f"group {index}"
    if not isinstance(group, Mapping) or not set(group) <= {"targets", "labels"}:
        raise TargetsFileError(f"{where}: expected a mapping with 'targets' and 'labels' only")
    addresses = group.get("targets")
    if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
        raise TargetsFileError(f"{where}: 'targets' must be a list of strings")
    labels = _parse_labels(where, group.get("labels") or {})
    for address in addresses:
        try:
            yield Target(parse_address(address), labels)
        except ValueError as error:
            raise TargetsFileError(f"{where}: {error}") from None


def _parse_labels(where: str, labels: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(labels, Mapping):
        raise TargetsFileError(f"{where}: 'labels' must be a mapping")
    for name, value in labels.items():
        if not isinstance(name, str) or not LABEL_NAME.match(name) or name.startswith("__"):
            raise TargetsFileError(f"{where}: invalid label name {name!r}")
        if name == WORKER_LABEL:
            raise TargetsFileError(f"{where}: label {WORKER_LABEL!r} is reserved (the address)")
        if not isinstance(value, str):
            raise TargetsFileError(f"{where}: label {name!r} must have a string value")
    return tuple(sorted(labels.items()))


@dataclass
class TargetSet:
    """Static targets plus those of an optional file_sd file.

    ``reload`` re-reads the file when its modification time changed (or when
    forced); on failure it keeps the previous file targets and logs one line.
    """

    static: tuple[Target, ...] = ()
    path: str | None = None
    file_targets: tuple[Target, ...] = ()
    reload_success: bool = True
    reload_timestamp: float = field(default_factory=time.time)
    _stamp: tuple[int, int] | None = None

    @property
    def loaded(self) -> bool:
        """Whether the file (if any) has been read successfully at least once."""
        return self.path is None or self._stamp is not None

    def all(self) -> list[Target]:
        """Every target, static first, each address once."""
        seen: dict[str, Target] = {}
        for target in (*self.static, *self.file_targets):
            seen.setdefault(target.address, target)
        return list(seen.values())

    def reload(self, *, force: bool = False) -> bool:
        """Re-read the file if it changed (or ``force``); return whether the set is good."""
        if self.path is None:
            return True
        try:
            info = os.stat(self.path)
            stamp = (info.st_mtime_ns, info.st_size)
            if stamp == self._stamp and not force:
                return self.reload_success
            with open(self.path, encoding="utf-8") as file:
                text = file.read()
            targets = parse_targets_document(text)
        except (OSError, UnicodeDecodeError, TargetsFileError) as error:
            if self.reload_success or force:
                log.error(
                    "targets file %s not loaded, keeping %d targets: %s",
                    self.path,
                    len(self.file_targets),
                    error,
                )
            self.reload_success = False
            return False
        self._stamp = stamp
        if self.file_targets != tuple(targets) or not self.reload_success:
            log.info("targets file %s loaded: %d targets", self.path, len(targets))
        self.file_targets = tuple(targets)
        self.reload_success = True
        self.reload_timestamp = time.time()
        return True
