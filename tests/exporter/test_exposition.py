"""The per-worker families rendered directly, against prometheus-client's own rendering."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from wool_idle.contract import IDLE_SECONDS, UP, WORKER_INFO
from wool_idle.exporter.collector import ProbeCollector
from wool_idle.exporter.exposition import label_set, render_workers
from wool_idle.exporter.outcome import ErrorReason, ProbeResult
from wool_idle.exporter.targets import Target
from wool_idle.web.metrics import text_0_0_4

LABEL_NAMES = st.from_regex(r"\A[a-zA-Z_][a-zA-Z0-9_]{0,12}\Z").filter(
    lambda name: name != "worker"
)
LABEL_VALUES = st.text(
    st.one_of(st.sampled_from('\\"\n{},= '), st.characters(codec="utf-8")), min_size=1
)
LABELS = st.dictionaries(LABEL_NAMES, LABEL_VALUES, max_size=4).map(
    lambda labels: tuple(sorted(labels.items()))
)
FLOATS = st.one_of(
    st.floats(min_value=0, allow_infinity=False, allow_nan=False),
    st.sampled_from([0.0, 1e-300, 5e-324, 123456789.5, 1e22, 0.1]),
)
TARGETS = st.builds(
    Target,
    st.from_regex(r"\A[a-z0-9.\-]{1,20}:[0-9]{1,5}\Z"),
    LABELS,
    info=LABELS,
)
RESULTS = st.builds(
    ProbeResult,
    TARGETS,
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), FLOATS),
    FLOATS,
    st.one_of(st.none(), st.sampled_from(ErrorReason)),
)


class _Generic(Collector):
    """The same families, without the direct rendering: prometheus-client renders them."""

    def __init__(self, collector: ProbeCollector) -> None:
        self.collector = collector

    def collect(self):  # type: ignore[no-untyped-def]
        return self.collector.collect()


class TestRenderWorkers:
    @given(results=st.lists(RESULTS, max_size=6))
    @settings(max_examples=300, deadline=None)
    def test_the_same_bytes_as_prometheus_client(self, results: list[ProbeResult]) -> None:
        """Given any results (labels with quotes, backslashes, newlines and any
        character; any idle value or none; any up and supported; discovered targets
        with info labels), when rendered directly, then the bytes are exactly
        prometheus-client's generate_latest of the same families."""
        collector = ProbeCollector(results)

        assert render_workers(results) == generate_latest(_Generic(collector))

    def test_values_and_labels_read_back(self) -> None:
        """Given a discovered worker and a file target with an awkward label value,
        when rendered and parsed by prometheus-client's parser, then each series has
        its labels and value back, info only for the discovered one."""
        discovered = Target("10.0.0.1:5", (("wool_tags", "a,b"),), info=(("pid", "42"),))
        filed = Target("unix:/run/w.sock", (("team", 'say "hi"\\\n'),))
        results = [
            ProbeResult(discovered, True, True, 12.5, 0.002),
            ProbeResult(filed, False, False, None, 0.1, ErrorReason.UNAVAILABLE),
        ]

        families = {
            f.name: f.samples
            for f in text_string_to_metric_families(render_workers(results).decode())
        }

        assert [(s.labels, s.value) for s in families[IDLE_SECONDS]] == [
            ({"worker": "10.0.0.1:5", "wool_tags": "a,b"}, 12.5)
        ]
        assert [(s.labels, s.value) for s in families[UP]] == [
            ({"worker": "10.0.0.1:5", "wool_tags": "a,b"}, 1.0),
            ({"worker": "unix:/run/w.sock", "team": 'say "hi"\\\n'}, 0.0),
        ]
        assert [s.labels for s in families[WORKER_INFO]] == [
            {"worker": "10.0.0.1:5", "wool_tags": "a,b", "pid": "42"}
        ]

    def test_label_set_sorts_names_and_escapes_values(self) -> None:
        """Given labels out of order with every escaped character, when rendered as a
        label set, then names are sorted and values escaped."""
        assert label_set({"z": "1", "a": 'q"b\\n\n'}) == '{a="q\\"b\\\\n\\n",z="1"}'


class TestText004:
    def test_a_collector_without_its_own_rendering_is_rendered_by_prometheus_client(
        self,
    ) -> None:
        """Given a collector with no render_text, when rendered in the text format,
        then prometheus-client renders it."""
        results = [ProbeResult(Target("h:1"), True, True, math.pi, 0.5)]
        generic = _Generic(ProbeCollector(results))

        assert text_0_0_4(generic) == generate_latest(generic)

    def test_a_collector_with_its_own_rendering_is_rendered_by_it(self) -> None:
        """Given the probe collector, when rendered in the text format, then its own
        rendering is used (the same bytes, by the property above)."""
        results = [ProbeResult(Target("h:1"), True, True, 3.0, 0.5)]

        assert text_0_0_4(ProbeCollector(results)) == render_workers(results)
