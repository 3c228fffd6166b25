"""Which targets had their pool change lately (times passed in, no clock)."""

from __future__ import annotations

import json
import logging

from wool_idle.exporter.regrouped import FileRegroupings, Regroupings
from wool_idle.exporter.target import Target
from wool_idle.logs import TextFormatter

A = "127.0.0.1:5001"


def target(tags: str) -> Target:
    return Target(A, (("wool_namespace", "prod"), ("wool_tags", tags)))


class TestRegroupings:
    def test_mark_first_sighting_and_same_pool_are_not_held(self) -> None:
        """Given a worker seen for the first time, then again in the same pool, then its
        pool is known both times and no re-apply is asked for."""
        # Arrange
        wakes: list[float] = []
        regroupings = Regroupings(10.0, wake=wakes.append)
        # Act
        first = regroupings.mark([target("hot")], now=100.0)
        again = regroupings.mark([target("hot")], now=101.0)
        # Assert
        assert [t.regrouped for t in first + again] == [False, False]
        assert wakes == []

    def test_mark_moved_label_value_cannot_forge_a_decision_line(self, caplog) -> None:
        """Given a worker in pool hot, when it moves to a pool whose tags hold blanks and
        the text of a decision on another worker (a wool discovery record any local user
        can publish), then the warning (text format) quotes that value as one: it does
        not read as a decision on 10.9.9.9:1 (a grep for its fields, logfmt)."""
        # Arrange
        forged = "x decision worker=10.9.9.9:1 verdict=stop result=stopped"
        regroupings = Regroupings(10.0, wake=lambda _: None)
        regroupings.mark([target("hot")], now=100.0)
        # Act
        with caplog.at_level(logging.WARNING, logger="wool_idle.exporter.regrouped"):
            regroupings.mark([target(forged)], now=111.0)
        # Assert
        (line,) = [TextFormatter().format(record) for record in caplog.records]
        assert json.dumps(forged) in line and forged not in line.replace(json.dumps(forged), "")

    def test_mark_moved_is_held_until_it_holds_still(self) -> None:
        """Given a worker in pool hot, when it moves to cold and back within the grace,
        then it is held each time (a re-apply asked for after the grace), and known again
        only once the grace has passed since its last move."""
        # Arrange
        wakes: list[float] = []
        regroupings = Regroupings(10.0, wake=wakes.append)
        regroupings.mark([target("hot")], now=100.0)
        # Act
        moved = regroupings.mark([target("cold")], now=101.0)
        back = regroupings.mark([target("hot")], now=105.0)
        within = regroupings.mark([target("hot")], now=114.0)
        still = regroupings.mark([target("hot")], now=115.0)
        # Assert
        assert [t.regrouped for t in moved + back + within + still] == [True] * 3 + [False]
        assert wakes == [10.0, 10.0]

    def test_mark_gone_and_back_in_another_pool_within_the_grace_is_held(self) -> None:
        """Given a worker in pool hot, when its address goes unlisted and comes back in
        pool cold within the grace, then it is held; after a gap longer than the grace,
        it is new again and not held."""
        # Arrange
        regroupings = Regroupings(10.0, wake=lambda _: None)
        regroupings.mark([target("hot")], now=100.0)
        regroupings.mark([], now=101.0)
        # Act
        back = regroupings.mark([target("cold")], now=105.0)
        regroupings.mark([], now=106.0)
        regroupings.mark([], now=120.0)  # gone for longer than the grace: forgotten
        later = regroupings.mark([target("hot")], now=121.0)
        # Assert
        assert back[0].regrouped
        assert not later[0].regrouped


class TestFileRegroupings:
    def test_set_changed_labels_held_until_released_without_another_read(self) -> None:
        """Given a file read with a worker in pool gpu, when a read has it in pool g (a
        file cut inside a label value), then it is held; a look before the grace ends
        changes nothing, and one after it releases the worker with no new read."""
        # Arrange
        file = FileRegroupings(10.0, source="targets file t.yml")
        file.set([target("gpu")], now=100.0)
        # Act
        changed = file.set([target("g")], now=101.0)
        held = [t.regrouped for t in file.targets]
        early = file.release(now=110.0)
        late = file.release(now=111.0)
        # Assert
        assert changed
        assert held == [True]
        assert not early
        assert late
        assert [t.regrouped for t in file.targets] == [False]
        assert file.read == (target("g"),)

    def test_set_worker_new_to_a_loaded_file_held_but_not_in_the_first_load(self) -> None:
        """Given a file's first load (a worker in it is not held), when a later read
        lists a worker new to the file (its labels may be cut: a file rewritten in
        place), then that worker is held for the grace and released by a look after."""
        # Arrange
        other = Target("127.0.0.1:5002", (("wool_tags", "c"),))
        file = FileRegroupings(10.0, source="targets file t.yml")
        file.set([target("gpu")], now=100.0)
        first = [t.regrouped for t in file.targets]
        # Act
        file.set([target("gpu"), other], now=101.0)
        held = [t.regrouped for t in file.targets]
        released = file.release(now=111.0)
        # Assert
        assert first == [False]
        assert held == [False, True]
        assert released
        assert [t.regrouped for t in file.targets] == [False, False]
