"""A worker as wool's discovery publishes it, in our own typed record.

wool 0.15's ``WorkerMetadata`` carries ``uid`` (a UUID), ``address``
(``host:port``), ``pid``, ``version``, ``tags`` (a frozenset), ``extra`` (a
mapping of str to str) and ``secure`` (whether the worker serves TLS). A
record keeps those facts as plain, comparable values, so two announcements of
one worker compare equal when nothing changed (wool re-announces every worker
on every poll).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wool_idle.contract import (
    MAX_LABELS_TEXT,
    TAGS_LABEL,
    UID_LABEL,
    VERSION_LABEL,
    encodes_as_utf8,
    labels_text,
)
from wool_idle.discovery.attachment import FollowProblem
from wool_idle.worker.address import parse_address


class InvalidRecord(ValueError):
    """A discovery record the exporter cannot use: its address is not a worker address
    (``problem`` ``invalid_address``), or the facts that label its series are not valid
    UTF-8 or too long (``invalid_record``)."""

    def __init__(
        self,
        uid: str,
        address: str,
        why: str,
        problem: FollowProblem = FollowProblem.INVALID_ADDRESS,
    ) -> None:
        super().__init__(f"worker {uid}: {why}")
        self.uid = uid
        self.address = address
        self.problem = problem


@dataclass(frozen=True)
class WorkerRecord:
    """One worker of a discovery namespace."""

    uid: str
    """wool's unique id of the worker (a UUID, as text)."""
    address: str
    """Where the worker serves, checked to be a worker address (``host:port``)."""
    pid: int
    version: str
    """The wool version the worker runs."""
    tags: tuple[str, ...] = ()
    """The worker's tags, sorted."""
    extra: tuple[tuple[str, str], ...] = ()
    """The worker's extra facts, sorted by key."""
    secure: bool = False
    """Whether the worker serves TLS."""

    @property
    def tags_label(self) -> str:
        """The tags sorted and comma-joined (empty when there are none), a comma or
        backslash inside a tag escaped with a backslash, so that two tag sets never
        share a label (``{"gpu,hot"}`` is ``gpu\\,hot``, ``{"gpu", "hot"}`` is
        ``gpu,hot``) and ``--group-by wool_tags`` never merges two pools. A lone
        empty tag is ``,`` (joined, it would read as no tags; no other set joins
        to ``,``, as a set holds the empty tag once)."""
        if self.tags == ("",):
            return ","
        return ",".join(_escaped(tag) for tag in self.tags)

    @classmethod
    def from_metadata(cls, metadata: Any) -> WorkerRecord:
        """The record of a wool ``WorkerMetadata``; ``InvalidRecord`` if its address is
        not a worker address (such a worker cannot be dialled, so it is never a target),
        or if its tags, version and uid, which label its series, are not valid UTF-8
        or take more than ``MAX_LABELS_TEXT`` characters in exposition text."""
        uid = str(metadata.uid)
        address = str(metadata.address)
        try:
            parse_address(address)
        except ValueError as error:
            raise InvalidRecord(uid, address, str(error)) from None
        tags = tuple(sorted(str(tag) for tag in metadata.tags))
        version = str(metadata.version)
        for fact, text in (("tags", ",".join(tags)), ("version", version)):
            if not encodes_as_utf8(text):
                why = f"its {fact} are not valid UTF-8: {text!r}"
                raise InvalidRecord(uid, address, why, FollowProblem.INVALID_RECORD)
        record = cls(
            uid=uid,
            address=address,
            pid=int(metadata.pid),
            version=version,
            tags=tags,
            extra=tuple(sorted((str(k), str(v)) for k, v in dict(metadata.extra).items())),
            secure=bool(metadata.secure),
        )
        facts = ((TAGS_LABEL, record.tags_label), (VERSION_LABEL, version), (UID_LABEL, uid))
        if (size := labels_text(facts)) > MAX_LABELS_TEXT:
            why = f"its tags, version and uid take {size} characters, more than {MAX_LABELS_TEXT}"
            raise InvalidRecord(uid, address, why, FollowProblem.INVALID_RECORD)
        return record


def _escaped(tag: str) -> str:
    return tag.replace("\\", "\\\\").replace(",", "\\,")
