"""``--selector``: parsing the four matchers, matching with Prometheus's meaning, and
PromQL rendering."""

from __future__ import annotations

import subprocess
import sys

import pytest

from wool_idle.autoscaler.sources.selector import MatchOp, Selector, promql_string


class TestSelector:
    @pytest.mark.parametrize(
        "text",
        ["pool", "=x", "1a=b", "__name__=x", "__meta=~x", "a-b=c", "pool~=a"],
    )
    def test_parse_rejects(self, text: str) -> None:
        """Given text that is no matcher with a usable label name, when parsed, then
        ValueError naming the selector."""
        with pytest.raises(ValueError, match="selector"):
            Selector.parse(text)

    @pytest.mark.parametrize("text", ["pool=\udcff", "pool!=a\udcffb", "po\udcffol=x"])
    def test_parse_rejects_text_that_is_not_utf8(self, text: str) -> None:
        """Given a selector holding an undecodable byte of argv or the environment
        (a lone surrogate, dropped when the query is sent: `pool=<byte>` would reach
        Prometheus as `pool=""`), when parsed, then ValueError naming the selector."""
        with pytest.raises(ValueError, match=r"invalid selector .*not valid UTF-8"):
            Selector.parse(text)

    @pytest.mark.parametrize("text", ["pool=~(a", "pool!~a(?=b)", "pool=~(a)\\1", "pool=~x{1001}"])
    def test_parse_rejects_a_regex_outside_re2(self, text: str) -> None:
        """Given a regex that does not parse or is not RE2 syntax, when parsed, then
        ValueError naming the selector and the regex."""
        with pytest.raises(ValueError, match=r"invalid selector .*invalid regex"):
            Selector.parse(text)

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("pool=a=b", Selector("pool", "a=b")),
            ("pool!=a", Selector("pool", "a", MatchOp.NOT_EQUAL)),
            ("pool=~a|b", Selector("pool", "a|b", MatchOp.MATCH)),
            ("pool!~=~", Selector("pool", "=~", MatchOp.NOT_MATCH)),
            ("pool=", Selector("pool", "")),
            ("pool=!~x", Selector("pool", "!~x")),
        ],
    )
    def test_parse_takes_the_first_operator(self, text: str, expected: Selector) -> None:
        """Given a matcher, when parsed, then the operator is the one right after the
        label name and the value keeps everything after it."""
        # Act / Assert
        assert Selector.parse(text) == expected

    @pytest.mark.parametrize(
        ("text", "labels", "expected"),
        [
            ("pool=gpu", {"pool": "gpu", "worker": "a:1"}, True),
            ("pool=gpu", {"pool": "cpu"}, False),
            ("pool=gpu", {}, False),
            ("pool=", {}, True),
            ("pool=", {"pool": "gpu"}, False),
            ("pool!=gpu", {"pool": "cpu"}, True),
            ("pool!=gpu", {}, True),
            ("pool!=gpu", {"pool": "gpu"}, False),
            ("pool=~g.u", {"pool": "gpu"}, True),
            ("pool=~g", {"pool": "gpu"}, False),
            ("pool=~pu", {"pool": "gpu"}, False),
            ("pool=~hot|cold", {"pool": "cold"}, True),
            ("pool=~hot|cold", {"pool": "hot,cold"}, False),
            ("pool=~.*", {}, True),
            ("pool=~.+", {}, False),
            ("pool!~g.*", {"pool": "gpu"}, False),
            ("pool!~g.*", {"pool": "cpu"}, True),
            ("pool!~g.*", {}, True),
            ("pool=~\\d+", {"pool": "\u0661\u0662"}, False),
            ("pool=~(?i)GPU", {"pool": "gpu"}, True),
        ],
    )
    def test_matches_like_prometheus(self, text: str, labels: dict, expected: bool) -> None:
        """Given a matcher and a series' labels, then it matches as Prometheus would: a
        missing label is the empty value, a regex must match the whole value, and
        \\d is ASCII digits (RE2)."""
        # Act / Assert
        assert Selector.parse(text).matches(labels) is expected

    def test_matches_a_regex_that_backtracks_in_python_without_hanging(self) -> None:
        """Given a regex Prometheus accepts whose nested repeats backtrack for ever in
        Python's engine (``(\\w+\\x2c?)+``) and a tag value that does not match (it
        holds a dash), when matched in a process of its own, then the process answers
        (RE2 matches in linear time) instead of holding the GIL for hours."""
        # Arrange
        program = (
            "from wool_idle.autoscaler.sources.selector import Selector\n"
            "selector = Selector.parse('wool_tags=~(\\\\w+\\\\x2c?)+')\n"
            "print(selector.matches({'wool_tags': 'production_inference_workers_' * 2"
            " + ',us-east-1'}))\n"
        )
        process = subprocess.Popen(
            [sys.executable, "-c", program], stdout=subprocess.PIPE, text=True
        )
        # Act
        try:
            output, _ = process.communicate(timeout=60)
        finally:
            process.kill()
        # Assert
        assert (process.returncode, output) == (0, "False\n")

    @pytest.mark.parametrize(
        ("selector", "promql"),
        [
            (Selector("pool", 'g"p\\u\n'), 'pool="g\\"p\\\\u\\n"'),
            (Selector("pool", "a", MatchOp.NOT_EQUAL), 'pool!="a"'),
            (Selector("pool", "a\\.b|c", MatchOp.MATCH), 'pool=~"a\\\\.b|c"'),
            (Selector("pool", "x.*", MatchOp.NOT_MATCH), 'pool!~"x.*"'),
        ],
    )
    def test_promql_escapes(self, selector: Selector, promql: str) -> None:
        """Given a matcher, when rendered, then it is one PromQL matcher with its value
        a valid string literal (quotes, backslashes, newlines escaped)."""
        # Act / Assert
        assert selector.promql() == promql
        assert promql_string("plain") == '"plain"'

    def test_str_is_the_flag_text(self) -> None:
        """Given a parsed matcher, then its text is what the flag took."""
        assert str(Selector.parse("pool!~a|b")) == "pool!~a|b"
