"""``--selector label=value``: which workers' series the autoscaler considers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from wool_idle.contract import LABEL_NAME


def promql_string(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


@dataclass(frozen=True)
class Selector:
    """A label matcher ``name=value`` that workers must carry to be considered."""

    name: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Parse ``name=value``; raise ``ValueError`` if the name is not a label name."""
        name, sep, value = text.partition("=")
        if not sep or not LABEL_NAME.match(name) or name.startswith("__"):
            raise ValueError(f"invalid selector {text!r}: expected label=value")
        return cls(name, value)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a series with ``labels`` carries this label with this value."""
        return labels.get(self.name) == self.value

    def promql(self) -> str:
        """This selector as a PromQL label matcher."""
        return f"{self.name}={promql_string(self.value)}"
