"""Label regexes the way Prometheus reads them: RE2 syntax, fully anchored.

Prometheus matches ``=~`` and ``!~`` with Go's RE2 engine against the whole
label value. Matching the exporter's series in Python must agree with what a
Prometheus server would select, so a regex is accepted only within the syntax
both engines read alike: literals, ``.``, classes (``[a-z]``, ``\\d``, ``\\w``,
``\\s``, ASCII as in RE2), alternation, groups (capturing, ``(?:...)``,
``(?P<name>...)``), greedy and lazy repeats up to 1000, the anchors ``^``, ``$``,
``\\A``, ``\\b``, ``\\B`` and the flags ``i``, ``m``, ``s``. Anything else is
refused, never guessed: lookarounds, backreferences, conditionals, atomic
groups and possessive repeats (not RE2); POSIX classes ``[[:alpha:]]`` and
``\\pL`` (RE2, but Python reads the first differently and refuses the second).

The syntax is checked with Python's parser; the match itself runs on RE2
(``google-re2``), as in Prometheus: in time linear in the value, so no regex and
no label value can make a match backtrack for hours (Python's engine would, with
the GIL held: the daemon frozen, SIGTERM unanswered).
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Iterable
from typing import Any, Final, Protocol

import re2

# The standard library's own regex parser (re._parser): its tree tells exactly
# which constructs a pattern uses. Loaded by name: typeshed has no stubs for it.
_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

MAX_REPEAT_COUNT: Final = 1000
"""RE2's (and Go's) largest counted repeat, ``{n,m}``."""
_ALLOWED_FLAGS: Final = re.IGNORECASE | re.MULTILINE | re.DOTALL | re.UNICODE
_ALLOWED_AT: Final = frozenset(
    {_c.AT_BEGINNING, _c.AT_END, _c.AT_BEGINNING_STRING, _c.AT_BOUNDARY, _c.AT_NON_BOUNDARY}
)
_CLASS_ITEMS: Final = frozenset({_c.LITERAL, _c.RANGE, _c.CATEGORY, _c.NEGATE})


class LabelRegex(Protocol):
    """A compiled label regex: ``fullmatch`` is None unless the whole value matches."""

    def fullmatch(self, text: str) -> object | None: ...


def compile_label_regex(text: str) -> LabelRegex:
    """``text`` compiled to match a whole label value as Prometheus would (use
    ``fullmatch``); ``ValueError`` saying why if it is outside the shared syntax."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # "possible nested set": [[:x:]]
            tree = _parser.parse(text)
            _check(tree, tree.state.flags)
        compiled: LabelRegex = re2.compile(text)
        return compiled
    except (re.error, re2.error, ValueError, FutureWarning, RecursionError) as error:
        raise ValueError(f"invalid regex {text!r}: {error}") from None


def _check(items: Iterable[tuple[Any, Any]], flags: int) -> None:
    """Raise ``re.error`` for the first construct outside the shared syntax."""
    if flags & ~_ALLOWED_FLAGS:
        raise re.error("flags other than i, m, s are not RE2")
    for op, value in items:
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY):
            continue
        if op is _c.AT:
            if value not in _ALLOWED_AT:
                raise re.error(f"anchor {value} is not RE2 (use \\A, ^, $, \\b, \\B)")
        elif op is _c.IN:
            if any(item not in _CLASS_ITEMS for item, _ in value):
                raise re.error("unsupported character class")
        elif op is _c.BRANCH:
            for branch in value[1]:
                _check(branch, 0)
        elif op is _c.SUBPATTERN:
            _, add, remove, body = value
            _check(body, add | remove)
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            low, high, body = value
            if max(low, 0 if high is _c.MAXREPEAT else high) > MAX_REPEAT_COUNT:
                raise re.error(f"repeat count over {MAX_REPEAT_COUNT}")
            _check(body, 0)
        else:
            raise re.error(f"{str(op).lower()} is not RE2 syntax")
