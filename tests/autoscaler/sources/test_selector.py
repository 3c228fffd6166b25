"""``--selector label=value``: parsing, matching, and PromQL rendering."""

from __future__ import annotations

import pytest

from wool_idle.autoscaler.sources.selector import Selector, promql_string


class TestSelector:
    @pytest.mark.parametrize("text", ["pool", "=x", "1a=b", "__name__=x", "a-b=c"])
    def test_parse_rejects(self, text: str) -> None:
        """Given text that is not label=value with a usable label name, when parsed,
        then ValueError naming the selector."""
        with pytest.raises(ValueError, match="selector"):
            Selector.parse(text)

    def test_parse_keeps_everything_after_the_first_equals(self) -> None:
        """Given a value containing '=', when parsed, then the value keeps it."""
        # Act
        selector = Selector.parse("pool=a=b")
        # Assert
        assert selector == Selector("pool", "a=b")

    def test_matches(self) -> None:
        """Given a selector, then it matches only labels carrying that exact value."""
        # Arrange
        selector = Selector("pool", "gpu")
        # Act / Assert
        assert selector.matches({"pool": "gpu", "worker": "a:1"})
        assert not selector.matches({"pool": "cpu"})
        assert not selector.matches({})

    def test_promql_escapes(self) -> None:
        """Given a value with a quote, a backslash and a newline, when rendered, then it
        is one valid PromQL string literal."""
        # Act / Assert
        assert Selector("pool", 'g"p\\u\n').promql() == 'pool="g\\"p\\\\u\\n"'
        assert promql_string("plain") == '"plain"'
