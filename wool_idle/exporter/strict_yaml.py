"""YAML read as Go's strict YAML decoder (Prometheus's) reads it into strings.

- Scalars are taken as written: ``3.0`` is "3.0", ``yes`` is "yes", a date
  is its text, whatever the tag; ``!!binary`` is decoded (and must be UTF-8).
  Only null (``~``, ``null``, empty) and merge keys (``<<``) are resolved.
- A key set twice in one mapping is an error, merge keys following Go's order
  rules (see ``_check_unique_keys``).
- Only the first document of the stream is read.

The C loader is used when PyYAML has it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import re
import threading
from collections.abc import Iterator
from typing import Any, Final

import yaml

_NULLS: Final = frozenset({"", "~", "null", "Null", "NULL"})


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


def load_yaml(data: bytes) -> Any:
    """The first document of ``data``, or None; ``yaml.YAMLError`` if it is not YAML."""
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
