"""Label regexes: only the syntax RE2 (Prometheus) and Python read alike."""

from __future__ import annotations

import pytest

from wool_idle.autoscaler.sources.regex import compile_label_regex


class TestCompileLabelRegex:
    @pytest.mark.parametrize(
        ("regex", "value", "expected"),
        [
            ("hot|cold", "cold", True),
            ("hot", "hot,cold", False),
            ("a{2,3}", "aaa", True),
            ("a{2,3}", "aaaa", False),
            ("[^a-z]+", "AB", True),
            ("(?i)hot", "HOT", True),
            ("(?s)a.b", "a\nb", True),
            ("a.b", "a\nb", False),
            ("\\w+", "caf\u00e9", False),
            ("\\bx\\b", "x", True),
            ("(?P<tag>h)ot", "hot", True),
            ("a.*?b", "axxb", True),
            ("", "", True),
        ],
    )
    def test_compile_matches_whole_values(self, regex: str, value: str, expected: bool) -> None:
        """Given a regex in the shared syntax, when compiled, then fullmatch tells
        whether the whole value matches, with RE2's ASCII classes."""
        # Act / Assert
        assert (compile_label_regex(regex).fullmatch(value) is not None) is expected

    @pytest.mark.parametrize(
        "regex",
        [
            "(",
            "a(?=b)",
            "a(?!b)",
            "(?<=a)b",
            "(?<!a)b",
            "(a)\\1",
            "(?P<x>a)(?P=x)",
            "(a)(?(1)b|c)",
            "(?>a)",
            "a*+",
            "a{1001}",
            "a{2,1001}",
            "[[:alpha:]]",
            "(?x)a b",
            "(?a)a",
            "(?u)a",
            "(?L)a",
            "\\Z",
            "\\pL",
            "\\z",
        ],
    )
    def test_compile_refuses(self, regex: str) -> None:
        """Given a regex that does not parse, or uses what RE2 lacks (lookarounds,
        backreferences, conditionals, atomic groups, possessive repeats, repeats over
        1000, Python-only flags or anchors) or what Python reads differently or not at
        all (POSIX classes, \\pL, \\z), when compiled, then ValueError naming it."""
        with pytest.raises(ValueError, match="invalid regex"):
            compile_label_regex(regex)
