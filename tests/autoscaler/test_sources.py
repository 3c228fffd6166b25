"""Reading the exporter's exposition text and Prometheus API responses."""

from __future__ import annotations

import math

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.sources import (
    ExporterSource,
    PrometheusSource,
    Selector,
    SourceError,
    age_query,
    parse_alerts_response,
    parse_exposition,
    parse_query_responses,
    query,
)

EXPOSITION = """\
# TYPE wool_worker_idle_seconds gauge
wool_worker_idle_seconds{worker="a:1",pool="gpu"} 120.5
wool_worker_idle_seconds{worker="b:1",pool="cpu"} 0
wool_worker_idle_seconds{worker="c:1",pool="gpu"} NaN
# TYPE wool_worker_up gauge
wool_worker_up{worker="a:1",pool="gpu"} 1
wool_worker_up{worker="b:1",pool="cpu"} 1
wool_worker_up{worker="c:1",pool="gpu"} 1
wool_worker_up{worker="d:1",pool="gpu"} 0
# TYPE wool_worker_idle_supported gauge
wool_worker_idle_supported{worker="a:1",pool="gpu"} 1
wool_worker_idle_supported{worker="b:1",pool="cpu"} 1
wool_worker_idle_supported{worker="c:1",pool="gpu"} 1
wool_worker_idle_supported{worker="d:1",pool="gpu"} 0
# TYPE other_metric gauge
other_metric{worker="z:1"} 5
"""


def vector(*items: tuple[dict[str, str], str]) -> dict:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": labels, "value": [1700000000.0, value]} for labels, value in items
            ],
        },
    }


class TestParseExposition:
    def test_parse_exposition_readings(self) -> None:
        """Given an exporter's text, when parsed, then each worker has its reading and
        a NaN idle value becomes None."""
        # Act
        readings = parse_exposition(EXPOSITION)
        # Assert
        assert readings == [
            Reading("a:1", 120.5),
            Reading("b:1", 0.0),
            Reading("c:1", None),
            Reading("d:1", None, up=False, supported=False),
        ]

    def test_parse_exposition_selectors(self) -> None:
        """Given selectors, when parsed, then only matching workers remain."""
        # Act
        readings = parse_exposition(EXPOSITION, [Selector("pool", "gpu")])
        # Assert
        assert [r.worker for r in readings] == ["a:1", "c:1", "d:1"]

    @pytest.mark.parametrize(
        "text",
        [
            'wool_worker_idle_seconds{worker="a:1" 5\n',
            'wool_worker_up{worker="a"} notanumber\n',
            "{}\n",
            "\x00\x01",
        ],
    )
    def test_parse_exposition_malformed_raises(self, text: str) -> None:
        """Given malformed exposition text, when parsed, then SourceError."""
        with pytest.raises(SourceError):
            parse_exposition(text)

    @given(st.text(max_size=400))
    @settings(max_examples=300)
    def test_parse_exposition_fuzz(self, text: str) -> None:
        """Given arbitrary text, when parsed, then readings or SourceError, and every
        reading's idle is None or a finite number >= 0."""
        try:
            readings = parse_exposition(text)
        except SourceError:
            return
        for reading in readings:
            assert reading.idle is None or (math.isfinite(reading.idle) and reading.idle >= 0)


class TestParsePrometheus:
    def test_parse_query_responses(self) -> None:
        """Given query and age responses, when parsed, then readings carry values and
        ages; a non-numeric value is None."""
        # Arrange
        values = vector(
            ({"__name__": "wool_worker_idle_seconds", "worker": "a:1"}, "30"),
            ({"__name__": "wool_worker_up", "worker": "a:1"}, "1"),
            ({"__name__": "wool_worker_idle_supported", "worker": "a:1"}, "1"),
            ({"__name__": "wool_worker_idle_seconds", "worker": "b:1"}, "abc"),
            ({"__name__": "wool_worker_up", "worker": "b:1"}, "1"),
            ({"__name__": "wool_worker_idle_supported", "worker": "b:1"}, "1"),
        )
        ages = vector(({"worker": "a:1"}, "2.5"), ({"worker": "b:1"}, "+Inf"))
        # Act
        readings = parse_query_responses(values, ages)
        # Assert
        assert readings == [Reading("a:1", 30.0, age=2.5), Reading("b:1", None, age=math.inf)]

    @pytest.mark.parametrize(
        "body",
        [
            None,
            [],
            "text",
            {"status": "error", "error": "bad"},
            {"status": "success"},
            {"status": "success", "data": {"resultType": "matrix", "result": []}},
            {"status": "success", "data": {"resultType": "vector", "result": {}}},
            {"status": "success", "data": {"resultType": "vector", "result": [1]}},
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [
                        {"metric": {"__name__": "wool_worker_up", "worker": 1}, "value": [1, "1"]}
                    ],
                },
            },
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": "1"}]},
            },
        ],
    )
    def test_parse_query_malformed_raises(self, body) -> None:
        """Given a malformed API body, when parsed, then SourceError."""
        with pytest.raises(SourceError):
            parse_query_responses(body, vector())

    def test_parse_alerts_response(self) -> None:
        """Given alerts, when parsed for one name, then only its firing workers return."""
        # Arrange
        body = {
            "status": "success",
            "data": {
                "alerts": [
                    {"labels": {"alertname": "WoolWorkerIdle", "worker": "a:1"}, "state": "firing"},
                    {
                        "labels": {"alertname": "WoolWorkerIdle", "worker": "b:1"},
                        "state": "pending",
                    },
                    {"labels": {"alertname": "WoolWorkerDown", "worker": "c:1"}, "state": "firing"},
                ]
            },
        }
        # Act / Assert
        assert parse_alerts_response(body, "WoolWorkerIdle") == {"a:1"}

    @pytest.mark.parametrize(
        "body", [None, {"status": "success"}, {"status": "success", "data": {"alerts": [1]}}]
    )
    def test_parse_alerts_malformed_raises(self, body) -> None:
        with pytest.raises(SourceError):
            parse_alerts_response(body, "X")

    json_values = st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=10),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "status",
                        "data",
                        "resultType",
                        "result",
                        "metric",
                        "value",
                        "alerts",
                        "labels",
                        "state",
                        "worker",
                        "__name__",
                        "alertname",
                    ]
                ),
                children,
                max_size=5,
            )
        ),
        max_leaves=20,
    )

    @given(values=json_values, ages=json_values, alerts=json_values)
    @settings(max_examples=300)
    def test_parse_prometheus_fuzz(self, values, ages, alerts) -> None:
        """Given arbitrary JSON, when parsed, then readings or SourceError only."""
        try:
            readings = parse_query_responses(values, ages)
            parse_alerts_response(alerts, "WoolWorkerIdle")
        except SourceError:
            return
        for reading in readings:
            assert reading.idle is None or (math.isfinite(reading.idle) and reading.idle >= 0)

    def test_queries_apply_selectors_escaped(self) -> None:
        """Given selectors with quotes, when rendered, then they are PromQL matchers."""
        # Arrange
        selectors = [Selector("pool", 'g"pu')]
        # Act / Assert
        assert query(selectors) == (
            '{__name__=~"wool_worker_idle_seconds|wool_worker_up|wool_worker_idle_supported",'
            'pool="g\\"pu"}'
        )
        assert age_query(selectors) == 'time() - timestamp(wool_worker_idle_seconds{pool="g\\"pu"})'

    @pytest.mark.parametrize("text", ["pool", "=x", "1a=b", "__name__=x", "a-b=c"])
    def test_selector_parse_rejects(self, text: str) -> None:
        with pytest.raises(ValueError, match="selector"):
            Selector.parse(text)


class TestSourcesOverHttp:
    @pytest.mark.parametrize(
        ("kind", "status", "body"),
        [
            ("exporter", 200, "garbage{{{"),
            ("exporter", 500, "oops"),
            ("prometheus", 200, "garbage{{{"),
            ("prometheus", 500, "oops"),
            ("prometheus", 200, '{"status": "error", "error": "x"}'),
        ],
    )
    async def test_sources_report_bad_answers(self, aiohttp_server, kind, status, body) -> None:
        """Given an HTTP server answering garbage or errors, when a source reads it,
        then SourceError."""

        # Arrange
        async def answer(request: web.Request) -> web.Response:
            return web.Response(status=status, text=body)

        app = web.Application()
        app.router.add_get("/{tail:.*}", answer)
        server = await aiohttp_server(app)
        base = str(server.make_url("/"))
        async with aiohttp.ClientSession() as session:
            source = (
                ExporterSource(session, base + "metrics", [], 2.0)
                if kind == "exporter"
                else PrometheusSource(session, base, [], None, 2.0)
            )
            # Act / Assert
            with pytest.raises(SourceError):
                await source.read()

    async def test_source_timeout(self, aiohttp_server) -> None:
        """Given a source that never answers, when read with a 0.3s timeout, then SourceError."""
        # Arrange
        import asyncio

        async def hang(request: web.Request) -> web.Response:
            await asyncio.sleep(30)
            return web.Response(text="")

        app = web.Application()
        app.router.add_get("/metrics", hang)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            source = ExporterSource(session, str(server.make_url("/metrics")), [], 0.3)
            # Act / Assert
            with pytest.raises(SourceError, match="Timeout"):
                await source.read()

    async def test_prometheus_source_reads_alert_gate(self, aiohttp_server) -> None:
        """Given a server with Prometheus's API shape, when read with an alert, then
        only the firing worker is alerting."""

        # Arrange
        async def api_query(request: web.Request) -> web.Response:
            if request.query["query"].startswith("time()"):
                return web.json_response(vector(({"worker": "a:1"}, "1"), ({"worker": "b:1"}, "1")))
            return web.json_response(
                vector(
                    *[
                        ({"__name__": n, "worker": w}, v)
                        for w in ("a:1", "b:1")
                        for n, v in (
                            ("wool_worker_idle_seconds", "99"),
                            ("wool_worker_up", "1"),
                            ("wool_worker_idle_supported", "1"),
                        )
                    ]
                )
            )

        async def api_alerts(request: web.Request) -> web.Response:
            return web.json_response(
                {
                    "status": "success",
                    "data": {
                        "alerts": [
                            {
                                "labels": {"alertname": "WoolWorkerIdle", "worker": "a:1"},
                                "state": "firing",
                            }
                        ]
                    },
                }
            )

        app = web.Application()
        app.router.add_get("/api/v1/query", api_query)
        app.router.add_get("/api/v1/alerts", api_alerts)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            source = PrometheusSource(session, str(server.make_url("/")), [], "WoolWorkerIdle", 2.0)
            # Act
            readings = await source.read()
        # Assert
        assert [(r.worker, r.alerting) for r in readings] == [("a:1", True), ("b:1", False)]
