"""The decision log: each decision written once, its facts as fields."""

from __future__ import annotations

import json
import logging
import math

import pytest

from wool_idle import logs
from wool_idle.autoscaler.decision_log import MAX_FIELD, Record, write
from wool_idle.autoscaler.policy import Decision
from wool_idle.autoscaler.verdicts import StopResult, Verdict

STOPPED = Record(1700000000.0, "a:1", 600.5, Verdict.STOP, 601.0, StopResult.STOPPED)
HELD = Record(1700000000.0, "b:1", 700.0, Verdict.MIN_WORKERS)
GROUPED = Record(
    1700000000.0, "c:1", 700.0, Verdict.MIN_WORKERS, group={"wool_tags": "hot,x=y", "zone": ""}
)


@pytest.fixture
def written(caplog: pytest.LogCaptureFixture):
    """The log records ``write`` produces."""

    def capture(record: Record) -> logging.LogRecord:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="wool_idle.autoscaler"):
            write(record)
        (line,) = caplog.records
        return line

    return capture


class TestWrite:
    def test_write_json_carries_each_fact_once(self, written) -> None:
        """Given a stop that was sent, when written and formatted as JSON, then the
        message is just 'decision' and the worker, verdict, idle times and result are
        fields, each once."""
        # Act
        entry = json.loads(logs.JsonFormatter().format(written(STOPPED)))
        # Assert
        assert entry["message"] == "decision"
        assert {k: entry[k] for k in ("worker", "verdict", "source_idle")} == {
            "worker": "a:1",
            "verdict": "stop",
            "source_idle": 600.5,
        }
        assert (entry["confirmed_idle"], entry["result"]) == (601.0, "stopped")

    def test_write_text_appends_the_fields(self, written) -> None:
        """Given a held decision, when written and formatted as text, then one line:
        'decision' followed by key=value for the worker, verdict and source idle (no
        result: none was tried)."""
        # Act
        line = logs.TextFormatter().format(written(HELD))
        # Assert
        assert line.endswith(
            " INFO wool_idle.autoscaler: decision worker=b:1 verdict=min_workers source_idle=700.0"
        )

    def test_write_text_names_the_group(self, written) -> None:
        """Given a held decision of a grouped worker whose tags hold ',' and '=', when
        written as text, then the line ends with one field per group label."""
        # Act
        line = logs.TextFormatter().format(written(GROUPED))
        # Assert
        assert line.endswith(" group.wool_tags=hot,x=y group.zone=")

    def test_write_text_group_value_cannot_forge_a_field_or_line(self, written) -> None:
        """Given a group label value holding a blank, a forged field and a line break,
        when written as text, then the line stays one line and the value is one quoted
        field: no verdict=stop appears as a field of its own."""
        # Arrange
        hostile = Record(
            1700000000.0, "c:1", 700.0, Verdict.MIN_WORKERS, group={"pool": "x verdict=stop\ny"}
        )
        # Act
        line = logs.TextFormatter().format(written(hostile))
        # Assert
        assert "\n" not in line
        assert line.endswith(' group.pool="x verdict=stop\\ny"')
        assert " verdict=stop " not in line

    def test_write_text_line_stays_under_the_split_of_log_collectors(self, written) -> None:
        """Given a decision whose two group values are each cut to ``MAX_FIELD``
        characters that are not printable (private use: each escaped as twelve), the
        second ending in a forged decision on another worker, when written as text, then
        the line is cut under the 16 KiB at which Docker and the CRI split a line (the
        rest read as a line of its own, the forged one) and says how long it was."""
        # Arrange
        forged = "2026-01-01T00:00:00.000Z INFO wool_idle.autoscaler: decision worker=b:1"
        pool, zone = "\U000f0000" * MAX_FIELD, "\U000f0000" * (MAX_FIELD - len(forged)) + forged
        hostile = Record(
            1700000000.0, "c:1", 700.0, Verdict.MIN_WORKERS, group={"p": pool, "z": zone}
        )
        # Act
        line = logs.TextFormatter().format(written(hostile))
        # Assert
        assert len(line.encode()) < 16 * 1024
        assert forged not in line and line.endswith(" bytes)")

    def test_write_json_names_the_group(self, written) -> None:
        """Given the same decision, when written as JSON, then each group label is a
        key of its own holding the value as it is."""
        # Act
        entry = json.loads(logs.JsonFormatter().format(written(GROUPED)))
        # Assert
        assert (entry["group.wool_tags"], entry["group.zone"]) == ("hot,x=y", "")
        assert "group" not in entry


class TestRecord:
    def test_fields_are_the_decisions_json(self) -> None:
        """Given records with and without a stop, then their fields are what /decisions
        serves: plain JSON values, the enums as their label values."""
        # Act / Assert
        assert [json.loads(json.dumps(r.fields())) for r in (STOPPED, HELD)] == [
            {
                "time": 1700000000.0,
                "worker": "a:1",
                "source_idle": 600.5,
                "verdict": "stop",
                "confirmed_idle": 601.0,
                "result": "stopped",
                "group": {},
            },
            {
                "time": 1700000000.0,
                "worker": "b:1",
                "source_idle": 700.0,
                "verdict": "min_workers",
                "confirmed_idle": None,
                "result": None,
                "group": {},
            },
        ]

    def test_fields_non_finite_idle_is_null(self) -> None:
        """Given a record of a worker that confirmed NaN (a hostile or broken worker:
        refused_busy), then /decisions serves its confirmed idle time as null: the body
        stays JSON (``NaN`` is not, and no strict parser reads it)."""
        # Arrange
        refused = Record(
            1700000000.0, "a:1", 600.5, Verdict.STOP, math.nan, StopResult.REFUSED_BUSY
        )
        # Act
        body = json.dumps(refused.fields(), allow_nan=False)
        # Assert
        assert json.loads(body)["confirmed_idle"] is None

    def test_fields_worker_with_a_lone_surrogate_is_text(self) -> None:
        """Given a decision on a worker whose label holds a lone surrogate (a source's
        JSON may escape one, ``"\\udcff"``; it is invalid_address), then /decisions
        serves it as the text ``\\udcff``: as a JSON escape, strict parsers refuse
        the body, its 1000 records with it (as they did NaN)."""
        # Arrange
        decision = Decision("a\udcff:1", None, Verdict.INVALID_ADDRESS)
        # Act
        body = json.dumps(Record.of(decision, ()).fields())
        # Assert
        assert json.loads(body)["worker"] == "a\\udcff:1"

    def test_fields_carry_the_group(self) -> None:
        """Given a record of a grouped worker, then /decisions serves its group labels
        as an object."""
        # Act / Assert
        assert GROUPED.fields()["group"] == {"wool_tags": "hot,x=y", "zone": ""}

    def test_of_cuts_a_label_longer_than_any_address(self) -> None:
        """Given a decision on a worker whose label, and whose group value, are ten
        million characters long (Prometheus's API bounds no label: a source may send
        one each cycle), when recorded, then the record keeps the first ``MAX_FIELD``
        characters of each and says how long it was: the 1000 records kept for
        /decisions held up to 1000 such labels, and each log line was as long."""
        # Arrange
        huge = "w" * 10_000_000
        decision = Decision(huge, 900.0, Verdict.INVALID_ADDRESS, (huge,))
        # Act
        record = Record.of(decision, ["pool"])
        # Assert
        cut = "w" * MAX_FIELD + "... (10000000 characters)"
        assert (record.worker, dict(record.group)) == (cut, {"pool": cut})

    def test_of_keeps_an_address_whole(self) -> None:
        """Given a decision on a worker named by a long address (a Unix socket path
        near its limit) in a group, when recorded, then both are kept as they are."""
        # Arrange
        worker = "unix:/" + "d" * 100
        decision = Decision(worker, 900.0, Verdict.MIN_WORKERS, ("hot,gpu",))
        # Act
        record = Record.of(decision, ["wool_tags"])
        # Assert
        assert (record.worker, dict(record.group)) == (worker, {"wool_tags": "hot,gpu"})
