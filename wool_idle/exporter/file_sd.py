"""Prometheus file_sd documents, read as Prometheus's own loader reads them.

A ``.json`` file is JSON, anything else YAML (Prometheus takes ``.yml`` and
``.yaml``). What is accepted was checked against ``promtool check config``
(``tests/exporter/test_file_sd.py`` runs every case through both):

- The document is a list of groups; an empty or null document has none.
  A null group is an error.
- A group has only ``targets`` (a list of strings) and ``labels`` (a mapping
  of label name to value); either may be missing or null. In YAML a key given
  twice is an error; in JSON keys match case-insensitively, a later
  ``targets`` replaces an earlier one and a later ``labels`` adds to it (Go's
  decoder).
- Label names match ``[a-zA-Z_][a-zA-Z0-9_]*`` (``__``-prefixed ones too).
  A YAML value is taken as written (``3.0`` is "3.0", ``yes`` is "yes",
  ``!!binary`` is decoded), null is empty; a JSON value must be a string or
  null. Values must be valid UTF-8 (JSON's lone surrogates become U+FFFD).
- Only the first YAML document is read.

Not checked here: what Prometheus checks when it builds its own scrape targets
(a target's address, ``__scrape_interval__``...); the caller checks addresses.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import json
import re
import threading
from collections.abc import Iterator
from typing import Any, Final, Literal

import yaml

from wool_idle.contract import LABEL_NAME

Syntax = Literal["json", "yaml"]
Group = tuple[list[str], dict[str, str]]
"""One group: its targets as written, and its labels."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_NULLS: Final = frozenset({"", "~", "null", "Null", "NULL"})


class FileSdError(ValueError):
    """The document is not a file_sd document Prometheus would accept."""


def syntax_of(path: str) -> Syntax:
    """How Prometheus reads the file at ``path``: JSON for ``.json``, else YAML."""
    return "json" if path.lower().endswith(".json") else "yaml"


def parse_groups(data: bytes, *, syntax: Syntax) -> list[Group]:
    """The groups of file_sd ``data``, or ``FileSdError`` saying what is wrong."""
    try:
        document = _load_json(data) if syntax == "json" else _load_yaml(data)
    except (ValueError, yaml.YAMLError, RecursionError) as error:
        raise FileSdError(f"not valid {syntax.upper()}: {error}".splitlines()[0]) from None
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
            labels.update(_labels(value, text=_go_text))
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


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc]
    """YAML as Go's strict decoder reads it into strings: scalars as written,
    null and merge keys resolved, a key set twice in one mapping an error."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            _check_unique_keys(node)
        return super().construct_mapping(node, deep=deep)


_MERGE: Final = "tag:yaml.org,2002:merge"


def _check_unique_keys(node: yaml.MappingNode) -> None:
    """Go's strict rule, in order: a key given after it was set is an error; a
    merged key already merged is an error; a merged key given before is ignored."""
    pairs = node.value
    plain = all(isinstance(key, yaml.ScalarNode) and key.tag != _MERGE for key, _ in pairs)
    if plain and len({key.value for key, _ in pairs}) == len(pairs):
        return  # the common case: scalar keys, none twice, no merge
    merged: set[str] = set()
    given: set[str] = set()
    for key, value in node.value:
        if key.tag != _MERGE:
            keys, from_merge = [key], False
        else:
            sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
            keys = [k for s in sources if isinstance(s, yaml.MappingNode) for k, _ in s.value]
            from_merge = True
        for name in (k.value for k in keys if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE):
            if name in merged or (name in given and not from_merge):
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {name!r} already set", key.start_mark
                )
            (merged if from_merge else given).add(name)


def _as_written(loader: _Loader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    return loader.construct_scalar(node)


def _null(loader: _Loader, node: yaml.Node) -> None:
    if loader.construct_scalar(node) not in _NULLS:
        raise yaml.constructor.ConstructorError(
            None, None, f"cannot decode {node.value!r} as null", node.start_mark
        )


def _binary(loader: _Loader, node: yaml.Node) -> str:
    try:
        return base64.b64decode(loader.construct_scalar(node)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as error:
        raise yaml.constructor.ConstructorError(
            None, None, f"bad !!binary value: {error}", node.start_mark
        ) from None


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])
for _tag in ("bool", "int", "float", "timestamp", "str"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _as_written)
_Loader.add_constructor("tag:yaml.org,2002:null", _null)
_Loader.add_constructor("tag:yaml.org,2002:binary", _binary)
_Loader.add_constructor(None, _as_written)


def _load_yaml(data: bytes) -> Any:
    with _without_gc():
        loader = _Loader(data)
        try:
            return loader.get_data() if loader.check_data() else None
        finally:
            loader.dispose()


_gc_paused = threading.Lock()


@contextlib.contextmanager
def _without_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a document is composed.

    Composing allocates a node object per YAML node, all alive until the end;
    the collector would scan them over and over (three quarters of the time of a
    20,000-group file). Nothing composed is garbage until the document is built.
    """
    with _gc_paused:
        paused = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if paused:
                gc.enable()
