"""Content negotiation of the metrics endpoints, and the build info series."""

from __future__ import annotations

import platform
import re

import grpc
import pytest
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

import wool_idle
from wool_idle.web.metrics import accepts_gzip, encoder_for, register_build_info


class TestRegisterBuildInfo:
    def test_register_build_info(self) -> None:
        """Given a registry, when build info is registered, then
        wool_idle_build_info{version,python,grpc} is 1."""
        # Arrange
        registry = CollectorRegistry()
        labels = {
            "version": wool_idle.__version__,
            "python": platform.python_version(),
            "grpc": grpc.__version__,
        }
        # Act
        register_build_info(registry)
        # Assert
        assert registry.get_sample_value("wool_idle_build_info", labels) == 1.0


PROMETHEUS_2 = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
PROMETHEUS_3 = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
    "application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,"
    "*/*;q=0.1"
)


class TestEncoderFor:
    @pytest.mark.parametrize(
        ("accept", "content_type"),
        [
            (PROMETHEUS_2, CONTENT_TYPE_PLAIN_0_0_4),
            (PROMETHEUS_3, CONTENT_TYPE_PLAIN_0_0_4),
            ("", CONTENT_TYPE_PLAIN_0_0_4),
            ("*/*", CONTENT_TYPE_PLAIN_0_0_4),
            ("text/*;q=0.2", CONTENT_TYPE_PLAIN_0_0_4),
            ("TEXT/PLAIN; Version=0.0.4", CONTENT_TYPE_PLAIN_0_0_4),
            ("application/openmetrics-text; version=1.0.0", "application/openmetrics-text"),
            (
                "application/openmetrics-text; version=1.0.0, text/plain; q=0",
                "application/openmetrics-text",
            ),
            ("application/openmetrics-text;version=1.0.0,*/*;q=0", "application/openmetrics-text"),
            ("text/plain;version=1.0.0;escaping=underscores", "text/plain; version=1.0.0"),
            ("application/openmetrics-text; version=abc", CONTENT_TYPE_PLAIN_0_0_4),
            ("text/plain; version=1.a.0", CONTENT_TYPE_PLAIN_0_0_4),
            ("application/openmetrics-text; version=1.0.0.\xe9", CONTENT_TYPE_PLAIN_0_0_4),
        ],
    )
    def test_encoder_for_prefers_text_0_0_4_when_allowed(
        self, accept: str, content_type: str
    ) -> None:
        """Given an Accept header, when the encoder is chosen, then it is the text format
        0.0.4 whenever the header admits it (any q above 0), else what prometheus-client
        chooses (OpenMetrics for a client that asks only for it); a version it cannot
        read or would echo unprintable gets the text format 0.0.4 (never a 500)."""
        # Arrange
        registry = CollectorRegistry()
        register_build_info(registry)
        # Act
        encoder, chosen = encoder_for(accept)
        body = encoder(registry).decode()
        # Assert
        assert chosen.startswith(content_type)
        assert body.rstrip().endswith("# EOF") == chosen.startswith("application/openmetrics")

    @pytest.mark.parametrize("escaping", ["underscores", "values", "dots", "allow-utf-8"])
    def test_encoder_for_openmetrics_samples_named_as_their_family(self, escaping: str) -> None:
        """Given an Accept header asking for OpenMetrics only, with a name escaping
        scheme, when the encoder renders, then every sample is named as the family its
        TYPE line declares (values escaping leaves a legal name as it is; it had every
        sample name U__-prefixed, its TYPE line not: no sample in its family)."""
        # Arrange
        registry = CollectorRegistry()
        Gauge("wool_worker_up", "Up.", ["worker"], registry=registry).labels("a:1").set(1)
        accept = f"application/openmetrics-text;version=1.0.0;escaping={escaping}"
        # Act
        encoder, chosen = encoder_for(accept)
        body = encoder(registry).decode()
        # Assert
        declared = re.findall(r"^# TYPE (\S+) ", body, re.MULTILINE)
        named = re.findall(r"^(\w+)\{", body, re.MULTILINE)
        assert chosen.endswith(f"escaping={escaping}")
        assert named == declared


class TestAcceptsGzip:
    @pytest.mark.parametrize(
        ("accept_encoding", "gzip"),
        [
            ("gzip", True),
            ("gzip, deflate, br", True),
            ("GZIP;q=0.5", True),
            ("x-gzip", True),
            ("*", True),
            ("deflate, *;q=0.1", True),
            ("", False),
            ("identity", False),
            ("deflate, br", False),
            ("gzip;q=0", False),
            ("gzip;q=0.000, deflate", False),
            ("gzip;q=0, *", False),
            ("*;q=0", False),
            ("br, gzip; q=0 ,identity", False),
        ],
    )
    def test_accepts_gzip_per_rfc_9110(self, accept_encoding: str, gzip: bool) -> None:
        """Given an Accept-Encoding header, then gzip is admitted exactly when it is
        named, or reached through *, with a q above 0 (a q of 0 refuses it)."""
        assert accepts_gzip(accept_encoding) is gzip
