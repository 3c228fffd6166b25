"""The Prometheus HTTP API's instant-vector answers, read strictly into readings."""

from __future__ import annotations

import math

import pytest
from support.instant_vector import healthy, vector

from wool_idle.autoscaler import policy
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.sources import SourceError, parse_alert_response, parse_query_responses
from wool_idle.autoscaler.verdicts import Verdict


class TestParseQueryResponses:
    def test_parse_query_responses(self) -> None:
        """Given query and age responses, when parsed, then readings carry values and
        ages; a non-numeric value is None and an unparsable age is infinite."""
        # Arrange
        values = vector(*healthy("a:1", "30"), *healthy("b:1", "abc"))
        ages = vector(({"worker": "a:1"}, "2.5"), ({"worker": "b:1"}, "x"))
        # Act
        readings = parse_query_responses(values, ages)
        # Assert
        assert readings == [Reading("a:1", 30.0, age=2.5), Reading("b:1", None, age=math.inf)]

    def test_parse_query_responses_missing_age_is_stale(self) -> None:
        """Given a worker in the value response but missing from the age response, when
        parsed and planned, then its age is unknown (infinite) and its verdict stale:
        it is never treated as fresh."""
        # Arrange
        values = vector(*healthy("a:1", "500"), *healthy("b:1", "500"))
        ages = vector(({"worker": "a:1"}, "1"))
        settings = PolicySettings(max_idle=60.0, min_workers=0)
        # Act
        readings = parse_query_responses(values, ages)
        plan = policy.plan(readings, policy.PolicyState(), settings, 0.0)
        # Assert
        assert readings[1].age == math.inf
        assert {d.worker: d.verdict for d in plan.decisions} == {
            "a:1": Verdict.STOP,
            "b:1": Verdict.STALE,
        }

    @pytest.mark.parametrize(
        ("values", "ages", "conflicting"),
        [
            (healthy("a:1", "500", job="x") + healthy("a:1", "0", job="y"), ["1"], True),
            (healthy("a:1", "0", job="x") + healthy("a:1", "500", job="y"), ["1"], True),
            (healthy("a:1", "500", job="x") + healthy("a:1", "500.0", job="y"), ["1"], False),
            (healthy("a:1", "500", job="x") + healthy("a:1", "500", job="y"), ["1", "1"], False),
        ],
    )
    def test_parse_query_responses_duplicates(self, values, ages, conflicting: bool) -> None:
        """Given duplicate series of one worker (other labels differing), when parsed,
        then equal values collapse and different values make the reading
        conflicting, which the policy never stops."""
        # Arrange
        age_items = [({"worker": "a:1", "job": str(i)}, age) for i, age in enumerate(ages)]
        settings = PolicySettings(max_idle=60.0, min_workers=0)
        # Act
        readings = parse_query_responses(vector(*values), vector(*age_items))
        plan = policy.plan(readings, policy.PolicyState(), settings, 0.0)
        # Assert
        assert [r.conflicting for r in readings] == [conflicting]
        expected = Verdict.CONFLICTING if conflicting else Verdict.STOP
        assert [d.verdict for d in plan.decisions] == [expected]

    @pytest.mark.parametrize(
        ("ages", "age"),
        [
            (["1", "40"], 40.0),
            (["40", "1"], 40.0),
            (["1", "x"], math.inf),
            (["NaN", "1"], math.inf),
        ],
    )
    def test_parse_query_responses_duplicate_ages_keep_the_oldest(
        self, ages: list[str], age: float
    ) -> None:
        """Given one worker's series scraped by two jobs at different moments (equal
        values, ages apart), when parsed, then the reading is not conflicting and its
        age is the older one (an unknown one oldest of all): the answer errs toward
        stale, never toward fresh."""
        values = healthy("a:1", "500", job="x") + healthy("a:1", "500", job="y")
        age_items = [({"worker": "a:1", "job": str(i)}, a) for i, a in enumerate(ages)]
        (reading,) = parse_query_responses(vector(*values), vector(*age_items))
        assert not reading.conflicting
        assert reading.age == age

    @pytest.mark.parametrize(
        "body",
        [
            None,
            [],
            "text",
            {"status": "error", "error": "bad"},
            {"status": "error", "error": [[["nested"]]]},
            {"status": "success"},
            {"status": "success", "data": {"resultType": "matrix", "result": []}},
            {"status": "success", "data": {"resultType": "vector", "result": {}}},
            {"status": "success", "data": {"resultType": "vector", "result": [1]}},
            vector(({"__name__": "wool_worker_up", "worker": 1}, "1")),
            vector(({"__name__": ["wool_worker_up"], "worker": "a:1"}, "1")),
            vector(({"__name__": {"x": 1}, "worker": "a:1"}, "1")),
            vector(({"__name__": 5, "worker": "a:1"}, "1")),
            vector(({"worker": "a:1"}, "1")),
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": "1"}]},
            },
        ],
    )
    def test_parse_query_malformed_raises(self, body) -> None:
        """Given a malformed API body (including labels that are not strings), when
        parsed, then SourceError and nothing else."""
        with pytest.raises(SourceError):
            parse_query_responses(body, vector())

    @pytest.mark.parametrize("worker", [None, 5, ["a:1"]])
    def test_parse_query_malformed_age_raises(self, worker) -> None:
        """Given an age sample without a string worker label, when parsed, then
        SourceError."""
        with pytest.raises(SourceError):
            parse_query_responses(vector(*healthy("a:1", "1")), vector(({"worker": worker}, "1")))

    def test_parse_query_responses_keeps_the_group_labels(self) -> None:
        """Given group-by labels, when parsed, then each reading carries their values, a
        missing label as the empty value; the age series' labels are not needed."""
        # Arrange
        values = vector(
            *healthy("a:1", "30", wool_tags="hot", wool_namespace="ns"),
            *healthy("b:1", "30", wool_namespace="ns"),
        )
        ages = vector(({"worker": "a:1"}, "1"), ({"worker": "b:1"}, "1"))
        # Act
        readings = parse_query_responses(values, ages, ("wool_tags", "wool_namespace"))
        # Assert
        assert [r.group for r in readings] == [("hot", "ns"), ("", "ns")]

    def test_parse_query_responses_keeps_the_wool_namespaces(self) -> None:
        """Given a discovered worker (its series name a wool namespace) and a
        targets-file worker (none, or an empty one), when parsed without group-by, then
        each reading carries the namespaces its series name, and the planned decision
        too (where its drop goes once stopped)."""
        # Arrange
        values = vector(
            *healthy("a:1", "900", wool_namespace="ns"),
            *healthy("b:1", "900", wool_namespace=""),
        )
        ages = vector(({"worker": "a:1"}, "1"), ({"worker": "b:1"}, "1"))
        settings = PolicySettings(max_idle=60.0, min_workers=0)
        # Act
        readings = parse_query_responses(values, ages)
        planned = policy.plan(readings, policy.PolicyState(), settings, 0.0)
        # Assert
        assert [r.namespaces for r in readings] == [frozenset({"ns"}), frozenset()]
        assert {d.worker: d.namespaces for d in planned.stops} == {
            "a:1": frozenset({"ns"}),
            "b:1": frozenset(),
        }

    def test_parse_query_group_value_not_utf8_raises(self) -> None:
        """Given a group-by label value that is a lone surrogate (JSON `"\\udcff"`),
        when parsed with that group-by, then SourceError: no exposition could render
        it (the autoscaler's own /metrics would fail on its retired mark)."""
        values = vector(*healthy("a:1", "500", pool="\udcff"))
        with pytest.raises(SourceError, match="not valid UTF-8"):
            parse_query_responses(values, vector(({"worker": "a:1"}, "1")), ("pool",))

    def test_parse_query_responses_two_groups_conflict(self) -> None:
        """Given a worker whose series disagree on a group-by label, when parsed, then
        the reading is conflicting."""
        # Arrange
        values = vector(*healthy("a:1", "30", zone="eu")[:2], *healthy("a:1", "30", zone="us")[2:])
        # Act
        (reading,) = parse_query_responses(values, vector(), ("zone",))
        # Assert
        assert reading.conflicting and reading.group == ("eu",)

    @pytest.mark.parametrize("value", [5, None, ["hot"]])
    def test_parse_query_non_string_group_label_raises(self, value) -> None:
        """Given a group-by label whose value is not a string, when parsed, then
        SourceError (the body is malformed), not a reading in a guessed group."""
        with pytest.raises(SourceError, match="non-string"):
            parse_query_responses(vector(*healthy("a:1", "1", zone=value)), vector(), ("zone",))

    @pytest.mark.parametrize("value", [1, True, None, [], {}, "1_0x"])
    def test_parse_query_non_string_value_is_no_value(self, value) -> None:
        """Given an idle sample whose value is not a numeric string (the API sends
        numbers as strings), when parsed, then the reading has no idle value."""
        # Act
        readings = parse_query_responses(
            vector(*healthy("a:1", value)), vector(({"worker": "a:1"}, "1"))
        )
        # Assert
        assert readings == [Reading("a:1", None, age=1.0)]


class TestAlerts:
    def test_parse_alert_response(self) -> None:
        """Given the ALERTS query's result, when parsed, then the workers it names."""
        # Arrange
        body = vector(
            ({"__name__": "ALERTS", "alertname": "WoolWorkerIdle", "worker": "a:1"}, "1"),
            ({"__name__": "ALERTS", "alertname": "WoolWorkerIdle"}, "1"),
        )
        # Act / Assert
        assert parse_alert_response(body) == {"a:1"}

    @pytest.mark.parametrize(
        "body", [None, {"status": "success"}, vector(({"worker": 5}, "1")), {"data": [1]}]
    )
    def test_parse_alert_malformed_raises(self, body) -> None:
        with pytest.raises(SourceError):
            parse_alert_response(body)
