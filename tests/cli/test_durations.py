"""Durations as flags take them: seconds or Prometheus-style, at most ten years."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wool_idle.cli.durations import MAX_DURATION, format_duration, parse_duration


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
