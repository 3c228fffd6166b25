"""Reading an exporter's exposition text."""

from __future__ import annotations

import math
import time
from email.utils import formatdate

import aiohttp
import pytest
from aiohttp import web
from support.cut_answer import CutAnswer

from wool_idle.autoscaler import policy
from wool_idle.autoscaler.policy import PolicySettings, Reading
from wool_idle.autoscaler.sources import ExporterSource, Selector, SourceError, parse_exposition
from wool_idle.autoscaler.sources.exposition import MAX_LINE
from wool_idle.autoscaler.verdicts import Verdict

OLD_DATE = formatdate(time.time() - 3600, usegmt=True)
"""An HTTP ``Date`` of an hour ago."""
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


def exposition(*rows: tuple[str, str, float]) -> str:
    """Exposition text: for each (worker, extra labels, idle), its three series."""
    return "".join(
        f'wool_worker_idle_seconds{{worker="{w}"{extra}}} {idle}\n'
        f'wool_worker_up{{worker="{w}"{extra}}} 1\n'
        f'wool_worker_idle_supported{{worker="{w}"{extra}}} 1\n'
        for w, extra, idle in rows
    )


class TestParseExposition:
    def test_parse_exposition_readings(self) -> None:
        """Given an exporter's text, when parsed, then each worker has its reading, read
        just now (age 0), and a NaN idle value becomes None."""
        # Act
        readings = parse_exposition(EXPOSITION)
        # Assert
        assert readings == [
            Reading("a:1", 120.5),
            Reading("b:1", 0.0),
            Reading("c:1", None),
            Reading("d:1", None, up=False, supported=False),
        ]

    @pytest.mark.parametrize(
        ("selectors", "workers"),
        [
            (["pool=gpu"], ["a:1", "c:1", "d:1"]),
            (["pool!=gpu"], ["b:1"]),
            (["pool=~g.u|x"], ["a:1", "c:1", "d:1"]),
            (["pool!~.pu"], []),
            (["pool=~gpu", "worker!~[cd]:1"], ["a:1"]),
            (["zone="], ["a:1", "b:1", "c:1", "d:1"]),
        ],
    )
    def test_parse_exposition_selectors(self, selectors: list[str], workers: list[str]) -> None:
        """Given selectors (every matcher operator; a label no series has is the empty
        value), when parsed, then only the workers matching all of them remain."""
        # Act
        readings = parse_exposition(EXPOSITION, [Selector.parse(s) for s in selectors])
        # Assert
        assert [r.worker for r in readings] == workers

    def test_parse_exposition_keeps_the_group_labels(self) -> None:
        """Given group-by labels, when parsed, then each reading carries their values in
        order, a missing label as the empty value."""
        # Arrange
        text = exposition(("a:1", ',wool_tags="hot",zone="eu"', 90), ("b:1", ',zone="us"', 90))
        # Act
        readings = parse_exposition(text, group_by=("wool_tags", "zone"))
        # Assert
        assert [(r.worker, r.group) for r in readings] == [
            ("a:1", ("hot", "eu")),
            ("b:1", ("", "us")),
        ]
        assert parse_exposition(text)[0].group == ()

    def test_parse_exposition_keeps_the_wool_namespaces_without_group_by(self) -> None:
        """Given a discovered worker (its series name a wool namespace), a targets-file
        worker (none) and a worker whose series name two, when parsed without group-by,
        then each reading carries the namespaces its series name, and two namespaces
        make no conflict (they decide no stop, only where its drop goes)."""
        # Arrange
        text = exposition(
            ("a:1", ',wool_namespace="ns",wool_tags="hot"', 90),
            ("b:1", ',pool="gpu"', 90),
        ) + (
            'wool_worker_idle_seconds{worker="c:1",wool_namespace="one"} 90\n'
            'wool_worker_up{worker="c:1",wool_namespace="two"} 1\n'
            'wool_worker_idle_supported{worker="c:1",wool_namespace="one"} 1\n'
        )
        # Act
        readings = parse_exposition(text)
        # Assert
        assert [(r.worker, r.namespaces, r.conflicting) for r in readings] == [
            ("a:1", frozenset({"ns"}), False),
            ("b:1", frozenset(), False),
            ("c:1", frozenset({"one", "two"}), False),
        ]

    def test_parse_exposition_series_in_two_groups_conflict(self) -> None:
        """Given a worker whose up series has another wool_tags value than its idle
        series, when parsed with group-by wool_tags and planned, then it is conflicting
        (never stopped); without group-by the label is not read and it is a stop."""
        # Arrange
        text = (
            'wool_worker_idle_seconds{worker="a:1",wool_tags="hot"} 500\n'
            'wool_worker_up{worker="a:1",wool_tags="cold"} 1\n'
            'wool_worker_idle_supported{worker="a:1",wool_tags="hot"} 1\n'
        )
        settings = PolicySettings(max_idle=60.0, min_workers=0, group_by=("wool_tags",))
        # Act
        grouped = policy.plan(
            parse_exposition(text, (), ("wool_tags",)), policy.PolicyState(), settings, 0.0
        )
        plain = policy.plan(parse_exposition(text), policy.PolicyState(), settings, 0.0)
        # Assert
        assert [d.verdict for d in grouped.decisions] == [Verdict.CONFLICTING]
        assert [d.verdict for d in plain.decisions] == [Verdict.STOP]

    def test_parse_exposition_worker_in_another_group_outside_the_selectors_conflicts(
        self,
    ) -> None:
        """Given a worker named in pool a and, by other series (another job or
        exporter), in pool b, when parsed with --selector pool=a and group-by pool,
        then it is conflicting: never stopped for pool a while pool b may need it (the
        selector hid pool b's series, and it was stopped)."""
        # Arrange
        series = ("wool_worker_idle_seconds", "wool_worker_up", "wool_worker_idle_supported")
        text = "".join(
            f'{name}{{worker="a:1",pool="{pool}"}} {value}\n'
            for pool in ("a", "b")
            for name, value in zip(series, ("500", "1", "1"), strict=True)
        )
        settings = PolicySettings(max_idle=60.0, min_workers=0, group_by=("pool",))
        # Act
        readings = parse_exposition(text, [Selector.parse("pool=a")], ("pool",))
        plan = policy.plan(readings, policy.PolicyState(), settings, 0.0)
        # Assert
        assert [(d.worker, d.verdict) for d in plan.decisions] == [("a:1", Verdict.CONFLICTING)]

    def test_parse_exposition_timestamps_give_ages(self) -> None:
        """Given text whose samples carry timestamps (from /federate or a caching
        proxy): one idle worker stamped in 2001, one stamped now, an old
        worker without the idle RPC stamped in 2001, and one worker not stamped, when
        parsed and planned, then the ages are now less the stamps (0 unstamped), so
        the worker of 2001 is stale, never stopped, and neither it nor the old worker
        holds the floor."""
        # Arrange
        now_ms = int(time.time() * 1000)
        text = (
            f'wool_worker_idle_seconds{{worker="old:1"}} 500 1000000000000\n'
            f'wool_worker_up{{worker="old:1"}} 1 1000000000000\n'
            f'wool_worker_idle_supported{{worker="old:1"}} 1 1000000000000\n'
            f'wool_worker_idle_seconds{{worker="new:1"}} 500 {now_ms}\n'
            f'wool_worker_up{{worker="new:1"}} 1 {now_ms}\n'
            f'wool_worker_idle_supported{{worker="new:1"}} 1 {now_ms}\n'
            f'wool_worker_up{{worker="pre:1"}} 1\n'
            f'wool_worker_idle_supported{{worker="pre:1"}} 0 1000000000000\n'
            'wool_worker_idle_seconds{worker="bare:1"} 5\n'
            'wool_worker_up{worker="bare:1"} 1\n'
            'wool_worker_idle_supported{worker="bare:1"} 1\n'
        )
        settings = PolicySettings(max_idle=60.0, min_workers=1)
        # Act
        readings = {r.worker: r for r in parse_exposition(text)}
        plan = policy.plan(list(readings.values()), policy.PolicyState(), settings, 0.0)
        # Assert
        assert readings["old:1"].age > 10 * 365 * 86400
        assert readings["pre:1"].age > 10 * 365 * 86400
        assert 0 <= readings["new:1"].age < 60 and readings["bare:1"].age == 0
        assert {d.worker: d.verdict for d in plan.decisions} == {
            "old:1": Verdict.STALE,
            "new:1": Verdict.STOP,
            "pre:1": Verdict.STALE,
            "bare:1": Verdict.BUSY,
        }

    def test_parse_exposition_timestamp_far_ahead_is_stale(self) -> None:
        """Given text from /federate stamped a day ahead of this host's clock (the clock
        set back since: NTP, ``date -s``) and one stamped 2 s ahead, when parsed and
        planned, then the one a day ahead is of unknown age, stale and never stopped
        (its true age is unknown, not 0), and the one within the clock tolerance reads
        as fresh."""
        # Arrange
        ahead_ms = int((time.time() + 86400) * 1000)
        near_ms = int((time.time() + 2) * 1000)
        text = "".join(
            f'wool_worker_idle_seconds{{worker="{w}"}} 500 {ms}\n'
            f'wool_worker_up{{worker="{w}"}} 1 {ms}\n'
            f'wool_worker_idle_supported{{worker="{w}"}} 1 {ms}\n'
            for w, ms in (("ahead:1", ahead_ms), ("near:1", near_ms))
        )
        settings = PolicySettings(max_idle=60.0, min_workers=0)
        # Act
        readings = {r.worker: r for r in parse_exposition(text, age=1.0)}
        plan = policy.plan(list(readings.values()), policy.PolicyState(), settings, 0.0)
        # Assert
        assert readings["ahead:1"].age == math.inf
        assert readings["near:1"].age == 1.0
        assert {d.worker: d.verdict for d in plan.decisions} == {
            "ahead:1": Verdict.STALE,
            "near:1": Verdict.STOP,
        }

    def test_parse_exposition_group_value_not_utf8_raises(self) -> None:
        """Given a group-by label value that is no text (a lone surrogate, from a body
        in an odd charset), when parsed with that group-by, then SourceError (no
        reading carries a group no exposition could render)."""
        text = exposition(("a:1", ',pool="\udcff"', 90))
        with pytest.raises(SourceError, match="not valid UTF-8"):
            parse_exposition(text, group_by=("pool",))

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

    def test_parse_exposition_conflicting_duplicates_never_stop(self) -> None:
        """Given two idle series of one worker that differ only in an extra label, one
        saying 500 and the other 0, when parsed and planned, then the reading is
        conflicting and the worker is not stopped, whichever series comes last."""
        # Arrange
        settings = PolicySettings(max_idle=60.0, min_workers=0)
        texts = [
            exposition(("a:1", ',job="x"', 500), ("a:1", ',job="y"', 0)),
            exposition(("a:1", ',job="x"', 0), ("a:1", ',job="y"', 500)),
        ]
        # Act
        plans = [
            policy.plan(parse_exposition(t), policy.PolicyState(), settings, 0.0) for t in texts
        ]
        # Assert
        for plan in plans:
            assert [(d.worker, d.verdict) for d in plan.decisions] == [("a:1", Verdict.CONFLICTING)]

    def test_parse_exposition_identical_duplicates_collapse(self) -> None:
        """Given two identical idle series of one worker (other labels differing), when
        parsed, then they collapse into one plain reading."""
        # Act
        readings = parse_exposition(exposition(("a:1", ',job="x"', 500), ("a:1", ',job="y"', 500)))
        # Assert
        assert readings == [Reading("a:1", 500.0)]

    @pytest.mark.parametrize("kind", ["summary", "histogram"])
    def test_parse_exposition_reads_no_value_from_a_summary_or_histogram(self, kind: str) -> None:
        """Given an idle family typed summary or histogram (its samples are
        ``_count``, ``_sum``, ``_bucket``: no idle value, and Prometheus stores them as
        series of other names), when parsed, then no idle value is read from them."""
        # Arrange
        text = (
            f"# TYPE wool_worker_idle_seconds {kind}\n"
            'wool_worker_idle_seconds_bucket{worker="a:1",le="+Inf"} 5000\n'
            'wool_worker_idle_seconds_count{worker="a:1"} 5000\n'
            "# TYPE wool_worker_up gauge\n"
            'wool_worker_up{worker="a:1"} 1\n'
        )
        if kind == "summary":
            text = text.replace("_bucket", "_sum").replace(',le="+Inf"', "")
        # Act
        readings = parse_exposition(text)
        # Assert
        assert readings == [Reading("a:1", None, supported=False)]

    def test_parse_exposition_line_over_the_cap_raises(self) -> None:
        """Given a line longer than ``MAX_LINE`` (the parser's time grows with the
        square of a line's length: 64 MiB of escaped quotes in one label value took
        it some twelve hours), when parsed, then SourceError, and a line at the cap
        still reads."""
        # Arrange
        row = 'wool_worker_idle_seconds{worker="a:1",note="%s"} 500'
        padding = MAX_LINE - len(row % "") - 1  # the newline counts
        # Act / Assert
        assert parse_exposition(row % ("x" * padding) + "\n") == [
            Reading("a:1", 500.0, up=False, supported=False)
        ]
        with pytest.raises(SourceError, match="longer than"):
            parse_exposition(row % ("x" * (padding + 1)) + "\n")

    def test_parse_exposition_error_keeps_the_log_short(self) -> None:
        """Given a malformed line of 60,000 characters (the parser's message quotes it
        whole, and the daemon logs it every cycle), when parsed, then the SourceError's
        message is short."""
        # Arrange
        text = "bad " + "x" * 60_000 + "\n"
        # Act
        with pytest.raises(SourceError) as raised:
            parse_exposition(text)
        # Assert
        assert len(str(raised.value)) < 300


class TestExporterSource:
    async def test_read_over_http(self, serve_text) -> None:
        """Given an exporter's text served over HTTP, when read, then the readings are
        those of the text."""
        # Arrange
        url = await serve_text(EXPOSITION)
        async with aiohttp.ClientSession() as session:
            # Act
            readings = await ExporterSource(session, url, [], 2.0).read()
        # Assert
        assert readings == parse_exposition(EXPOSITION)

    async def test_read_keeps_the_group_labels(self, serve_text) -> None:
        """Given a source with group-by pool, when read over HTTP, then each reading's
        group is its pool."""
        # Arrange
        url = await serve_text(EXPOSITION)
        async with aiohttp.ClientSession() as session:
            # Act
            readings = await ExporterSource(session, url, [], 2.0, ("pool",)).read()
        # Assert
        assert [r.group for r in readings] == [("gpu",), ("cpu",), ("gpu",), ("gpu",)]

    @pytest.mark.parametrize(
        ("path", "reason"),
        [("/", "an HTML page, not metrics"), ("/metric", "HTTP 404")],
        ids=["landing_page", "no_such_page"],
    )
    async def test_read_wrong_page_names_the_flag(
        self, aiohttp_server, path: str, reason: str
    ) -> None:
        """Given --metrics-url at the exporter's HTML landing page (its base URL) or at
        a path that is not found, when read, then SourceError says so and names
        --metrics-url with the URL it takes, not a parse error over the page's HTML."""

        # Arrange
        async def landing(request: web.Request) -> web.Response:
            return web.Response(text="<!doctype html><html></html>", content_type="text/html")

        app = web.Application()
        app.router.add_get("/", landing)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            source = ExporterSource(session, str(server.make_url(path)), [], 2.0)
            # Act / Assert
            with pytest.raises(SourceError, match=f"{reason} \\(--metrics-url is the exporter's"):
                await source.read()

    @pytest.mark.parametrize(
        ("headers", "least"),
        [({"Age": "120"}, 120.0), ({"Age": "soon"}, math.inf), ({"Date": OLD_DATE}, 3600.0)],
        ids=["age", "unreadable_age", "old_date"],
    )
    async def test_read_a_cached_answer_is_as_old_as_the_cache_says(
        self, aiohttp_server, headers: dict[str, str], least: float
    ) -> None:
        """Given the exporter's text, unstamped and with a stamp from 10 s ago, served by
        a cache that says it has held it 120 s (``Age``), or that says so unreadably, or
        that keeps its origin's ``Date`` of an hour ago, when read over HTTP, then no
        reading is younger than that: an old answer is never read fresh."""
        # Arrange
        stamp = int((time.time() - 10) * 1000)
        text = EXPOSITION + f'wool_worker_idle_seconds{{worker="e:1"}} 900 {stamp}\n'

        async def cached(request: web.Request) -> web.Response:
            return web.Response(text=text, headers=headers)

        app = web.Application()
        app.router.add_get("/metrics", cached)
        server = await aiohttp_server(app)
        async with aiohttp.ClientSession() as session:
            # Act
            readings = await ExporterSource(session, str(server.make_url("/metrics")), [], 2).read()
        # Assert
        assert len(readings) == 5 and all(r.age >= least for r in readings)

    @pytest.mark.parametrize("end", ["reset", "close"])
    async def test_read_answer_without_a_length_is_a_source_error(self, end: str) -> None:
        """Given text whose worker has two conflicting series (500 and 0: never
        stopped), answered with neither Content-Length nor chunked encoding and ended
        after the first series by a connection reset or close (its end cannot be
        told from a cut), when read, then SourceError: never a reading of 500."""
        # Arrange
        text = exposition(("a:1", ',job="x"', 500), ("a:1", ',job="y"', 0))
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        cut = text.encode()[: text.index('wool_worker_idle_seconds{worker="a:1",job="y"')]
        async with CutAnswer(head + cut, end) as server, aiohttp.ClientSession() as session:
            # Act / Assert
            with pytest.raises(SourceError, match="Content-Length"):
                await ExporterSource(session, server.url, [], 2.0).read()

    @pytest.mark.parametrize("coding", ["chunked, gzip", "xchunked", "identity"])
    async def test_read_answer_not_ending_in_chunks_is_a_source_error(self, coding: str) -> None:
        """Given text whose worker has two conflicting series (500, 0), answered with a
        Transfer-Encoding whose last coding is not chunked (so its end is the
        connection's close, RFC 9112) and closed after the first series, when read,
        then SourceError: never a reading of 500."""
        # Arrange
        text = exposition(("a:1", ',job="x"', 500), ("a:1", ',job="y"', 0))
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: %s\r\n\r\n"
        cut = text.encode()[: text.index('wool_worker_idle_seconds{worker="a:1",job="y"')]
        async with (
            CutAnswer(head % coding.encode() + cut, "close") as server,
            aiohttp.ClientSession() as session,
        ):
            # Act / Assert
            with pytest.raises(SourceError, match="Content-Length"):
                await ExporterSource(session, server.url, [], 2.0).read()
