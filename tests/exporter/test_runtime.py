"""What the exporter sets on its process at start-up."""

from __future__ import annotations

import gc
import logging
import resource

import pytest

from wool_idle.exporter.runtime import (
    YOUNG_GENERATION,
    connection_budget,
    raise_open_files_limit,
    settle_garbage_collector,
    warn_if_few_open_files,
)


class TestSettleGarbageCollector:
    def test_settle_freezes_and_widens_young_generation(self) -> None:
        """Given the interpreter's collector, when settled, then start-up objects are
        frozen and the youngest generation's threshold is YOUNG_GENERATION, the older
        ones as they were."""
        # Arrange
        before = gc.get_threshold()
        try:
            # Act
            settle_garbage_collector()
            frozen, threshold = gc.get_freeze_count(), gc.get_threshold()
        finally:
            gc.unfreeze()
            gc.set_threshold(*before)
        # Assert
        assert frozen > 0
        assert threshold == (YOUNG_GENERATION, before[1], before[2])


class TestRaiseOpenFilesLimit:
    def test_raise_sets_soft_to_hard(self) -> None:
        """Given a soft limit on open files below the hard one, when raised, then the
        soft limit is the hard limit."""
        # Arrange
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard <= 64:
            pytest.fail(f"this machine's hard limit {hard} leaves nothing to raise")
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        try:
            # Act
            reported = raise_open_files_limit()
            now = resource.getrlimit(resource.RLIMIT_NOFILE)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        # Assert
        assert reported == now == (hard, hard)


class TestWarnIfFewOpenFiles:
    @pytest.mark.parametrize(
        ("limit", "connections", "warned"),
        [(1024, 10_000, True), (1024, 1000, True), (20_000, 10_000, False), (1024, 100, False)],
    )
    def test_warn_when_connections_do_not_fit(
        self, limit: int, connections: int, warned: bool, caplog
    ) -> None:
        """Given an open-files limit and the worker connections the exporter may hold,
        when checked, then a warning naming --probe.adhoc-limit exactly when they do
        not fit beside the reserve."""
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.exporter"):
            warn_if_few_open_files(limit, connections)
        # Assert
        messages = [r.getMessage() for r in caplog.records]
        assert any("--probe.adhoc-limit" in m for m in messages) == warned


class TestConnectionBudget:
    @pytest.mark.parametrize(
        ("limit", "budget"),
        [(1024, 896), (256, 128), (255, 127), (64, 32), (resource.RLIM_INFINITY, None)],
    )
    def test_budget_leaves_the_reserve(self, limit: int, budget: int | None) -> None:
        """Given an open files limit, then the connections to workers opened at most
        leave ``RESERVED_FILES`` to everything else (half of a small limit); no limit,
        no cap."""
        assert connection_budget(limit) == budget
