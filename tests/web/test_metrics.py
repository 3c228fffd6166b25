"""The build info series."""

from __future__ import annotations

import platform

import grpc
from prometheus_client import CollectorRegistry

import wool_idle
from wool_idle.web.metrics import register_build_info


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
