"""Reading exposition text back with prometheus-client's parser."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def fetch(url: str) -> str:
    """GET ``url`` over real HTTP and return the body as text."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of ``text`` keyed by (sample name, label set)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def by_worker(text: str, name: str) -> dict[str, float]:
    """The samples of ``name`` keyed by their ``worker`` label."""
    return {
        dict(labels)["worker"]: value
        for (sample_name, labels), value in samples(text).items()
        if sample_name == name
    }
