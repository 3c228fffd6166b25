"""The outcome vocabulary: one value per outcome, each documented once."""

from __future__ import annotations

import ast
import inspect
import itertools

import pytest

from wool_idle.autoscaler.verdicts import StopResult, Verdict


def documented(enum: type) -> dict[str, str]:
    """Each member of ``enum`` and the docstring written under it in the source."""
    body = ast.parse(inspect.getsource(enum)).body[0].body
    docs = {}
    for statement, following in itertools.pairwise(body):
        if isinstance(statement, ast.Assign) and isinstance(following, ast.Expr):
            docs[statement.targets[0].id] = following.value.value
    return docs


class TestVocabulary:
    @pytest.mark.parametrize("enum", [Verdict, StopResult])
    def test_every_value_documented_once(self, enum: type) -> None:
        """Given an outcome enum, then every member has its own docstring in the source."""
        # Act
        docs = documented(enum)
        # Assert
        assert sorted(docs) == sorted(m.name for m in enum)
        assert all(text.strip() for text in docs.values())

    def test_no_value_in_both_enums(self) -> None:
        """Given the verdicts and the results, then no label value is spelled in both:
        each event is counted under one name."""
        assert {v.value for v in Verdict} & {r.value for r in StopResult} == set()

    def test_blocking_verdicts(self) -> None:
        """Given the verdicts, then exactly the rules' holds and the untrustworthy
        readings block (the ``reason`` values of ``wool_autoscaler_blocked_total``)."""
        # Act
        blocking = {v.value for v in Verdict if v.blocks}
        # Assert
        assert blocking == {
            "cooldown",
            "min_age",
            "min_workers",
            "rate_limit",
            "invalid_value",
            "stale",
            "conflicting",
            "invalid_address",
            "unresolved",
        }

    def test_values_are_label_values(self) -> None:
        """Given every outcome, then its value is a lower-case snake_case string and the
        enum compares equal to it (so it serves as a label value and a JSON value)."""
        for member in [*Verdict, *StopResult]:
            assert member.value.replace("_", "").isalpha() and member.value.islower()
            assert member == member.value and str(member) == member.value
