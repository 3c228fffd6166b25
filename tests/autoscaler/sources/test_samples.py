"""Samples of one read, by series and worker: duplicates collapse or conflict."""

from __future__ import annotations

import math

import pytest

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.sources.samples import SamplesByWorker

IDLE, UP, SUPPORTED = "wool_worker_idle_seconds", "wool_worker_up", "wool_worker_idle_supported"


def healthy(samples: SamplesByWorker, worker: str, idle: float | None) -> None:
    samples.add(samples.by_series[IDLE], worker, idle)
    samples.add(samples.by_series[UP], worker, 1.0)
    samples.add(samples.by_series[SUPPORTED], worker, 1.0)


class TestSamplesByWorker:
    @pytest.mark.parametrize(
        ("first", "second", "conflicting"),
        [
            (500.0, 500.0, False),
            (math.nan, math.nan, False),
            (None, None, False),
            (500.0, 0.0, True),
            (500.0, None, True),
            (math.nan, 500.0, True),
        ],
    )
    def test_add_duplicates(self, first, second, conflicting: bool) -> None:
        """Given two samples of one series for one worker, when added, then equal ones
        (NaN equal to NaN) collapse and different ones make the worker conflicting."""
        # Arrange
        samples = SamplesByWorker()
        healthy(samples, "a:1", first)
        # Act
        samples.add(samples.by_series[IDLE], "a:1", second)
        (reading,) = samples.readings(default_age=0.0)
        # Assert
        assert reading.conflicting is conflicting

    def test_readings_default_age_and_unparsable_age(self) -> None:
        """Given one worker with an age, one with an unparsable age and one with none,
        when read with default_age inf, then the ages are that age, inf and inf."""
        # Arrange
        samples = SamplesByWorker()
        for worker in ("a:1", "b:1", "c:1"):
            healthy(samples, worker, 90.0)
        samples.add(samples.ages, "a:1", 2.5)
        samples.add(samples.ages, "b:1", None)
        # Act
        readings = samples.readings(default_age=math.inf)
        # Assert
        assert [r.age for r in readings] == [2.5, math.inf, math.inf]

    def test_readings_one_per_worker_of_any_series(self) -> None:
        """Given a worker seen only in wool_worker_up (0) and one only in the idle
        series, when read, then each has one reading: down, and up-unknown (down)."""
        # Arrange
        samples = SamplesByWorker()
        samples.add(samples.by_series[UP], "d:1", 0.0)
        samples.add(samples.by_series[IDLE], "i:1", 30.0)
        # Act
        readings = samples.readings(default_age=0.0)
        # Assert
        assert readings == [
            Reading("d:1", None, up=False, supported=False),
            Reading("i:1", 30.0, up=False, supported=False),
        ]
