"""What the state file holds (``state_file``), and its JSON.

Format: one JSON object, ``{"version": 1, "retiring": {worker: t, ...},
"unreachable": {...}, "cooldown_until": {...}, "retired": {worker: {"at": t,
"labels": {name: value, ...}}, ...}}``, every ``t`` a finite number, and, while
stops are held (``held_until``), ``"held_until": t``, and ``"written": {"at": t,
"boot": id, "since_boot": s}`` (``Written``). ``retired`` and ``written`` are
optional (a file written before they existed has none), and a malformed retired
mark is left out (named in ``Marks.skipped``), never failing the read of the
others.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from wool_idle.contract import encodes_as_utf8

VERSION: Final = 1
_KINDS: Final = ("retiring", "unreachable", "cooldown_until")
_HELD: Final = "held_until"
_RETIRED: Final = "retired"
_WRITTEN: Final = "written"


class StateFileError(Exception):
    """The state file is missing, unreadable or malformed: its marks are unknown."""


@dataclass(frozen=True)
class Retired:
    """A worker shown retired: the Unix time of its stop, and its group labels."""

    at: float
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Written:
    """When the marks were written: the Unix time ``at`` (in their clock), with the
    ``boot`` it was in (the kernel's boot id) and the seconds since that boot then
    (``since_boot``: a clock no one sets, counting a suspend), so that a restart in
    the same boot tells how long ago that was however the wall clock was set since."""

    at: float
    boot: str
    since_boot: float


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
    written: Written | None = field(default=None, compare=False)

    def moved(self, step: float) -> Marks:
        """These marks with every time ``step`` seconds later (the wall clock stepped
        by that much since they were written)."""
        return replace(
            self,
            retiring={w: t + step for w, t in self.retiring.items()},
            unreachable={w: t + step for w, t in self.unreachable.items()},
            cooldown_until={w: t + step for w, t in self.cooldown_until.items()},
            held_until=None if self.held_until is None else self.held_until + step,
            retired={w: replace(r, at=r.at + step) for w, r in self.retired.items()},
        )

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
        if (written := self.written) is not None:
            content[_WRITTEN] = {
                "at": round(written.at, 3),
                "boot": written.boot,
                "since_boot": round(written.since_boot, 3),
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
        if set(content) - {_HELD, _RETIRED, _WRITTEN} != {"version", *_KINDS}:
            raise StateFileError(
                f"expected the keys version, {', '.join(_KINDS)} "
                f"(and {_HELD}, {_RETIRED}, {_WRITTEN}) only"
            )
        retiring, unreachable, cooldown_until = (_times(kind, content[kind]) for kind in _KINDS)
        held = _time(_HELD, content[_HELD]) if _HELD in content else None
        retired, skipped = _retired(content.get(_RETIRED, {}))
        written = _written(content[_WRITTEN]) if _WRITTEN in content else None
        return cls(retiring, unreachable, cooldown_until, held, retired, skipped, written)


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


def _written(written: object) -> Written:
    """``Written``; ``StateFileError`` unless ``{at, boot, since_boot}``, ``boot`` text."""
    if type(written) is not dict or set(written) != {"at", "boot", "since_boot"}:
        raise StateFileError(f"{_WRITTEN}: not {{at, boot, since_boot}}")
    if type(written["boot"]) is not str:
        raise StateFileError(f"{_WRITTEN}: boot not text")
    at = _time(f"{_WRITTEN}: at", written["at"])
    return Written(at, written["boot"], _time(f"{_WRITTEN}: since_boot", written["since_boot"]))


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
