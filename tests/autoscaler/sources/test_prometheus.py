"""Reading a Prometheus server's HTTP API at one pinned evaluation time."""

from __future__ import annotations

import logging
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from support.instant_vector import healthy, vector
from support.promtool import promtool_test

from wool_idle.autoscaler import policy
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.sources import (
    PrometheusSource,
    Selector,
    SourceError,
    age_query,
    alert_query,
    series_query,
)
from wool_idle.autoscaler.sources.prometheus import groups_query
from wool_idle.autoscaler.verdicts import Verdict

RULES = {
    "status": "success",
    "data": {"groups": [{"name": "wool-idle", "rules": [{"name": "WoolWorkerIdle"}]}]},
}
"""``/api/v1/rules?type=alert`` of a server loaded with the shipped alert rules (the
part the source reads)."""


class FakePrometheus:
    """Prometheus's query API over real HTTP, answering scripted bodies; records the
    ``time`` parameter of every query and every path asked (but ``/api/v1/rules``,
    answered ``rules``: a JSON body, or a status and text)."""

    def __init__(
        self,
        values: dict,
        ages: dict,
        alerts: dict | None = None,
        cached: dict | None = None,
        groups: dict | None = None,
        rules: dict | tuple[int, str] = RULES,
    ) -> None:
        self.rules = rules
        self.bodies = {
            "values": values,
            "ages": ages,
            "alerts": alerts,
            "cached": cached,
            "groups": groups,
        }
        self.times: list[str | None] = []
        self.nocache: list[str | None] = []
        self.paths: list[str] = []

    async def answer(self, request: web.Request) -> web.Response:
        if request.path == "/api/v1/rules":
            if isinstance(self.rules, tuple):
                status, text = self.rules
                return web.Response(status=status, text=text, content_type="application/json")
            return web.json_response(self.rules)
        self.paths.append(request.path)
        query = request.query.get("query", "")
        self.times.append(request.query.get("time"))
        self.nocache.append(request.query.get("nocache"))
        kind = "ages" if "timestamp(" in query else "values"
        kind = "alerts" if "ALERTS" in query else kind
        kind = "groups" if query.startswith("count by") else kind
        if kind == "values" and self.bodies["cached"] and request.query.get("nocache") != "1":
            kind = "cached"
        return web.json_response(self.bodies[kind])

    async def read(
        self,
        aiohttp_server,
        alert: str | None = None,
        selectors: tuple[Selector, ...] = (),
        group_by: tuple[str, ...] = (),
    ) -> list[Reading]:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.answer)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            base = str(server.make_url("/"))
            source = PrometheusSource(
                session, base, selectors, alert, 2.0, group_by, alert_max_age=60.0
            )
            return await source.read()


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
            '(time() - timestamp(wool_worker_idle_seconds{pool="g\\"pu"})'
            ' or (time() - timestamp(wool_worker_idle_supported{pool="g\\"pu"})'
            ' and wool_worker_idle_supported{pool="g\\"pu"} == 0))'
            ' and wool_worker_up{pool="g\\"pu"} == 1'
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
            f"(time() - timestamp(wool_worker_idle_seconds{{{matchers}}})"
            f" or (time() - timestamp(wool_worker_idle_supported{{{matchers}}})"
            f" and wool_worker_idle_supported{{{matchers}}} == 0))"
            f" and wool_worker_up{{{matchers}}} == 1"
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

    def test_groups_query_lists_every_group_of_a_worker(self, tmp_path: Path) -> None:
        """Given a worker named in pool a by one job and in pool b by another, and a
        worker only in pool a, when promtool evaluates the groups query for group-by
        pool, then the first has both groups and the second one (the jobs' label is
        left out: two jobs naming a worker in one pool are one group)."""
        failed = promtool_test(
            tmp_path,
            [
                {
                    "series": 'wool_worker_idle_seconds{worker="a:1",pool="a",job="x"}',
                    "values": "5x10",
                },
                {"series": 'wool_worker_up{worker="a:1",pool="b",job="y"}', "values": "1x10"},
                {"series": 'wool_worker_up{worker="b:1",pool="a",job="x"}', "values": "1x10"},
                {"series": 'wool_worker_up{worker="b:1",pool="a",job="y"}', "values": "1x10"},
            ],
            [
                {
                    "expr": groups_query(("pool",)),
                    "eval_time": "5m",
                    "exp_samples": [
                        {"labels": '{worker="a:1",pool="a"}', "value": 1},
                        {"labels": '{worker="a:1",pool="b"}', "value": 1},
                        {"labels": '{worker="b:1",pool="a"}', "value": 2},
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
                {"series": 'wool_worker_up{worker="a:1"}', "values": "1x10"},
                {"series": 'wool_worker_up{worker="old:1"}', "values": "1x7"},
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

    @pytest.mark.parametrize("idle", ["5x7 stale", "_x10"], ids=["was_idle", "predates_idle"])
    def test_age_query_worker_seen_down_has_no_age(self, tmp_path: Path, idle: str) -> None:
        """Given a worker last scraped down (up 0, and idle_supported 0, which the
        exporter writes for a down worker too; its idle series ended or it never had
        one), when promtool evaluates the age query, then the worker has no age: a
        reading of it up (a replica behind the same URL that has not scraped the
        crash yet) is stale, never alive by that fresh idle_supported sample."""
        failed = promtool_test(
            tmp_path,
            [
                {"series": 'wool_worker_idle_seconds{worker="a:1"}', "values": idle},
                {"series": 'wool_worker_idle_supported{worker="a:1"}', "values": "1x7 0x2"},
                {"series": 'wool_worker_up{worker="a:1"}', "values": "1x7 0x2"},
            ],
            [{"expr": age_query([]), "eval_time": "10m", "exp_samples": []}],
        )
        assert failed == ""

    def test_age_query_worker_up_without_idle_value_has_no_age(self, tmp_path: Path) -> None:
        """Given a worker still up and supporting the idle RPC whose idle series ended
        (it answers no valid idle value any more: NaN, an error, another server on its
        port), when promtool evaluates the age query, then it has no age: the only
        idle value a reading of it can carry is one from before (a scrape committed
        between the value and age queries), which its idle_supported sample's fresh
        age must not make fresh."""
        failed = promtool_test(
            tmp_path,
            [
                {"series": 'wool_worker_idle_seconds{worker="a:1"}', "values": "5x7 stale"},
                {"series": 'wool_worker_idle_supported{worker="a:1"}', "values": "1x10"},
                {"series": 'wool_worker_up{worker="a:1"}', "values": "1x10"},
            ],
            [{"expr": age_query([]), "eval_time": "10m", "exp_samples": []}],
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

    @pytest.mark.parametrize(
        ("alert", "warned"), [("WoolWorkerIdel", True), ("WoolWorkerIdle", False)]
    )
    async def test_read_alert_without_a_rule_is_warned_of(
        self, aiohttp_server, caplog, alert: str, warned: bool
    ) -> None:
        """Given --alert naming no alerting rule of the server (a typo), when read, then
        one warning names the alert and the rules there: its series never fire, so no
        worker would be retired and nothing else would say why. The shipped name is
        not warned of."""
        # Arrange
        prometheus = FakePrometheus(vector(*healthy("a:1", "500")), vector(), vector())
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            await prometheus.read(aiohttp_server, alert=alert)
        # Assert
        warnings = [r.getMessage() for r in caplog.records if "no alerting rule" in r.getMessage()]
        assert len(warnings) == int(warned)
        assert all(alert in w and "WoolWorkerIdle" in w for w in warnings)

    @pytest.mark.parametrize(
        "rules",
        [
            (404, "404 page not found"),
            (200, "{not json"),
            {"status": "success", "data": None},
            {"status": "success", "data": {"groups": {"wool-idle": []}}},
            {"status": "success", "data": {"groups": [{"rules": [{"nom": "WoolWorkerIdel"}]}]}},
            {"status": "success", "data": {"groups": [{"rules": [{"name": ["x"]}]}]}},
        ],
        ids=["404", "not-json", "no-data", "groups-not-a-list", "rule-unnamed", "name-a-list"],
    )
    async def test_read_alert_rules_unreadable_keeps_the_read(
        self, aiohttp_server, caplog, rules: dict | tuple[int, str]
    ) -> None:
        """Given a server whose rules answer cannot be read (a proxy allowing the query
        API only, or a malformed answer), when read with an --alert, then the read stands
        with its readings and nothing is warned of: the check is advice, never a fault."""
        # Arrange
        prometheus = FakePrometheus(
            vector(*healthy("a:1", "500")), vector(({"worker": "a:1"}, "1")), vector(), rules=rules
        )
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.autoscaler"):
            readings = await prometheus.read(aiohttp_server, alert="WoolWorkerIdle")
        # Assert
        assert [r.worker for r in readings] == ["a:1"]
        assert "no alerting rule" not in caplog.text

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

    async def test_read_wrong_url_names_the_flag(self, aiohttp_server) -> None:
        """Given --prometheus-url at a page under the server (its /metrics), where no
        query API is found, when read, then SourceError names --prometheus-url and the
        base URL it takes, not a bare 404."""

        # Arrange
        async def metrics(request: web.Request) -> web.Response:
            return web.Response(text="up 1\n")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            url = str(server.make_url("/metrics"))
            source = PrometheusSource(session, url, [], None, 2.0, alert_max_age=60.0)
            # Act / Assert
            with pytest.raises(SourceError, match="HTTP 404 \\(--prometheus-url is the server's"):
                await source.read()

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

    async def test_read_worker_in_another_group_outside_the_selectors_conflicts(
        self, aiohttp_server
    ) -> None:
        """Given two workers read in pool a (--selector pool=a, group-by pool), one of
        them also in pool b by the series the selector leaves out (another job or
        exporter naming it there), when read, then that one is conflicting and the
        other not (the selector hid pool b's series, and it was stopped)."""
        # Arrange
        prometheus = FakePrometheus(
            vector(*healthy("a:1", "500", pool="a"), *healthy("b:1", "500", pool="a")),
            vector(({"worker": "a:1"}, "1"), ({"worker": "b:1"}, "1")),
            groups=vector(
                ({"worker": "a:1", "pool": "a"}, "3"),
                ({"worker": "a:1", "pool": "b"}, "3"),
                ({"worker": "b:1", "pool": "a"}, "3"),
            ),
        )
        # Act
        readings = await prometheus.read(
            aiohttp_server, selectors=(Selector.parse("pool=a"),), group_by=("pool",)
        )
        # Assert
        assert [(r.worker, r.conflicting) for r in readings] == [("a:1", True), ("b:1", False)]

    async def test_read_groups_series_without_a_worker_name_no_one(self, aiohttp_server) -> None:
        """Given a worker read in pool a (--selector pool=a, group-by pool) and, outside
        the selection, a policy series with no worker label (another job's, in pool b),
        when read, then the read succeeds and the worker is not conflicting: that series
        names no worker (it failed every read: the autoscaler stopped no one, whatever
        the selection said)."""
        # Arrange
        prometheus = FakePrometheus(
            vector(*healthy("a:1", "500", pool="a")),
            vector(({"worker": "a:1"}, "1")),
            groups=vector(({"worker": "a:1", "pool": "a"}, "3"), ({"pool": "b"}, "1")),
        )
        # Act
        readings = await prometheus.read(
            aiohttp_server, selectors=(Selector.parse("pool=a"),), group_by=("pool",)
        )
        # Assert
        assert [(r.worker, r.conflicting) for r in readings] == [("a:1", False)]

    @pytest.mark.parametrize(
        "groups",
        [
            {"status": "error", "errorType": "bad_data", "error": "parse error"},
            {"status": "success", "data": {"resultType": "matrix", "result": []}},
            vector(({"worker": "a:1", "pool": 7}, "3")),
        ],
        ids=["error", "not_a_vector", "non_string_group"],
    )
    async def test_read_malformed_groups_answer_fails_the_read(
        self, aiohttp_server, groups: dict
    ) -> None:
        """Given a worker read in pool a (--selector pool=a, group-by pool) and a groups
        answer that is an error, not an instant vector, or names a group that is not a
        string, when read, then the read fails (no reading, no one stopped)."""
        # Arrange
        prometheus = FakePrometheus(
            vector(*healthy("a:1", "500", pool="a")),
            vector(({"worker": "a:1"}, "1")),
            groups=groups,
        )
        # Act / Assert
        with pytest.raises(SourceError):
            await prometheus.read(
                aiohttp_server, selectors=(Selector.parse("pool=a"),), group_by=("pool",)
            )

    async def test_read_worker_missing_from_the_groups_answer_conflicts(
        self, aiohttp_server
    ) -> None:
        """Given a worker read in pool a (--selector pool=a, group-by pool) that the
        groups answer does not list (a lagging replica, a series gone between the
        queries), when read, then it is conflicting: its pools are unknown."""
        # Arrange
        prometheus = FakePrometheus(
            vector(*healthy("a:1", "500", pool="a")),
            vector(({"worker": "a:1"}, "1")),
            groups=vector(),
        )
        # Act
        readings = await prometheus.read(
            aiohttp_server, selectors=(Selector.parse("pool=a"),), group_by=("pool",)
        )
        # Assert
        assert [(r.worker, r.conflicting) for r in readings] == [("a:1", True)]

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
