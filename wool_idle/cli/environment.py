"""``WOOL_IDLE_*`` variables that no subcommand reads: a mistake, never ignored.

A misspelt variable (``WOOL_IDLE_DRYRUN``, or ``wool_idle_dry_run`` in lower
case) would otherwise be ignored without a word, and the daemon would do what
the operator meant to prevent (real stops instead of a dry run). Fail closed:
every variable whose name starts with ``WOOL_IDLE_`` in any case must be the
variable of a flag of *some* subcommand. The variables of other subcommands
stay allowed, so one environment can serve several subcommands (each reads
only its own).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Final

from wool_idle.cli.flag import ENV_PREFIX

SIMILARITY: Final = 0.75
"""How close (``difflib`` ratio of the names after the prefix) a known variable
must be to be suggested."""
_SERVICE_LINK: Final = re.compile(
    r"_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)\Z"
)
"""The variables Kubernetes adds for every Service of the namespace (service links)."""


def unread_variables(
    names: Iterable[str], known: Collection[str], command_line_only: Mapping[str, str]
) -> str | None:
    """One line naming each of ``names`` that starts with ``ENV_PREFIX`` (any case)
    and is not in ``known``, with the likely intended name; None if there is none.

    ``command_line_only`` maps the variable a flag taken only from the command
    line would have to a note saying so (``stop takes --grace ...``).
    """
    unread = sorted(
        name for name in names if name.upper().startswith(ENV_PREFIX) and name not in known
    )
    if not unread:
        return None
    plural = "s" if len(unread) > 1 else ""
    return f"unknown environment variable{plural} (no subcommand reads it): " + "; ".join(
        name + _hint(name, known, command_line_only) for name in unread
    )


def _hint(name: str, known: Collection[str], command_line_only: Mapping[str, str]) -> str:
    upper = name.upper()
    if upper in known:
        return f" (did you mean {upper}? names are upper case)"
    if upper in command_line_only:
        return f" ({command_line_only[upper]})"
    if _SERVICE_LINK.search(upper):
        return " (a Kubernetes service link? set enableServiceLinks: false in the pod spec)"
    suffixes = {variable.removeprefix(ENV_PREFIX): variable for variable in known}
    close = difflib.get_close_matches(
        upper.removeprefix(ENV_PREFIX), suffixes, n=1, cutoff=SIMILARITY
    )
    return f" (did you mean {suffixes[close[0]]}?)" if close else ""
