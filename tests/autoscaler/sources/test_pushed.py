"""Ages of a Pushgateway's samples, from its ``push_time_seconds``."""

from __future__ import annotations

import math
import time

import pytest

from wool_idle.autoscaler.sources import parse_exposition

PUSHED = """\
push_time_seconds{{instance="e1",job="wool"}} {e1}
push_time_seconds{{instance="",job="other"}} {other}
wool_worker_idle_seconds{{instance="e1",job="wool",worker="a:1"}} 120
wool_worker_up{{instance="e1",job="wool",worker="a:1"}} 1
wool_worker_idle_supported{{instance="e1",job="wool",worker="a:1"}} 1
wool_worker_idle_seconds{{job="other",worker="b:1"}} 90
wool_worker_up{{job="other",worker="b:1"}} 1
wool_worker_idle_supported{{job="other",worker="b:1"}} 1
wool_worker_idle_seconds{{instance="e9",job="wool",worker="c:1"}} 80
wool_worker_up{{instance="e9",job="wool",worker="c:1"}} 1
wool_worker_idle_supported{{instance="e9",job="wool",worker="c:1"}} 1
"""
"""A Pushgateway's answer: ``a:1`` in group e1, ``b:1`` in group other (no instance),
``c:1`` in a group with no push time."""


class TestParsePushed:
    @pytest.mark.parametrize(
        ("e1", "other", "a_least", "b_least"),
        [
            (-600.0, -5.0, 600.0, 5.0),
            (-1.0, 0.0, 1.0, 1e9),
            (-2.0, math.nan, 2.0, math.inf),
            (3600.0, 2.0, math.inf, 0.0),
        ],
        ids=["ages", "never_pushed", "not_a_number", "far_ahead_and_slightly_ahead"],
    )
    def test_parse_exposition_samples_are_as_old_as_their_push(
        self, e1: float, other: float, a_least: float, b_least: float
    ) -> None:
        """Given a Pushgateway's answer (unstamped samples, push times relative to now;
        0 is a group never pushed), when parsed, then each worker is at least as old as
        its group's last push (a time ahead of this clock by at most 5 s counts as now,
        further or not a number as unknown), and a worker of no group is stale."""
        # Arrange
        now = time.time()
        times = {
            name: (repr(offset) if math.isnan(offset) else repr(now + offset))
            for name, offset in (("e1", e1), ("other", other))
        }
        if other == 0.0:
            times["other"] = "0"
        # Act
        readings = {r.worker: r for r in parse_exposition(PUSHED.format(**times))}
        # Assert
        assert readings["a:1"].age >= a_least and readings["b:1"].age >= b_least
        assert readings["c:1"].age == math.inf
        assert readings["b:1"].age < 60 or b_least > 60

    def test_parse_exposition_stamped_samples_keep_their_own_ages(self) -> None:
        """Given text from /federate (every sample stamped) that also carries a
        push_time_seconds no wool series matches, when parsed, then each worker's age is
        that of its stamps, not unknown."""
        # Arrange
        stamp = int((time.time() - 10) * 1000)
        text = (
            f'push_time_seconds{{job="batch"}} {time.time()} {stamp}\n'
            f'wool_worker_idle_seconds{{worker="a:1",job="wool"}} 120 {stamp}\n'
            f'wool_worker_up{{worker="a:1",job="wool"}} 1 {stamp}\n'
            f'wool_worker_idle_supported{{worker="a:1",job="wool"}} 1 {stamp}\n'
        )
        # Act
        (reading,) = parse_exposition(text)
        # Assert
        assert 10 <= reading.age < 60

    def test_parse_exposition_name_in_a_label_value_is_no_pushgateway(self) -> None:
        """Given an exporter's text (unstamped) where only a label value says
        push_time_seconds, when parsed, then its samples are read just now (age 0), not
        stale as samples of no pushed group: one worker's label cannot make the whole
        fleet's readings stale."""
        # Arrange
        text = (
            'wool_worker_idle_seconds{worker="a:1",pool="push_time_seconds"} 120\n'
            'wool_worker_up{worker="a:1",pool="push_time_seconds"} 1\n'
            'wool_worker_idle_supported{worker="a:1",pool="push_time_seconds"} 1\n'
            'wool_worker_idle_seconds{worker="b:1"} 90\n'
            'wool_worker_up{worker="b:1"} 1\n'
            'wool_worker_idle_supported{worker="b:1"} 1\n'
        )
        # Act
        readings = parse_exposition(text)
        # Assert
        assert {r.worker: r.age for r in readings} == {"a:1": 0.0, "b:1": 0.0}

    @pytest.mark.parametrize("nan_first", [True, False], ids=["nan_first", "nan_last"])
    def test_parse_exposition_a_push_time_not_a_number_is_unknown_in_any_order(
        self, nan_first: bool
    ) -> None:
        """Given a worker whose sample matches two groups (or one group listed twice),
        one pushed 10 s ago and one whose push time is not a number, when parsed, then
        its age is unknown (stale) whichever comes first: ``min`` kept or dropped the
        NaN by its place."""
        # Arrange
        recent = repr(time.time() - 10)
        times = ["NaN", recent] if nan_first else [recent, "NaN"]
        text = (
            f'push_time_seconds{{job="wool"}} {times[0]}\n'
            f'push_time_seconds{{job="wool",instance="e1"}} {times[1]}\n'
            f'push_time_seconds{{job="other"}} {times[0]}\n'
            f'push_time_seconds{{job="other"}} {times[1]}\n'
            'wool_worker_idle_seconds{job="wool",instance="e1",worker="a:1"} 120\n'
            'wool_worker_up{job="wool",instance="e1",worker="a:1"} 1\n'
            'wool_worker_idle_supported{job="wool",instance="e1",worker="a:1"} 1\n'
            'wool_worker_idle_seconds{job="other",worker="b:1"} 120\n'
            'wool_worker_up{job="other",worker="b:1"} 1\n'
            'wool_worker_idle_supported{job="other",worker="b:1"} 1\n'
        )
        # Act
        readings = {r.worker: r.age for r in parse_exposition(text)}
        # Assert
        assert readings == {"a:1": math.inf, "b:1": math.inf}
