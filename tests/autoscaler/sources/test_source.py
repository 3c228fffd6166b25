"""What every source promises: readings, or ``SourceError`` and nothing else."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from support.cut_answer import CutAnswer

from wool_idle.autoscaler.identity import AddressResolver
from wool_idle.autoscaler.planner import PolicyPlanner
from wool_idle.autoscaler.policy import Plan, PolicySettings, Reading
from wool_idle.autoscaler.sources import (
    ExporterSource,
    PrometheusSource,
    Source,
    SourceError,
    exposition,
    prometheus,
)
from wool_idle.autoscaler.sources.source import answer_age, fetch, fetch_text
from wool_idle.contract import valid_idle
from wool_idle.logs import printable
from wool_idle.worker.address import parse_address


async def serve_every_path(aiohttp_server: Any, answer: Any) -> str:
    """A real HTTP server answering every GET with ``answer``; its base URL."""
    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    server = await aiohttp_server(app)
    return str(server.make_url("/"))


def source_of(kind: str, session: aiohttp.ClientSession, base: str) -> Source:
    """An exporter source reading ``base``'s /metrics, or a Prometheus source at ``base``."""
    if kind == "exporter":
        return ExporterSource(session, base + "metrics", [], 5.0)
    return PrometheusSource(session, base, [], None, 5.0, alert_max_age=60.0)


class TestFetch:
    @pytest.mark.parametrize(
        ("status", "body", "content_type"),
        [
            (500, "oops", "text/plain"),
            (200, "garbage{{{", "application/json"),
            (200, "[" * 100_000, "application/json"),
        ],
    )
    async def test_fetch_failures_are_source_errors(
        self, aiohttp_server, status: int, body: str, content_type: str
    ) -> None:
        """Given an HTTP answer that is an error, not JSON, or JSON nested too deeply for
        the decoder, when fetched, then SourceError."""

        # Arrange
        async def answer(request: web.Request) -> web.Response:
            return web.Response(
                status=status,
                body=body.encode("latin-1"),
                content_type=None,
                headers={"Content-Type": content_type},
            )

        app = web.Application()
        app.router.add_get("/", answer)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            # Act / Assert
            with pytest.raises(SourceError):
                await fetch(session, str(server.make_url("/")), {}, 2.0)

    @pytest.mark.parametrize("kind", ["exporter", "prometheus"])
    async def test_read_error_quoting_the_answer_is_cut(self, kind: str) -> None:
        """Given a source redirecting to a URL of 8,000 bytes that are not UTF-8 (each
        escaped as six characters in the text log: a line of 48,000, which Docker and
        the CRI split at 16 KiB and journald at 48 KiB) then a forged decision, when
        read, then the SourceError keeps the start of its text and says how long it
        was: the forged decision is in no line logged."""
        # Arrange
        forged = b"2026-01-01T00:00:00.000Z INFO wool_idle.autoscaler: decision worker=10.9.9.9:1"
        location = b"http://" + b"\xff" * 8000 + forged
        raw = b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n"
        async with CutAnswer(raw, end="close") as server, aiohttp.ClientSession() as session:
            source = source_of(kind, session, server.url.removesuffix("metrics"))
            # Act
            with pytest.raises(SourceError) as caught:
                await source.read()
        # Assert
        text = printable(str(caught.value))
        assert forged.decode() not in text and "characters)" in text
        assert len(text.encode()) < 16 * 1024


class TestFetchText:
    async def test_fetch_text_not_utf8_is_a_source_error(self, aiohttp_server) -> None:
        """Given text that is not UTF-8, though its Content-Type says it is, when fetched
        as text, then SourceError."""

        # Arrange
        async def answer(request: web.Request) -> web.Response:
            return web.Response(
                body=b"\xff\xfe", headers={"Content-Type": "text/plain; charset=utf-8"}
            )

        base = await serve_every_path(aiohttp_server, answer)
        async with aiohttp.ClientSession() as session:
            # Act / Assert
            with pytest.raises(SourceError):
                await fetch_text(session, base, 2.0, max_bytes=MiB)

    @pytest.mark.parametrize("charset", ["punycode", "utf-16", "latin-1"])
    async def test_fetch_text_reads_utf8_whatever_the_charset(
        self, aiohttp_server, charset: str
    ) -> None:
        """Given exposition text (UTF-8, as the format is) served with another charset
        in its Content-Type (one, punycode, decodes in time quadratic in the body:
        a megabyte froze the event loop for hours), when fetched as text, then it is
        read as UTF-8, as Prometheus reads it."""
        # Arrange
        text = 'wool_worker_idle_seconds{worker="127.0.0.1:1",pool="caf\u00e9"} 500\n'

        async def answer(request: web.Request) -> web.Response:
            return web.Response(
                body=text.encode(), headers={"Content-Type": f"text/plain; charset={charset}"}
            )

        base = await serve_every_path(aiohttp_server, answer)
        async with aiohttp.ClientSession() as session:
            # Act
            body, _ = await fetch_text(session, base, 2.0, max_bytes=MiB)
        # Assert
        assert body == text


MiB = 1024 * 1024
IDLE_ROW = 'wool_worker_idle_seconds{worker="127.0.0.1:%d"} 500\n'


async def endless(request: web.Request) -> web.StreamResponse:
    """A fast body that never ends (no Content-Length)."""
    response = web.StreamResponse()
    await response.prepare(request)
    row = (IDLE_ROW % 1).encode() * 1000
    while True:
        await response.write(row)


async def bomb(request: web.Request) -> web.Response:
    """8 MiB of exposition text gzipped to a few KB (Content-Encoding: gzip)."""
    body = gzip.compress((IDLE_ROW % 1).encode() * (8 * MiB // len(IDLE_ROW)))
    return web.Response(body=body, headers={"Content-Encoding": "gzip"})


async def sized(request: web.Request) -> web.Response:
    """2 MiB of JSON with its Content-Length."""
    return web.Response(text=json.dumps(["x" * 1000] * (2 * MiB // 1000)))


NOW = 1_800_000_000.0
"""A Unix time for ``answer_age``: Fri, 15 Jan 2027 08:00:00 GMT."""


class TestAnswerAge:
    @pytest.mark.parametrize(
        ("ages", "date", "expected"),
        [
            ([], None, 0.0),
            (["30", " 120 "], None, 120.0),
            (["30", "-1"], None, math.inf),
            (["²"], None, math.inf),
            ([], "Fri, 15 Jan 2027 07:59:57 GMT", 0.0),
            ([], "Fri, 15 Jan 2027 07:58:00 GMT", 120.0),
            ([], "Fri, 15 Jan 2027 07:58:00 -0000", 120.0),
            (["60"], "Fri, 15 Jan 2027 07:58:00 GMT", 120.0),
            ([], "Fri, 15 Jan 2027 08:10:00 GMT", math.inf),
            ([], "Fri, 15 Jan 2027 08:00:04 GMT", 0.0),
            ([], "yesterday", 0.0),
        ],
        ids=[
            "none",
            "largest_age",
            "negative_age",
            "non_ascii_digit",
            "date_within_tolerance",
            "old_date",
            "date_without_zone",
            "date_older_than_age",
            "future_date",
            "future_date_within_tolerance",
            "unreadable_date",
        ],
    )
    def test_answer_age_headers(self, ages: list[str], date: str | None, expected: float) -> None:
        """Given an answer's Age headers and Date, when aged at a known now, then the
        age is the largest Age or, when more and beyond the clock tolerance, now less
        the Date; an unreadable Age, or a Date ahead of now beyond the tolerance (this
        host's clock set back), is unknown (infinite), an unreadable Date none."""
        # Arrange, Act
        age = answer_age(ages, date, NOW)
        # Assert
        assert age == expected


class TestFetchCap:
    @pytest.mark.parametrize("answer", [endless, bomb, sized])
    async def test_fetch_text_body_over_the_cap_is_a_source_error(
        self, aiohttp_server, answer
    ) -> None:
        """Given a server answering a body that never ends, a small gzipped body that
        inflates to 8 MiB, or 2 MiB with its length, when fetched with a 1 MiB cap
        (and a deadline far away), then SourceError saying the body is over the cap:
        the read stops there instead of holding the whole body."""
        # Arrange
        app = web.Application()
        app.router.add_get("/", answer)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            # Act / Assert
            with pytest.raises(SourceError, match=f"body over {MiB} bytes"):
                await fetch_text(session, str(server.make_url("/")), 60.0, max_bytes=MiB)

    @pytest.mark.parametrize(
        ("members", "cut", "whole"),
        [(1, True, False), (2, True, False), (1, False, True), (2, False, True)],
    )
    async def test_fetch_text_gzip_body_reads_whole_or_fails(
        self, members: int, cut: bool, whole: bool
    ) -> None:
        """Given exposition text gzipped (in one member or two) and sent with the
        Content-Length of what is sent, when the gzip stream is cut short (a server or
        a proxy between that stopped compressing midway) and fetched, then SourceError
        (never the text up to the cut, which drops series and digits); whole, it
        reads as the text."""
        # Arrange
        text = "".join(IDLE_ROW % port for port in range(400))
        half = len(text) // 2
        parts = [text] if members == 1 else [text[:half], text[half:]]
        body = b"".join(gzip.compress(part.encode()) for part in parts)
        sent = body[: len(body) - 40] if cut else body
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n" % len(sent)
        )
        async with CutAnswer(head + sent, "close") as server, aiohttp.ClientSession() as session:
            # Act
            try:
                got: str | None = (await fetch_text(session, server.url, 5.0, max_bytes=MiB))[0]
            except SourceError:
                got = None
        # Assert
        assert got == (text if whole else None)

    @pytest.mark.parametrize("kind", ["exporter", "prometheus"])
    async def test_read_at_the_cap_reads(self, aiohttp_server, kind: str) -> None:
        """Given a source whose answers are exactly as large as the cap, when read with
        that cap, then it reads them; with one byte less, SourceError."""
        # Arrange
        text = (IDLE_ROW % 1) + 'wool_worker_up{worker="127.0.0.1:1"} 1\n'
        sample = {"metric": {"__name__": "wool_worker_up", "worker": "127.0.0.1:1"}}
        vector = {"status": "success", "data": {"resultType": "vector", "result": []}}
        vector["data"]["result"] = [{**sample, "value": [round(time.time(), 3), "1"]}]
        body = text if kind == "exporter" else json.dumps(vector)

        async def answer(request: web.Request) -> web.Response:
            return web.Response(text=body)

        app = web.Application()
        app.router.add_get("/{tail:.*}", answer)
        server = await aiohttp_server(app)
        base, size = str(server.make_url("/")), len(body.encode())
        async with aiohttp.ClientSession() as session:

            def source(limit: int) -> Source:
                if kind == "exporter":
                    return ExporterSource(session, base + "metrics", [], 5.0, max_bytes=limit)
                return PrometheusSource(
                    session, base, [], None, 5.0, alert_max_age=60.0, max_bytes=limit
                )

            # Act
            readings = await source(size).read()
            # Assert
            assert [r.worker for r in readings] == ["127.0.0.1:1"]
            with pytest.raises(SourceError, match="--source-max-bytes"):
                await source(size - 1).read()

    @pytest.mark.parametrize("kind", ["exporter", "prometheus"])
    async def test_read_parses_off_the_event_loop(
        self, aiohttp_server, monkeypatch, kind: str
    ) -> None:
        """Given a source answering a valid body, when read, then its parser runs on
        another thread than the event loop's (a large body never holds up the loop:
        /-/healthy, the other requests)."""
        # Arrange
        threads: list[threading.Thread] = []
        module = exposition if kind == "exporter" else prometheus
        name = "parse_exposition" if kind == "exporter" else "parse_query_responses"
        parse = getattr(module, name)

        def watched(*args, **kwargs):
            threads.append(threading.current_thread())
            return parse(*args, **kwargs)

        monkeypatch.setattr(module, name, watched)
        sample = '{"metric": {"__name__": "wool_worker_up", "worker": "127.0.0.1:1"}, '
        vector = '{"status": "success", "data": {"resultType": "vector", "result": [%s]}}'
        one = vector % (sample + f'"value": [{time.time():.3f}, "1"]}}')

        async def answer(request: web.Request) -> web.Response:
            return web.Response(text=IDLE_ROW % 1 if kind == "exporter" else one)

        base = await serve_every_path(aiohttp_server, answer)
        async with aiohttp.ClientSession() as session:
            source = source_of(kind, session, base)
            # Act
            await source.read()
        # Assert
        assert len(threads) == 1 and threads[0] is not threading.current_thread()


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

        base = await serve_every_path(aiohttp_server, answer)
        async with aiohttp.ClientSession() as session:
            source = source_of(kind, session, base)
            # Act / Assert
            with pytest.raises(SourceError):
                await source.read()

    @pytest.mark.parametrize("kind", ["exporter", "prometheus"])
    @pytest.mark.parametrize("status", [401, 403])
    async def test_sources_refused_credentials_name_the_flag(
        self, aiohttp_server, kind: str, status: int
    ) -> None:
        """Given a source that asks for credentials it was not given (a web config's
        basic auth or client certificate), when read, then the SourceError names the
        status and --http.config.file, where the credentials go."""

        # Arrange
        async def answer(request: web.Request) -> web.Response:
            return web.Response(status=status, text="Unauthorized")

        base = await serve_every_path(aiohttp_server, answer)
        async with aiohttp.ClientSession() as session:
            source = source_of(kind, session, base)
            # Act
            with pytest.raises(SourceError) as raised:
                await source.read()
        # Assert
        assert f"HTTP {status}" in str(raised.value) and "--http.config.file" in str(raised.value)

    async def test_source_timeout(self, aiohttp_server) -> None:
        """Given a source that never answers, when read with a 0.3s timeout, then SourceError."""

        # Arrange
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


# --- Property: arbitrary bodies over real HTTP -------------------------------------------

SETTINGS = PolicySettings(max_idle=60.0, min_workers=0, max_stops_per_cycle=100, max_staleness=30.0)
SERIES = ("wool_worker_idle_seconds", "wool_worker_up", "wool_worker_idle_supported")
WORKERS = (
    "127.0.0.2:1",
    "localhost:9",
    "127.0.0.1:9",
    "worker-name",
    "a:1 ",
    "unix:/w.sock",
    "",
    "[::1]:5",
)
"""Labels: addresses (two of them one worker's), and labels that are not addresses."""
NUMBERS = ("500", "60", "0", "1", "-1", "NaN", "+Inf", "1e999", "abc", " 500", "1_000")

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.sampled_from(NUMBERS + WORKERS + SERIES)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["status", "data", "resultType", "result", "metric", "value", "error"])
            | st.sampled_from(["__name__", "worker", "alertname"])
            | st.text(max_size=5),
            children,
            max_size=4,
        )
    ),
    max_leaves=16,
)
metrics = st.fixed_dictionaries(
    {},
    optional={
        "__name__": st.sampled_from((*SERIES, "ALERTS", "other")) | json_values,
        "worker": st.sampled_from(WORKERS) | json_values,
        "job": st.sampled_from(["x", "y"]),
    },
)
items = st.fixed_dictionaries(
    {
        "metric": metrics,
        "value": st.tuples(st.floats(), st.sampled_from(NUMBERS) | json_leaves).map(list),
    }
)
vectors = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["success", "success", "error"]) | json_leaves,
        "data": st.fixed_dictionaries(
            {
                "resultType": st.sampled_from(["vector", "vector", "matrix"]),
                "result": st.lists(items | json_values, max_size=10),
            }
        ),
    }
)
WRAPPERS = (("[", "]"), ('{"data":', "}"), ('{"result":[', "]}"), ('{"metric":{"worker":', "}}"))
deep_json = st.builds(
    lambda wrapper, depth, inner: wrapper[0] * depth + inner + wrapper[1] * depth,
    st.sampled_from(WRAPPERS),
    st.integers(0, 2_000) | st.just(100_000),
    vectors.map(json.dumps),
)
rows = st.lists(
    st.tuples(
        st.sampled_from(("127.0.0.2:1", "localhost:9", "127.0.0.1:9", *WORKERS)),
        st.sampled_from(["", "x", "y"]),
        st.sampled_from(("500", "500", "500", *NUMBERS)),
        st.sampled_from(["1", "1", "1", "1", "0", "abc"]),
        st.sampled_from(["1", "1", "1", "1", "0"]),
    ),
    max_size=6,
)
"""Per worker: (worker, job label, idle, up, supported), the shape a real source has."""


def _envelope(result: list) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def _row_items(row: tuple[str, str, str, str, str], at: float) -> list[dict]:
    """The items of one row's series, evaluated at ``at``."""
    worker, job, *values = row
    return [
        {"metric": {"__name__": name, "worker": worker, "job": job}, "value": [at, value]}
        for name, value in zip(SERIES, values, strict=True)
    ]


garbage_json = (
    vectors.map(json.dumps) | json_values.map(json.dumps) | deep_json | st.text(max_size=50)
)
sample_ages = st.sampled_from(["1", "1", "1", "0", "40", "-1", "NaN", "x"])


@st.composite
def api_bodies(draw: st.DrawFn) -> tuple[str, ...]:
    """Bodies of the values, ages and alert queries: mostly shaped like Prometheus's
    answers for one drawn fleet (duplicates, odd values and labels, missing ages
    included), each one garbage of any shape or depth one time in eight."""
    at = time.time()  # Prometheus evaluates at its now: read within max_age of it
    fleet = draw(rows)
    noise = draw(st.lists(items | json_values, max_size=1) | st.just([]))
    aged = [row for row in fleet if draw(st.integers(0, 3))]  # some workers have no age
    ages = [
        {"metric": {"worker": w, "job": j}, "value": [at, draw(sample_ages)]} for w, j, *_ in aged
    ]
    firing = draw(st.lists(st.sampled_from([row[0] for row in fleet]))) if fleet else []
    bodies = (
        _envelope([item for row in fleet for item in _row_items(row, at)] + noise),
        _envelope(ages),
        _envelope(
            [{"metric": {"__name__": "ALERTS", "worker": w}, "value": [at, "1"]} for w in firing]
        ),
    )
    return tuple(body if draw(st.integers(0, 7)) else draw(garbage_json) for body in bodies)


exposition_lines = (
    st.builds(
        "{}{{worker={}{}}} {}\n".format,
        st.sampled_from((*SERIES, "other")),
        st.sampled_from(WORKERS).map(lambda w: f'"{w}"'),
        st.sampled_from(["", ',job="x"', ',job="y"']),
        st.sampled_from(NUMBERS),
    )
    | st.sampled_from([f"# TYPE {s} gauge\n" for s in SERIES])
    | st.text(max_size=30)
)
exposition_rows = rows.map(
    lambda rs: "".join(
        f'{name}{{worker="{w}",job="{j}"}} {v}\n'
        for w, j, *values in rs
        for name, v in zip(SERIES, values, strict=True)
    )
)
exposition_bodies = st.builds(
    "".join,
    st.tuples(exposition_rows, st.lists(exposition_lines, max_size=2).map("".join) | st.just("")),
)


class Served:
    """Bodies the module's real HTTP server answers; set before each example."""

    def __init__(self) -> None:
        self.bodies: dict[str, str] = {}

    async def answer(self, request: web.Request) -> web.Response:
        query = request.query.get("query", "")
        kind = "ages" if "timestamp(" in query else "values"
        kind = "alerts" if "ALERTS" in query else kind
        kind = "metrics" if request.path == "/metrics" else kind
        return web.Response(text=self.bodies[kind])


@dataclass
class Http:
    """A real aiohttp server and client session on a loop of the test's own."""

    loop: asyncio.AbstractEventLoop
    served: Served
    session: aiohttp.ClientSession
    base: str
    resolver: AddressResolver

    def plan(self, readings: list[Reading]) -> Plan:
        """The daemon's planner's plan of ``readings`` (its names resolved once per module)."""
        return self.loop.run_until_complete(
            PolicyPlanner(SETTINGS, self.resolver).plan(readings, 0.0)
        )

    def read(self, source: Source) -> list[Reading] | None:
        """``source.read()``: its readings, None for a SourceError; anything else raises."""

        async def read() -> list[Reading] | None:
            try:
                return await source.read()
            except SourceError:
                return None

        return self.loop.run_until_complete(read())


@pytest.fixture(scope="module")
def http():
    loop = asyncio.new_event_loop()
    served = Served()
    app = web.Application()
    app.router.add_get("/{tail:.*}", served.answer)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    host, port = runner.addresses[0][:2]

    async def open_session() -> aiohttp.ClientSession:
        return aiohttp.ClientSession()

    session = loop.run_until_complete(open_session())
    yield Http(loop, served, session, f"http://{host}:{port}", AddressResolver())
    loop.run_until_complete(session.close())
    loop.run_until_complete(runner.cleanup())
    loop.close()


def _number(value: object) -> float | None:
    try:
        return float(value) if isinstance(value, str | float) else None
    except ValueError:
        return None


def _is_candidate(worker: str, series: dict[str, list], ages: list, alerting: bool) -> bool:
    """Whether the raw samples of ``worker`` make it a valid candidate: an address, every
    sample of each series agreeing, up and supported 1, idle finite and >= max_idle,
    every age known and the oldest within max_staleness (and >= 0), and alerting."""
    try:
        parse_address(worker)
    except ValueError:
        return False
    idle, up, supported = (series[name] for name in SERIES)
    if len(set(idle)) != 1 or set(up) != {1.0} or set(supported) != {1.0}:
        return False
    (value,) = set(idle)
    if not (valid_idle(value) and value >= SETTINGS.max_idle):
        return False
    known = [age for age in ages if age is not None and age == age]
    fresh = bool(ages) and len(known) == len(ages) and 0 <= max(known) <= SETTINGS.max_staleness
    return fresh and min(known, default=0.0) >= 0 and alerting


def _exposition_samples(text: str, worker: str) -> dict[str, list]:
    series: dict[str, list] = {name: [] for name in SERIES}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in series and sample.labels.get("worker") == worker:
                series[sample.name].append(sample.value)
    return series


def _api_samples(body: str, worker: str, name_label: bool = True) -> dict[str, list]:
    series: dict[str, list] = {"": []} | {name: [] for name in SERIES}
    for item in json.loads(body)["data"]["result"]:
        if item["metric"].get("worker") == worker:
            name = item["metric"].get("__name__", "") if name_label else ""
            series.setdefault(name, []).append(_number(item["value"][1]))
    return series


class TestReadProperties:
    @given(body=exposition_bodies)
    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    def test_exporter_read_arbitrary_text(self, http: Http, body: str) -> None:
        """Given arbitrary exposition text served over real HTTP, when the exporter
        source reads it and the planner plans, then read raises nothing but SourceError,
        and every stop is a valid candidate by the raw samples of the text."""
        # Arrange
        http.served.bodies = {"metrics": body}
        source = ExporterSource(http.session, f"{http.base}/metrics", [], 5.0)
        # Act
        readings = http.read(source)
        if readings is None:
            return
        plan = http.plan(readings)
        # Assert
        for decision in plan.stops:
            series = _exposition_samples(body, decision.worker)
            assert _is_candidate(decision.worker, series, [0.0], alerting=True), body

    @given(bodies=api_bodies(), alert=st.sampled_from([None, "WoolWorkerIdle"]))
    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    def test_prometheus_read_arbitrary_json(
        self, http: Http, bodies: tuple[str, str, str], alert: str | None
    ) -> None:
        """Given arbitrary JSON bodies (any shape, any depth, deep nesting included)
        served over real HTTP as Prometheus's answers, when the Prometheus source reads
        them and the planner plans, then read raises nothing but SourceError, and every
        stop is a valid candidate by the raw samples of the bodies."""
        # Arrange
        values, ages, alerts = bodies
        http.served.bodies = {"values": values, "ages": ages, "alerts": alerts}
        source = PrometheusSource(http.session, http.base, [], alert, 5.0, alert_max_age=60.0)
        # Act
        readings = http.read(source)
        if readings is None:
            return
        plan = http.plan(readings)
        # Assert
        for decision in plan.stops:
            worker = decision.worker
            age_samples = _api_samples(ages, worker, name_label=False)[""]
            firing = alert is None or bool(_api_samples(alerts, worker, name_label=False)[""])
            series = _api_samples(values, worker)
            assert _is_candidate(worker, series, age_samples, firing), (values, ages)
