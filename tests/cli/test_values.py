"""What a flag's text may be: durations, booleans, lists, whole numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wool_idle.cli.values import (
    FALSE_WORDS,
    MAX_DURATION,
    TRUE_WORDS,
    choice,
    format_duration,
    parse_bool,
    parse_duration,
    parse_list,
    whole_number,
)


class TestParseDuration:
    @pytest.mark.parametrize(
        ("text", "seconds"),
        [
            ("1.5", 1.5),
            ("30s", 30.0),
            ("5m", 300.0),
            ("1h30m", 5400.0),
            ("500ms", 0.5),
            (" 2d ", 172800.0),
            ("10y", MAX_DURATION),
            ("0", 0.0),
        ],
    )
    def test_parse_duration_accepts(self, text: str, seconds: float) -> None:
        """Given seconds or a Prometheus-style duration up to 10y, then its seconds."""
        assert parse_duration(text) == seconds

    @pytest.mark.parametrize(
        "text",
        ["", "-1", "-1s", "nan", "inf", "1x", "1_000", "\u0663\u0660s", "10y1ms", "300y", "1e9"],
    )
    def test_parse_duration_rejects(self, text: str) -> None:
        """Given a negative, non-finite, non-ASCII, malformed or too long duration
        (past 10y gRPC deadlines come near their overflow), then ValueError."""
        with pytest.raises(ValueError, match="duration"):
            parse_duration(text)

    @pytest.mark.parametrize(
        "text", ["1h1h", "5m1h", "30s1h", "1ms1s", "1m1m30s", "1d1w", "1h30m1h"]
    )
    def test_parse_duration_rejects_repeated_or_unordered_units(self, text: str) -> None:
        """Given a unit repeated or out of order (as `promtool check rules` refuses
        ``for: 1h1h`` and ``for: 5m1h``: "not a valid duration string"), then
        ValueError saying how units go, rather than the sum."""
        with pytest.raises(ValueError, match="units go from the largest down"):
            parse_duration(text)

    @pytest.mark.parametrize(
        ("text", "seconds"), [("1w2d3h4m5s6ms", 788645.006), ("1m1ms", 60.001)]
    )
    def test_parse_duration_accepts_every_unit_in_order(self, text: str, seconds: float) -> None:
        """Given units from the largest down, each once (Prometheus accepts ``1m1ms``),
        then their sum."""
        assert parse_duration(text) == pytest.approx(seconds)

    @given(st.floats(min_value=0, max_value=MAX_DURATION).map(lambda s: round(s, 3)))
    def test_format_duration_round_trips(self, seconds: float) -> None:
        """Given any duration in milliseconds, when formatted and parsed back, then
        the same duration."""
        assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, abs=1e-3)

    def test_format_duration_forever(self) -> None:
        """Given the grace -1, then it shows as ``forever``."""
        assert format_duration(-1.0) == "forever"


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
