"""Prometheus file_sd documents, read as Prometheus's own loader reads them.

A ``.json`` file is JSON, anything else YAML (Prometheus takes ``.yml`` and
``.yaml``). What is accepted was checked against ``promtool check config``
(``tests/exporter/test_file_sd.py`` runs every case through both):

- The document is a list of groups; an empty or null document has none.
  A null group is an error.
- A group has only ``targets`` (a list of strings) and ``labels`` (a mapping
  of label name to value); either may be missing or null. In YAML a key given
  twice is an error; in JSON keys match case-insensitively and a field given
  twice takes its last value (Go's decoder).
- Label names match ``[a-zA-Z_][a-zA-Z0-9_]*`` (``__``-prefixed ones too).
  A YAML value is taken as written (``3.0`` is "3.0", ``yes`` is "yes",
  ``!!binary`` is decoded), null is empty; a JSON value must be a string or
  null. Values must be valid UTF-8 (JSON's lone surrogates become U+FFFD).
- Only the first YAML document is read.

Not checked here: what Prometheus checks when it builds its own scrape targets
(a target's address, ``__scrape_interval__``...); the caller checks addresses.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Literal

import yaml

from wool_idle.contract import LABEL_NAME
from wool_idle.exporter.strict_yaml import load_yaml

Syntax = Literal["json", "yaml"]
Group = tuple[list[str], dict[str, str]]
"""One group: its targets as written, and its labels."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class FileSdError(ValueError):
    """The document is not a file_sd document Prometheus would accept."""


def syntax_of(path: str) -> Syntax:
    """How Prometheus reads the file at ``path``: JSON for ``.json``, else YAML."""
    return "json" if path.lower().endswith(".json") else "yaml"


def parse_groups(data: bytes, *, syntax: Syntax) -> list[Group]:
    """The groups of file_sd ``data``, or ``FileSdError`` saying what is wrong."""
    try:
        document = _load_json(data) if syntax == "json" else load_yaml(data)
    except (ValueError, yaml.YAMLError, RecursionError) as error:
        raise FileSdError(_not_valid(syntax, error)) from None
    if document is None:
        return []
    if not isinstance(document, list):
        raise FileSdError("expected a list of {targets, labels} groups")
    fields = _json_fields if syntax == "json" else _yaml_fields
    groups = []
    for index, group in enumerate(document):
        try:
            groups.append(fields(group))
        except FileSdError as error:
            raise FileSdError(f"group {index}: {error}") from None
    return groups


def _not_valid(syntax: Syntax, error: Exception) -> str:
    """One line saying why the document does not parse: JSON's message names the
    line; YAML's names it on a later line, under a context ("while parsing a flow
    mapping") that says neither where nor what, so its line and problem lead."""
    mark, problem = getattr(error, "problem_mark", None), getattr(error, "problem", None)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return f"{where}not valid {syntax.upper()}: {problem or error}".splitlines()[0]


class _Object(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs, in order (Go decodes keys in order)."""


def _load_json(data: bytes) -> Any:
    # Go's decoder turns invalid UTF-8 into U+FFFD, and refuses NaN and Infinity.
    return json.loads(
        data.decode("utf-8", "replace"),
        object_pairs_hook=_Object,
        parse_constant=_refuse_constant,
    )


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _json_fields(group: Any) -> Group:
    if not isinstance(group, _Object):
        raise FileSdError("expected a mapping with 'targets' and 'labels' only")
    targets: list[str] = []
    labels: dict[str, str] = {}
    for key, value in group:
        name = key.casefold()
        if name == "targets":
            targets = _strings(value, text=_go_text)
        elif name == "labels" and value is None:
            labels = {}
        elif name == "labels" and isinstance(value, _Object):
            labels = _labels(value, text=_go_text)
        elif name == "labels":
            raise FileSdError("'labels' must be a mapping of label name to string")
        else:
            raise FileSdError(f"unknown field {key!r} (only 'targets' and 'labels')")
    return targets, labels


def _yaml_fields(group: Any) -> Group:
    if group is None:
        raise FileSdError("a group is null")
    if not isinstance(group, dict):
        raise FileSdError("expected a mapping with 'targets' and 'labels' only")
    unknown = set(group) - {"targets", "labels"}
    if unknown:
        raise FileSdError(f"unknown field {sorted(map(str, unknown))[0]!r}")
    labels = group.get("labels")
    if labels is not None and not isinstance(labels, dict):
        raise FileSdError("'labels' must be a mapping of label name to value")
    pairs = [(k, v) for k, v in (labels or {}).items() if k is not None]
    return _strings(group.get("targets"), text=_utf8), _labels(pairs, text=_utf8)


def _strings(value: Any, *, text: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(v is None or isinstance(v, str) for v in value):
        raise FileSdError("'targets' must be a list of strings")
    return [text(v or "") for v in value]


def _labels(pairs: Any, *, text: Any) -> dict[str, str]:
    labels = {}
    for name, value in pairs:
        if not isinstance(name, str) or not LABEL_NAME.match(name):
            raise FileSdError(f"{text(str(name))!r} is not a valid label name")
        if value is not None and not isinstance(value, str):
            raise FileSdError(f"label {name!r} must have a string value")
        labels[name] = text(value or "")
    return labels


def _go_text(value: str) -> str:
    """``value`` as Go's JSON decoder has it: a lone surrogate becomes U+FFFD."""
    return value if value.isascii() else _SURROGATE.sub("\ufffd", value)


def _utf8(value: str) -> str:
    """``value``, which must encode as UTF-8 (a YAML escape can make it not)."""
    if not value.isascii() and _SURROGATE.search(value):
        raise FileSdError(f"{value!r} is not valid UTF-8")
    return value
