"""Configuration files read as Go's strict YAML decoder reads them into structs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from wool_idle.web.yaml_fields import (
    ConfigFileError,
    boolean,
    entries,
    fields,
    file_path,
    parse_document,
    text,
    text_map,
    texts,
)


def node(document: str) -> yaml.Node | None:
    return parse_document(document)


class TestFields:
    def test_fields_duplicate_key_rejected(self) -> None:
        """Given a key set twice (which PyYAML's safe_load silently resolves to the
        last), when read, then an error names the key and its second line."""
        # Act
        with pytest.raises(ConfigFileError) as raised:
            fields(node("a: 1\nb: 2\na: 3\n"), {"a", "b"}, "")
        # Assert
        assert str(raised.value) == "line 3: a is given twice"

    def test_fields_duplicate_nested_key_named_by_path(self) -> None:
        """Given a nested mapping with a key twice, then the error gives its path."""
        # Arrange
        outer = fields(node("tls:\n  ca: x\n  ca: y\n"), {"tls"}, "")
        # Act / Assert
        with pytest.raises(ConfigFileError, match=r"line 3: tls\.ca is given twice"):
            fields(outer["tls"], {"ca"}, "tls")

    def test_fields_unknown_key_names_the_known_ones(self) -> None:
        """Given a key the format does not know, then the error names it and the known keys."""
        with pytest.raises(ConfigFileError, match=r"line 2: unknown key s\.c \(known: a, b\)"):
            fields(node("a: 1\nc: 2\n"), {"a", "b"}, "s")

    @pytest.mark.parametrize("document", ["<<: {a: 1}\n", "[1]: x\n"])
    def test_fields_merge_and_complex_keys_rejected(self, document: str) -> None:
        """Given a merge key or a key that is not a scalar, then an error."""
        with pytest.raises(ConfigFileError, match="plain names"):
            entries(node(document), "")

    @pytest.mark.parametrize("document", ["", "~", "null"])
    def test_fields_null_is_empty(self, document: str) -> None:
        """Given an empty document or a null, then no fields."""
        assert fields(node(document), {"a"}, "") == {}

    def test_fields_not_a_mapping(self) -> None:
        with pytest.raises(ConfigFileError, match="line 1: s must be a mapping"):
            fields(node("[1, 2]"), {"a"}, "s")


class TestScalars:
    @pytest.mark.parametrize(
        ("written", "expected"),
        [("0123", "0123"), ("1.50", "1.50"), ("yes", "yes"), ("'quoted'", "quoted"), ("~", None)],
    )
    def test_text_as_written(self, written: str, expected: str | None) -> None:
        """Given a scalar of any YAML type, then a text field takes it as written (Go
        does), and null leaves it unset."""
        assert text(fields(node(f"k: {written}"), {"k"}, "")["k"], "k") == expected

    @pytest.mark.parametrize(
        ("written", "expected"),
        [("true", True), ("no", False), ("on", True), ("OFF", False), ("Y", True), ("n", False)],
    )
    def test_boolean_yaml11_words(self, written: str, expected: bool) -> None:
        """Given YAML 1.1's boolean words unquoted, then booleans (as Go's yaml.v2)."""
        assert boolean(fields(node(f"k: {written}"), {"k"}, "")["k"], "k") is expected

    @pytest.mark.parametrize("written", ['"no"', "'true'", "1", "maybe", "[true]"])
    def test_boolean_rejects_the_rest(self, written: str) -> None:
        """Given a quoted word, a number or another word, then an error naming the key."""
        with pytest.raises(ConfigFileError, match="line 1: k must be true or false"):
            boolean(fields(node(f"k: {written}"), {"k"}, "")["k"], "k")

    def test_texts_and_text_map(self) -> None:
        """Given a list and a mapping of scalars, then their texts (null values as "")."""
        # Arrange
        found = fields(node("l: [a, 2]\nm: {x: 1, y: ~}\n"), {"l", "m"}, "")
        # Act / Assert
        assert texts(found["l"], "l") == ["a", "2"]
        assert text_map(found["m"], "m") == {"x": "1", "y": ""}

    @pytest.mark.parametrize(
        ("written", "expected"),
        [("cert.pem", "/etc/wool/cert.pem"), ("/abs/key.pem", "/abs/key.pem"), ("''", None)],
    )
    def test_file_path_relative_to_base(self, written: str, expected: str | None) -> None:
        """Given a relative, an absolute or an empty path, then the relative one is taken
        from the base directory, the absolute one as it is, and the empty one is unset."""
        # Arrange
        found = fields(node(f"k: {written}"), {"k"}, "")
        # Act
        path = file_path(found["k"], "k", Path("/etc/wool"))
        # Assert
        assert path == expected

    @pytest.mark.parametrize("document", ["k: {a: 1}", "k: [1]"])
    def test_text_rejects_collections(self, document: str) -> None:
        with pytest.raises(ConfigFileError, match="k must be a string"):
            text(fields(node(document), {"k"}, "")["k"], "k")


class TestParseDocument:
    def test_parse_document_not_yaml_gives_the_line(self) -> None:
        with pytest.raises(ConfigFileError, match=r"^line 2: not valid YAML"):
            parse_document("a: 1\n- x\n")

    @pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
    def test_parse_document_nested_too_deeply(self, opening: str) -> None:
        """Given a document nested deeper than the parser's recursion allows, then a
        ConfigFileError (a hostile file gets a clear error, not a crash)."""
        depth = 20000
        closing = {"[": "]", "{a: ": "}", "- ": ""}[opening]
        document = opening * depth + "x" + closing * depth
        with pytest.raises(ConfigFileError, match=r"^not valid YAML: nested too deeply"):
            parse_document(document)

    @given(st.text(max_size=200))
    @settings(max_examples=300)
    def test_parse_document_fuzz(self, document: str) -> None:
        """Given arbitrary text, then a node tree, None, or ConfigFileError only."""
        try:
            found = parse_document(document)
        except ConfigFileError:
            return
        assert found is None or isinstance(found, yaml.Node)
