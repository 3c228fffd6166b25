"""One flag: its spellings, value type, default, environment variables and help.

Every flag but a few (``environment=False``) is also an environment variable:
``WOOL_IDLE_`` plus the flag's name in upper case with ``-`` and ``.`` as
``_`` (``--web.listen-address`` -> ``WOOL_IDLE_WEB_LISTEN_ADDRESS``). An
alias is a command-line spelling only: the variable is the primary name's
(``--listen`` of the HTTP daemons is no ``WOOL_IDLE_LISTEN``, which is the
worker's gRPC address). A switch's variable takes a boolean word, a
repeatable flag's a comma-separated list (see ``values``).

A variable wool-idle 0.1.0 read for a flag that this version does not
(``former_variable``: ``WOOL_IDLE_LISTEN`` of the HTTP daemons,
``WOOL_IDLE_GRACE`` and ``WOOL_IDLE_TIMEOUT`` of ``stop`` and ``idle``) is
refused while the flag is given neither on the command line nor by its own
variable: a unit or script written for 0.1.0 would otherwise mean something
else without a word (``stop`` cancelling tasks after 30 s, not draining them).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from wool_idle.cli.values import Value, parse_bool, parse_list

ENV_PREFIX: Final = "WOOL_IDLE_"
FLAG_SIMILARITY: Final = 0.75
"""How close (``difflib`` ratio) a flag must be to an unknown one to be suggested."""
REQUIRED: Final[Any] = dataclasses.MISSING
"""The default of a flag that must be given (a settings field without default)."""


def unrecognized(rest: Sequence[str], known: Collection[str]) -> str:
    """The error for the arguments ``rest`` no flag took, with the flag of ``known``
    likely meant by the first one that looks like a flag (``--target-file`` ->
    ``--targets-file``), as an unknown variable has one."""
    message = f"unrecognized arguments: {' '.join(rest)}"
    given = next((arg.partition("=")[0] for arg in rest if arg.startswith("--")), None)
    close = difflib.get_close_matches(given, known, n=1, cutoff=FLAG_SIMILARITY) if given else []
    return f"{message} (did you mean {close[0]}?)" if close else message


def environment_variable(option: str) -> str:
    """The variable of ``option``: ``--web.listen-address`` -> ``WOOL_IDLE_WEB_LISTEN_ADDRESS``."""
    return ENV_PREFIX + option.lstrip("-").replace("-", "_").replace(".", "_").upper()


@dataclass(frozen=True, kw_only=True)
class Flag:
    """One option: its names, its value type (None: a switch), default and variables."""

    name: str
    help: str
    value: Value[Any] | None
    default: Any
    aliases: tuple[str, ...] = ()
    repeatable: bool = False
    """A comma-separated list; the flag may also be repeated."""
    environment: bool = True
    waives_required: bool = False
    """A switch that checks a file and exits before the run: given, flags the run
    requires may be left out (``--web.config.check``)."""
    former_variable: str | None = None
    """The variable wool-idle 0.1.0 read for this flag and this version does not."""

    @property
    def dest(self) -> str:
        """The attribute (and settings field) holding the value: ``max_idle``."""
        return self.name.lstrip("-").replace("-", "_").replace(".", "_")

    @property
    def label(self) -> str:
        """How errors name the flag: every spelling, as argparse does."""
        return "/".join((self.name, *self.aliases))

    @property
    def variable(self) -> str | None:
        """The environment variable that sets the flag (None: command line only)."""
        return environment_variable(self.name) if self.environment else None

    def former_variable_error(self, environment: Mapping[str, str]) -> str | None:
        """The error when ``former_variable`` is set in ``environment`` (ask only when the
        flag was given neither on the command line nor by its own variable), else None."""
        if self.former_variable is None or self.former_variable not in environment:
            return None
        instead = f"{self.name} or {self.variable}" if self.variable else self.name
        where = "" if self.variable else " on the command line"
        return (
            f"argument {self.label}: {self.former_variable} is set, which wool-idle 0.1.0 "
            f"read as this flag and this version reads for other subcommands only: give "
            f"{instead}{where}"
        )

    def parse(self, text: str) -> Any:
        """The value ``text`` gives the flag, from the command line or the environment."""
        if self.value is None:
            return parse_bool(text)
        if self.repeatable:
            return parse_list(text, self.value.parse)
        return self.value.parse(text)

    def describe(self) -> str:
        """The ``--help`` text: the help, the default if any, the variables."""
        text = self.help
        shown = self._shown_default()
        if shown:
            text += f" (default: {shown})"
        if self.default is REQUIRED:
            text += " (required)"
        if self.repeatable:
            text += " (comma-separated list; repeatable)"
        if self.variable:
            boolean = "=true|false" if self.value is None else ""
            text += f" [env {self.variable}{boolean}]"
        return text.replace("%", "%%")

    def _shown_default(self) -> str:
        if self.value is None or self.default is REQUIRED or self.default is None:
            return ""
        if self.repeatable:
            return ",".join(self.value.show(item) for item in self.default)
        return self.value.show(self.default)
