"""Configuration files read the way Go's ``yaml.UnmarshalStrict`` reads them
into structs (Prometheus and exporter-toolkit do), not the way PyYAML's
``safe_load`` would:

- a key given twice in one mapping is an error (PyYAML keeps the last one
  silently); so is a key the format does not know, and a merge key (``<<``);
- a text field takes any scalar as written (``password: 0123`` is "0123");
- a boolean field takes YAML 1.1's words, unquoted (``true``, ``no``, ``on``,
  ``Y`` ...); a quoted word is text, so ``http2: "no"`` is an error;
- null (``~``, ``null``, nothing) leaves a field unset.

Every error names the line and the key's path (``tls_config.ca_file``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Final, TypeVar

import yaml

Node = yaml.Node
NULL_TAG: Final = "tag:yaml.org,2002:null"
MERGE_TAG: Final = "tag:yaml.org,2002:merge"
TRUE_WORDS: Final = frozenset(
    {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
)
FALSE_WORDS: Final = frozenset(
    {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
)


class ConfigFileError(ValueError):
    """A configuration file is not valid; the message names the line and the key."""


Parsed = TypeVar("Parsed")


def parse_config_content(
    content: bytes, path: str, parse: Callable[[str, Path], Parsed], error: type[ValueError]
) -> Parsed:
    """``parse`` ``content``, the bytes read from the file at ``path`` (UTF-8), with
    the file's directory as the base of relative paths; ``error`` if not UTF-8.

    The directory is the one ``path`` names, symbolic links not followed (as Go's
    ``filepath.Dir``): a Kubernetes volume links ``web.yml`` and ``tls.crt`` to
    ``..data/``, which it swaps to a new timestamped directory on each update,
    so a path resolved to the directory of the day would outlive the update."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as reason:
        raise error(f"cannot read {path!r}: {reason}") from None
    return parse(text, Path(os.path.abspath(path)).parent)


def parse_document(text: str) -> Node | None:
    """The node tree of ``text`` (None for an empty document); ``ConfigFileError``
    if it is not YAML or nested deeper than the parser can follow."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigFileError(f"{where}not valid YAML: {problem}") from None
    except RecursionError:  # the composer recurses once per level of nesting
        raise ConfigFileError("not valid YAML: nested too deeply") from None


def error_at(node: Node, message: str) -> ConfigFileError:
    """A ``ConfigFileError`` for ``node``'s line."""
    return ConfigFileError(f"line {node.start_mark.line + 1}: {message}")


def is_null(node: Node | None) -> bool:
    """Whether ``node`` is absent or a YAML null."""
    return node is None or (isinstance(node, yaml.ScalarNode) and node.tag == NULL_TAG)


def join(where: str, key: str) -> str:
    """The path of ``key`` inside ``where`` (``tls_config`` + ``ca_file``)."""
    return f"{where}.{key}" if where else key


def entries(node: Node | None, where: str) -> dict[str, Node]:
    """The entries of mapping ``node`` by key as written (none when null); a key
    given twice, or one that is not a scalar, is an error."""
    return _mapping(node, where, None)


def fields(node: Node | None, known: Collection[str], where: str) -> dict[str, Node]:
    """``entries`` of a mapping whose keys must all be in ``known``."""
    return _mapping(node, where, known)


def _mapping(node: Node | None, where: str, known: Collection[str] | None) -> dict[str, Node]:
    if is_null(node):
        return {}
    assert node is not None
    if not isinstance(node, yaml.MappingNode):
        raise error_at(node, f"{where or 'the file'} must be a mapping")
    found: dict[str, Node] = {}
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == MERGE_TAG:
            raise error_at(key, f"{where or 'the file'}: keys must be plain names")
        path = join(where, key.value)
        if known is not None and key.value not in known:
            raise error_at(key, f"unknown key {path} (known: {', '.join(sorted(known))})")
        if key.value in found:
            raise error_at(key, f"{path} is given twice")
        found[key.value] = value
    return found


def text(node: Node | None, where: str) -> str | None:
    """The scalar ``node`` as written, or None when null."""
    if is_null(node):
        return None
    assert node is not None
    if not isinstance(node, yaml.ScalarNode):
        raise error_at(node, f"{where} must be a string")
    return str(node.value)


def file_path(node: Node | None, where: str, base: Path) -> str | None:
    """The file path ``node`` names, relative to ``base`` unless absolute; None when
    null or empty. A path no file can have is an error: a NUL character, or a
    lone surrogate that stands for no byte (``"\\ud800"``; ``"\\udc80"`` is how
    Python spells the byte 0x80 of an undecodable name, and is kept)."""
    value = text(node, where)
    if not value:
        return None
    if "\0" in value:
        raise ConfigFileError(f"{where}: NUL character in the path")
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        raise ConfigFileError(f"{where}: the path is not valid Unicode") from None
    return str(base / value)


def boolean(node: Node | None, where: str) -> bool | None:
    """The boolean ``node`` (a YAML 1.1 word, unquoted), or None when null."""
    if is_null(node):
        return None
    assert node is not None
    if isinstance(node, yaml.ScalarNode) and not node.style:
        if node.value in TRUE_WORDS:
            return True
        if node.value in FALSE_WORDS:
            return False
    raise error_at(node, f"{where} must be true or false")


def texts(node: Node | None, where: str) -> list[str]:
    """The scalars of sequence ``node`` as written (none when null)."""
    if is_null(node):
        return []
    assert node is not None
    if not isinstance(node, yaml.SequenceNode):
        raise error_at(node, f"{where} must be a list")
    return [text(item, where) or "" for item in node.value]


def text_map(node: Node | None, where: str) -> dict[str, str]:
    """Mapping ``node`` as text keys and text values (a null value is "")."""
    return {key: text(value, join(where, key)) or "" for key, value in entries(node, where).items()}
