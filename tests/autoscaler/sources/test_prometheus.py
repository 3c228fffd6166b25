"""Reading a Prometheus server's HTTP API at one pinned evaluation time."""

from __future__ import annotations

import math
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from support.promtool import promtool_test

from wool_idle.autoscaler import policy
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.sources import (
    PrometheusSource,
    Selector,
    SourceError,
    age_query,
    alert_query,
    parse_alert_response,
    parse_query_responses,
    series_query,
)
from wool_idle.autoscaler.verdicts import Verdict

SERIES = ("wool_worker_idle_seconds", "wool_worker_up", "wool_worker_idle_supported")


def vector(*items: tuple[dict, object], behind: float = 0.0) -> dict:
    """An instant-vector answer evaluated ``behind`` seconds before now."""
    at = round(time.time() - behind, 3)
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": labels, "value": [at, value]} for labels, value in items],
        },
    }


def healthy(worker: str, idle: str, **extra: str) -> list[tuple[dict, str]]:
    """The three series of one up worker that supports idle."""
    values = dict(zip(SERIES, (idle, "1", "1"), strict=True))
    return [({"__name__": n, "worker": worker, **extra}, v) for n, v in values.items()]


class FakePrometheus:
    """Prometheus's query API over real HTTP, answering scripted bodies; records the
    ``time`` parameter of every query and every path asked."""

    def __init__(
        self, values: dict, ages: dict, alerts: dict | None = None, cached: dict | None = None
    ) -> None:
        self.bodies = {"values": values, "ages": ages, "alerts": alerts, "cached": cached}
        self.times: list[str | None] = []
        self.nocache: list[str | None] = []
        self.paths: list[str] = []

    async def answer(self, request: web.Request) -> web.Response:
        self.paths.append(request.path)
        query = request.query.get("query", "")
        self.times.append(request.query.get("time"))
        self.nocache.append(request.query.get("nocache"))
        kind = "ages" if query.startswith("time()") else "values"
        kind = "alerts" if "ALERTS" in query else kind
        if kind == "values" and self.bodies["cached"] and request.query.get("nocache") != "1":
            kind = "cached"
        return web.json_response(self.bodies[kind])

    async def read(self, aiohttp_server, alert: str | None = None) -> list[Reading]:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.answer)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            base = str(server.make_url("/"))
            source = PrometheusSource(session, base, [], alert, 2.0, alert_max_age=60.0)
            return await source.read()


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


class TestQueries:
    def test_queries_apply_selectors_escaped(self) -> None:
        """Given selectors with quotes, when rendered, then they are PromQL matchers."""
        # Arrange
        selectors = [Selector("pool", 'g"pu')]
        # Act / Assert
        assert series_query(selectors) == (
            '{__name__=~"wool_worker_idle_seconds|wool_worker_up|wool_worker_idle_supported",'
            'pool="g\\"pu"}'
        )
        assert age_query(selectors) == (
            'time() - timestamp(wool_worker_idle_seconds{pool="g\\"pu"})'
            ' or time() - timestamp(wool_worker_idle_supported{pool="g\\"pu"})'
        )

    def test_queries_push_every_operator_down(self) -> None:
        """Given selectors with each operator, when rendered, then each is the same
        PromQL matcher in both queries (Prometheus anchors the regexes itself)."""
        # Arrange
        selectors = [Selector.parse(s) for s in ("a!=x", "b=~h.t|c", "c!~\\d+")]
        matchers = 'a!="x",b=~"h.t|c",c!~"\\\\d+"'
        # Act / Assert
        assert series_query(selectors).endswith(f",{matchers}}}")
        assert age_query(selectors) == (
            f"time() - timestamp(wool_worker_idle_seconds{{{matchers}}})"
            f" or time() - timestamp(wool_worker_idle_supported{{{matchers}}})"
        )

    def test_alert_query_escapes_the_name(self) -> None:
        """Given an alert name with a quote, when rendered, then it is one PromQL string,
        and only samples no older than the gate's max age count."""
        assert alert_query('W"x', 90.0) == (
            'time() - timestamp(ALERTS{alertname="W\\"x",alertstate="firing"}) <= 90.0'
        )


class TestQueriesInPromtool:
    def test_alert_query_old_firing_sample_does_not_count(self, tmp_path: Path) -> None:
        """Given one worker's alert firing now and another's last firing sample three
        minutes old (a Prometheus that crashed, or a rule removed: no staleness marker,
        so an instant query still returns it for five minutes), when promtool evaluates
        the alert query with a 60 s max age, then only the first is firing."""
        alerts = 'ALERTS{alertname="WoolWorkerIdle",alertstate="firing",worker="%s"}'
        failed = promtool_test(
            tmp_path,
            [
                {"series": alerts % "now:1", "values": "1x10"},
                {"series": alerts % "old:1", "values": "1x7"},
            ],
            [
                {
                    "expr": alert_query("WoolWorkerIdle", 60.0),
                    "eval_time": "10m",
                    "exp_samples": [
                        {
                            "labels": '{alertname="WoolWorkerIdle",alertstate="firing",'
                            'worker="now:1"}',
                            "value": 0,
                        }
                    ],
                }
            ],
        )
        assert failed == ""

    def test_age_query_old_worker_takes_its_supported_sample_age(self, tmp_path: Path) -> None:
        """Given a worker with idle samples and one that predates the idle RPC (only
        `idle_supported` 0, last written three minutes ago), when promtool evaluates
        the age query, then the first has its idle sample's age and the second its
        `idle_supported` sample's."""
        failed = promtool_test(
            tmp_path,
            [
                {"series": 'wool_worker_idle_seconds{worker="a:1"}', "values": "5x10"},
                {"series": 'wool_worker_idle_supported{worker="a:1"}', "values": "1x10"},
                {"series": 'wool_worker_idle_supported{worker="old:1"}', "values": "0x7"},
            ],
            [
                {
                    "expr": age_query([]),
                    "eval_time": "10m",
                    "exp_samples": [
                        {"labels": '{worker="a:1"}', "value": 0},
                        {"labels": '{worker="old:1"}', "value": 180},
                    ],
                }
            ],
        )
        assert failed == ""


class TestPrometheusSource:
    async def test_read_pins_prometheus_evaluation_time(self, aiohttp_server) -> None:
        """Given a source gated on an alert, and a Prometheus whose clock is 2 s behind
        this host's, when read, then the policy's series are asked at Prometheus's now
        (no `time`) and the age and alert queries are pinned to the time that answer
        was evaluated at, all on /api/v1/query (/api/v1/alerts, which has no time, is
        never asked)."""
        # Arrange
        values = vector(*healthy("a:1", "500"), behind=2.0)
        at = values["data"]["result"][0]["value"][0]
        prometheus = FakePrometheus(values, vector(), vector())
        # Act
        await prometheus.read(aiohttp_server, alert="WoolWorkerIdle")
        # Assert
        assert prometheus.paths == ["/api/v1/query"] * 3
        assert prometheus.times == [None, repr(at), repr(at)]

    @pytest.mark.parametrize("behind", [25.0, -25.0, 3600.0])
    async def test_read_answer_evaluated_outside_the_read_fails(
        self, aiohttp_server, behind: float
    ) -> None:
        """Given an answer evaluated well before or after the read, by more than the
        clock tolerance (a cache between answering the same URL alike every cycle, or
        clocks apart), when read, then the read fails and nothing more is asked."""
        prometheus = FakePrometheus(vector(*healthy("a:1", "500"), behind=behind), vector())
        with pytest.raises(SourceError, match=r"outside this read .* a cached answer between"):
            await prometheus.read(aiohttp_server)
        assert prometheus.times == [None]

    async def test_read_asks_victoriametrics_for_its_now(self, aiohttp_server) -> None:
        """Given a server that, as VictoriaMetrics does, evaluates an instant query
        without `time` 30 s before its now (`-search.latencyOffset`) unless asked
        `nocache=1`, when read, then the answer is of its now, and the read stands."""
        prometheus = FakePrometheus(
            vector(*healthy("a:1", "500")),
            vector(({"worker": "a:1"}, "1")),
            cached=vector(*healthy("a:1", "500"), behind=30.0),
        )
        readings = await prometheus.read(aiohttp_server)
        assert [(r.worker, r.age) for r in readings] == [("a:1", 1.0)]
        assert prometheus.nocache == ["1", "1"]  # pinned queries too: else 30 s back

    async def test_read_no_series_asks_nothing_more(self, aiohttp_server) -> None:
        """Given Prometheus has none of the policy's series, when read, then no reading,
        and no other query is asked."""
        prometheus = FakePrometheus(vector(), vector(({"worker": "a:1"}, "1")))
        readings = await prometheus.read(aiohttp_server)
        assert readings == []
        assert prometheus.times == [None]

    @pytest.mark.parametrize("at", [None, "1700000000", float("inf"), True, [], 10**400])
    async def test_read_no_evaluation_time_fails(self, aiohttp_server, at: object) -> None:
        """Given an answer whose first sample carries no finite evaluation time, when
        read, then the read fails (nothing is pinned to a time that is not one)."""
        values = vector(*healthy("a:1", "500"))
        values["data"]["result"][0]["value"][0] = at
        prometheus = FakePrometheus(values, vector())
        with pytest.raises(SourceError, match="no finite evaluation time"):
            await prometheus.read(aiohttp_server)

    async def test_read_missing_age_is_stale(self, aiohttp_server) -> None:
        """Given Prometheus answering values for two idle workers but an age for one,
        when read and planned, then the other is stale, not stopped."""
        # Arrange
        prometheus = FakePrometheus(
            vector(*healthy("a:1", "500"), *healthy("b:1", "500")),
            vector(({"worker": "a:1"}, "1")),
        )
        settings = PolicySettings(max_idle=60.0, min_workers=0)
        # Act
        readings = await prometheus.read(aiohttp_server)
        plan = policy.plan(readings, policy.PolicyState(), settings, 0.0)
        # Assert
        assert [d.worker for d in plan.stops] == ["a:1"]
        assert {d.worker: d.verdict for d in plan.decisions}["b:1"] is Verdict.STALE

    async def test_read_alert_gate(self, aiohttp_server) -> None:
        """Given the ALERTS series firing for one of two idle workers, when read with
        the alert, then only that worker is alerting."""
        # Arrange
        prometheus = FakePrometheus(
            vector(*healthy("a:1", "99"), *healthy("b:1", "99")),
            vector(({"worker": "a:1"}, "1"), ({"worker": "b:1"}, "1")),
            vector(({"__name__": "ALERTS", "alertname": "WoolWorkerIdle", "worker": "a:1"}, "1")),
        )
        # Act
        readings = await prometheus.read(aiohttp_server, alert="WoolWorkerIdle")
        # Assert
        assert [(r.worker, r.alerting) for r in readings] == [("a:1", True), ("b:1", False)]
