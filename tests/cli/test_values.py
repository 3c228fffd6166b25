"""What a flag's text may be: booleans, lists, whole numbers, choices."""

from __future__ import annotations

import pytest

from wool_idle.cli.values import (
    FALSE_WORDS,
    TRUE_WORDS,
    URL,
    choice,
    parse_bool,
    parse_list,
    whole_number,
)


class TestParseBool:
    @pytest.mark.parametrize("word", [*sorted(TRUE_WORDS), "TRUE", " Yes ", "On"])
    def test_parse_bool_true_words(self, word: str) -> None:
        """Given a word of the true set, in any case and with blanks, then True."""
        assert parse_bool(word) is True

    @pytest.mark.parametrize("word", [*sorted(FALSE_WORDS), "FALSE", " no ", "Off"])
    def test_parse_bool_false_words(self, word: str) -> None:
        """Given a word of the false set, in any case and with blanks, then False."""
        assert parse_bool(word) is False

    @pytest.mark.parametrize("word", ["", " ", '"true"', "'1'", "enabled", "y", "2", "truee"])
    def test_parse_bool_rejects_everything_else(self, word: str) -> None:
        """Given a word in neither set (quoted, empty, a synonym), then ValueError: it
        never silently means false (which would send real stops)."""
        with pytest.raises(ValueError, match="invalid boolean"):
            parse_bool(word)


class TestParseList:
    def test_parse_list_strips_items(self) -> None:
        """Given items with blanks after the commas, then the items without them."""
        assert parse_list("a, b ,c", str) == ["a", "b", "c"]

    @pytest.mark.parametrize("text", ["", " ", ",", " , ", "a,,b", "a,"])
    def test_parse_list_rejects_empty_items(self, text: str) -> None:
        """Given a blank or separator-only list, then ValueError (never "no restriction")."""
        with pytest.raises(ValueError, match="empty item"):
            parse_list(text, str)


class TestWholeNumberAndChoice:
    @pytest.mark.parametrize("text", ["-1", "1.0", "\u0663", "1_0", "", "two"])
    def test_whole_number_rejects(self, text: str) -> None:
        """Given a negative, fractional, non-ASCII or non-numeric text, then ValueError."""
        with pytest.raises(ValueError, match="invalid number"):
            whole_number(0).parse(text)

    def test_choice_any_case(self) -> None:
        """Given a listed word in another case, then the word as listed."""
        assert choice("text", "json").parse(" JSON ") == "json"


class TestUrl:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("http://[fe80::1%25eth0]:9/metrics", "http://[fe80::1%eth0]:9/metrics"),
            ("https://u:p%25@[fe80::1%252]:9/m?x=%25", "https://u:p%25@[fe80::1%2]:9/m?x=%25"),
            ("http://[::1]:9/a%25b", "http://[::1]:9/a%25b"),
            ("http://[fe80::1%eth0]:9/", "http://[fe80::1%eth0]:9/"),
        ],
    )
    def test_url_zone_as_aiohttp_dials_it(self, text: str, expected: str) -> None:
        """Given a URL whose IPv6 host has a zone as RFC 6874 writes it (``%25eth0``),
        then the zone as aiohttp dials it (``%eth0``); any other ``%25`` (of the
        userinfo, the path, the query) and a zone written so already stay."""
        assert URL.parse(text) == expected
