"""``--selector``: which workers' series the autoscaler considers.

A selector is one Prometheus label matcher: ``name=value``, ``name!=value``,
``name=~regex`` or ``name!~regex``, with Prometheus's meaning: a series without
the label has it with the empty value, and a regex matches the whole value
(see ``regex``). Against a Prometheus server the selectors become the
queries' own matchers; against an exporter they are matched here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from wool_idle.autoscaler.sources.regex import LabelRegex, compile_label_regex
from wool_idle.contract import LABEL_NAME

_MATCHER: Final = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)(.*)", re.DOTALL)


def promql_string(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


class MatchOp(StrEnum):
    """A PromQL label matching operator."""

    EQUAL = "="
    NOT_EQUAL = "!="
    MATCH = "=~"
    NOT_MATCH = "!~"


@dataclass(frozen=True)
class Selector:
    """A label matcher workers' series must satisfy to be considered."""

    name: str
    value: str
    op: MatchOp = MatchOp.EQUAL
    regex: LabelRegex | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not LABEL_NAME.match(self.name) or self.name.startswith("__"):
            raise ValueError(f"invalid selector label {self.name!r}")
        if self.op in (MatchOp.MATCH, MatchOp.NOT_MATCH):
            object.__setattr__(self, "regex", compile_label_regex(self.value))

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Parse ``label=value``, ``label!=value``, ``label=~regex`` or
        ``label!~regex``; ``ValueError`` naming the selector if it is none of them,
        its label is reserved (``__name__``), its regex is refused, or it is not valid
        UTF-8 (an undecodable byte of argv or the environment would be dropped from
        the query, widening ``pool=<byte>`` to ``pool=""``)."""
        try:
            text.encode()
        except UnicodeEncodeError:
            raise ValueError(f"invalid selector {text!r}: not valid UTF-8") from None
        found = _MATCHER.fullmatch(text)
        if found is None or found[1].startswith("__"):
            raise ValueError(
                f"invalid selector {text!r}: expected label=value, label!=value, "
                "label=~regex or label!~regex"
            )
        try:
            return cls(found[1], found[3], MatchOp(found[2]))
        except ValueError as error:
            raise ValueError(f"invalid selector {text!r}: {error}") from None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a series with ``labels`` satisfies this matcher (a missing label is
        the empty value)."""
        value = labels.get(self.name, "")
        if self.regex is not None:
            return (self.regex.fullmatch(value) is None) is (self.op is MatchOp.NOT_MATCH)
        return (value == self.value) is (self.op is MatchOp.EQUAL)

    def promql(self) -> str:
        """This selector as a PromQL label matcher."""
        return f"{self.name}{self.op.value}{promql_string(self.value)}"

    def __str__(self) -> str:
        return f"{self.name}{self.op.value}{self.value}"


def selecting(selectors: Sequence[Selector]) -> str:
    """What a source's description adds for ``selectors``: `` selecting {a="b",...}``,
    or nothing without any, so that a read listing no worker names what left every
    worker out."""
    if not selectors:
        return ""
    return " selecting {" + ",".join(s.promql() for s in selectors) + "}"


def empty_hint(likely: str, selectors: Sequence[Selector]) -> str:
    """The question a read listing no worker asks: ``likely``, and, with
    ``selectors``, whether they leave every worker out."""
    return likely + (", or does --selector leave every worker out?" if selectors else "?")
