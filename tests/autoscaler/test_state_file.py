"""The state file: its format, atomic writes, and its lock, on the real file system."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import run_python

from wool_idle.autoscaler import state_file as state_file_module
from wool_idle.autoscaler.state_file import Marks, Retired, StateFile, StateFileError, Written

MARKS = Marks(
    retiring={"10.0.0.1:50051": 1_800_000_000.25},
    unreachable={"unix:/run/w.sock": 1_800_000_001.0},
    cooldown_until={"[::1]:7": 1_800_000_300.5},
    held_until=1_800_000_200.0,
    retired={"10.0.0.2:50051": Retired(1_799_999_000.123456, {"wool_tags": "hot"})},
    written=Written(1_800_000_010.5, "e8eac4aa-e95f-4c2b-a34c-0d1f053868b8", 20_264.25),
)
BEFORE_RETIRED = """{
 "version": 1,
 "retiring": {"10.0.0.1:50051": 1800000000.25},
 "unreachable": {"unix:/run/w.sock": 1800000001.0},
 "cooldown_until": {"[::1]:7": 1800000300.5},
 "held_until": 1800000200.0
}
"""
"""A file as an autoscaler wrote it before the retired marks were kept."""


def content(**changes: object) -> str:
    """A valid file's content with ``changes`` applied to its object."""
    document = json.loads(MARKS.to_json())
    document.update(changes)
    return json.dumps(document)


MALFORMED = {
    "not JSON": "{retiring",
    "an array": "[]",
    "another version": content(version=2),
    "no version": json.dumps({"retiring": {}, "unreachable": {}, "cooldown_until": {}}),
    "a kind missing": json.dumps({"version": 1, "retiring": {}, "unreachable": {}}),
    "an unknown key": content(extra={}),
    "a kind not an object": content(retiring=[]),
    "an empty worker": content(retiring={"": 1.0}),
    "a time as text": content(retiring={"a:1": "1.0"}),
    "a time as a boolean": content(unreachable={"a:1": True}),
    "a hold as text": content(held_until="1800000200"),
    "a time null": content(cooldown_until={"a:1": None}),
    "NaN": content(retiring={"a:1": float("nan")}),
    "Infinity": content(retiring={"a:1": float("inf")}),
    "an integer too large for a float": '{"version": 1, "retiring": {"a:1": 1%s}, '
    '"unreachable": {}, "cooldown_until": {}}' % ("0" * 400),
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "written not an object": content(written=1_800_000_010.5),
    "written without since_boot": content(written={"at": 1.0, "boot": "b"}),
    "written boot not text": content(written={"at": 1.0, "boot": 1, "since_boot": 2.0}),
    "written since_boot NaN": content(written={"at": 1.0, "boot": "b", "since_boot": float("nan")}),
}
GOOD_RETIRED = {"at": 1_799_999_000.5, "labels": {"wool_tags": "hot"}}
MALFORMED_RETIRED = {
    "a time as text": {"at": "1799999000", "labels": {}},
    "a time as a boolean": {"at": True, "labels": {}},
    "NaN": {"at": float("nan"), "labels": {}},
    "no labels": {"at": 1_799_999_000.0},
    "labels as a list": {"at": 1_799_999_000.0, "labels": []},
    "a label value not text": {"at": 1_799_999_000.0, "labels": {"wool_tags": 1}},
    "a label value not UTF-8": {"at": 1_799_999_000.0, "labels": {"wool_tags": "\ud800"}},
    "an unknown key": {"at": 1_799_999_000.0, "labels": {}, "extra": 1},
    "a bare time": 1_799_999_000.0,
    "null": None,
}


def hold_lock(path: Path) -> subprocess.Popen[str]:
    """Another process holding the lock of ``path`` until its stdin is closed."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys; f = open(sys.argv[1], 'ab'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


class TestMarks:
    def test_from_json_reads_what_to_json_wrote(self) -> None:
        """Given marks of every kind, with when they were written (by the clock since
        boot too), when written as JSON and read back, then they are the same marks."""
        # Act
        read = Marks.from_json(MARKS.to_json())
        # Assert
        assert read == MARKS
        assert read.written == MARKS.written

    def test_from_json_reads_a_file_written_before_the_retired_marks(self) -> None:
        """Given a file as the autoscaler wrote it before it kept retired marks (no
        `retired` key), when read, then its stop marks are all there and no retired
        worker is, with nothing reported skipped."""
        # Act
        read = Marks.from_json(BEFORE_RETIRED)
        # Assert
        assert read == dataclasses.replace(MARKS, retired={})
        assert read.skipped == ()

    @pytest.mark.parametrize("mark", MALFORMED_RETIRED.values(), ids=MALFORMED_RETIRED.keys())
    def test_from_json_skips_a_malformed_retired_mark(self, mark: object) -> None:
        """Given a file whose stop marks are well formed and whose retired marks are one
        good and one malformed, when read, then the stop marks and the good retired mark
        are read, and the malformed one is left out and named in skipped (never failing
        the read: the stop marks are what keeps the floor)."""
        # Arrange
        text = content(retired={"ok:1": GOOD_RETIRED, "bad:1": mark})
        # Act
        read = Marks.from_json(text)
        # Assert
        assert (read.retiring, read.unreachable) == (MARKS.retiring, MARKS.unreachable)
        assert (read.cooldown_until, read.held_until) == (MARKS.cooldown_until, MARKS.held_until)
        assert read.retired == {"ok:1": Retired(1_799_999_000.5, {"wool_tags": "hot"})}
        assert len(read.skipped) == 1 and "'bad:1'" in read.skipped[0]

    @pytest.mark.parametrize("retired", [[], "hot", 1, None], ids=repr)
    def test_from_json_retired_not_an_object_keeps_the_stop_marks(self, retired: object) -> None:
        """Given a file whose `retired` value is not an object, when read, then the stop
        marks are read, no retired worker is, and the reason is in skipped."""
        # Act
        read = Marks.from_json(content(retired=retired))
        # Assert
        assert read == dataclasses.replace(MARKS, retired={})
        assert read.skipped == ("retired: not an object",)

    @pytest.mark.parametrize("worker", ["", "\ud800:1"], ids=["empty", "not UTF-8"])
    def test_from_json_skips_a_retired_mark_of_a_bad_worker(self, worker: str) -> None:
        """Given a retired mark under an empty worker label, or one no series could show
        (a lone surrogate), when read, then it is left out and named in skipped; the
        other marks are read."""
        # Act
        read = Marks.from_json(content(retired={worker: GOOD_RETIRED}))
        # Assert
        assert read == dataclasses.replace(MARKS, retired={})
        assert len(read.skipped) == 1

    @pytest.mark.parametrize("text", MALFORMED.values(), ids=MALFORMED.keys())
    def test_from_json_malformed_is_a_state_file_error(self, text: str) -> None:
        """Given content that is not exactly the format, when read, then it is a
        StateFileError (never marks half read)."""
        # Act / Assert
        with pytest.raises(StateFileError):
            Marks.from_json(text)


class TestStateFile:
    def test_load_missing_file_is_a_state_file_error(self, tmp_path: Path) -> None:
        """Given no file at the path, when loaded, then a StateFileError says so (its
        marks are unknown: not the same as no marks)."""
        # Act / Assert
        with pytest.raises(StateFileError, match="no state file"):
            StateFile(tmp_path / "state.json").load()

    def test_save_then_load_round_trips_and_leaves_one_file(self, tmp_path: Path) -> None:
        """Given marks, when saved twice (the second replacing the first) and loaded,
        then the newest marks come back and no temporary file is left beside."""
        # Arrange
        state = StateFile(tmp_path / "state.json")
        state.save(Marks(retiring={"a:1": 1.0}))
        # Act
        state.save(MARKS)
        loaded = state.load()
        # Assert
        assert loaded == MARKS
        assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]

    def test_save_failure_keeps_the_old_content(self, tmp_path: Path, monkeypatch) -> None:
        """Given a saved file, when the next save fails while flushing (a full disk),
        then it raises OSError, the old content stays, and no temporary file is left."""
        # Arrange
        state = StateFile(tmp_path / "state.json")
        state.save(MARKS)

        def disk_full(fd: int) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(state_file_module.os, "fsync", disk_full)
        # Act
        with pytest.raises(OSError, match="No space"):
            state.save(Marks())
        monkeypatch.undo()
        # Assert
        assert state.load() == MARKS
        assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]

    def test_load_larger_than_the_limit_is_refused(self, tmp_path: Path, monkeypatch) -> None:
        """Given a file larger than MAX_BYTES, when loaded, then it is a StateFileError
        (a state file is never read whole into memory whatever its size)."""
        # Arrange
        state = StateFile(tmp_path / "state.json")
        state.save(MARKS)
        monkeypatch.setattr(state_file_module, "MAX_BYTES", 16)
        # Act / Assert
        with pytest.raises(StateFileError, match="larger than 16 bytes"):
            state.load()

    def test_load_not_utf8_is_a_state_file_error(self, tmp_path: Path) -> None:
        """Given a file of bytes that are not UTF-8, when loaded, then a StateFileError."""
        # Arrange
        (tmp_path / "state.json").write_bytes(b"\xff\xfe{}")
        # Act / Assert
        with pytest.raises(StateFileError, match="not UTF-8"):
            StateFile(tmp_path / "state.json").load()

    def test_lock_held_by_another_process_is_refused(self, tmp_path: Path) -> None:
        """Given another process holding the file's lock, when this one locks it, then a
        StateFileError says the file is in use; once that process has ended, it locks."""
        # Arrange
        path = tmp_path / "state.json"
        holder = hold_lock(Path(f"{path}.lock"))
        # Act
        with pytest.raises(StateFileError, match="in use by another autoscaler"):
            StateFile(path).lock()
        holder.communicate("")
        StateFile(path).lock()
        # Assert
        assert holder.returncode == 0
        assert os.path.exists(f"{path}.lock")

    def test_save_lock_file_removed_then_taken_by_another_process_is_refused(
        self, tmp_path: Path
    ) -> None:
        """Given a locked state file whose lock file was removed (a cleaner of old files)
        and another process then locked a new one, when this one saves, then OSError
        (two autoscalers would each stop workers the other counts alive) and the old
        content stays; once the other has ended, the save takes the lock again."""
        # Arrange
        path = tmp_path / "state.json"
        state = StateFile(path)
        state.lock()
        state.save(MARKS)
        os.unlink(f"{path}.lock")
        holder = hold_lock(Path(f"{path}.lock"))
        # Act
        with pytest.raises(OSError, match="lock file was removed or replaced"):
            state.save(Marks())
        kept = state.load()
        holder.communicate("")
        state.save(Marks())
        # Assert
        assert kept == MARKS
        assert state.load() == Marks()
        with pytest.raises(StateFileError, match="in use by another autoscaler"):
            StateFile(path).lock()

    def test_lock_removes_what_a_process_killed_while_saving_left(self, tmp_path: Path) -> None:
        """Given a process SIGKILLed while saving (its temporary file written, not yet
        renamed), when the next process locks the file, then the temporary file is gone,
        the old marks load, and a file of the operator's beside it stays."""
        # Arrange
        path = tmp_path / "state.json"
        StateFile(path).save(MARKS)
        (tmp_path / ".state.json.swp").write_text("the operator's")
        script = (
            "import os, signal, sys\n"
            "from wool_idle.autoscaler import state_file\n"
            "state = state_file.StateFile(sys.argv[1])\n"
            "state.lock()\n"
            "state_file.os.replace = lambda *_: os.kill(os.getpid(), signal.SIGKILL)\n"
            "state.save(state_file.Marks())\n"
        )
        killed = run_python(script, str(path))
        left = sorted(p.name for p in tmp_path.iterdir())
        # Act
        StateFile(path).lock()
        # Assert
        assert killed.returncode == -9, killed.stderr
        assert len(left) == 4 and [n for n in left if n.endswith(".tmp")], left
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            ".state.json.swp",
            "state.json",
            "state.json.lock",
        ]
        assert StateFile(path).load() == MARKS

    @pytest.mark.parametrize("name", ["state.json", "state.json.lock"])
    def test_load_and_lock_fifo_is_refused_without_blocking(self, tmp_path: Path, name) -> None:
        """Given a FIFO at the state file's path or at its lock's (no other end: opening
        it would block), when a process locks and loads the file, then it does not hang
        (SIGTERM could not end it there): the lock or the load is a StateFileError."""
        # Arrange
        os.mkfifo(tmp_path / name)
        script = (
            "import sys\n"
            "from wool_idle.autoscaler.state_file import StateFile, StateFileError\n"
            "state = StateFile(sys.argv[1])\n"
            "try:\n"
            "    state.lock()\n"
            "    state.load()\n"
            "except StateFileError as error:\n"
            "    print(error)\n"
        )
        # Act
        result = run_python(script, str(tmp_path / "state.json"))
        # Assert
        assert result.returncode == 0, result.stderr
        assert str(tmp_path / name) in result.stdout

    def test_lock_symbolic_link_planted_at_the_lock_is_not_followed(self, tmp_path: Path) -> None:
        """Given a symbolic link planted at the lock's path (by whoever may write to the
        directory) naming a file that does not exist, when the autoscaler (perhaps root)
        locks the state file, then a StateFileError says it is a link, and no file is
        created where the link points."""
        # Arrange
        planted = tmp_path / "nologin"
        (tmp_path / "state.json.lock").symlink_to(planted)
        # Act
        with pytest.raises(StateFileError, match="a symbolic link, not followed"):
            StateFile(tmp_path / "state.json").lock()
        # Assert
        assert not planted.exists()

    def test_load_symbolic_link_put_after_start_is_not_followed(self, tmp_path: Path) -> None:
        """Given a state file whose path was resolved at start, then replaced by a
        symbolic link to another file, when it is loaded, then a StateFileError says it
        is a link (its marks are unknown), and the other file is not read."""
        # Arrange
        path = tmp_path / "state.json"
        path.write_text(Marks().to_json())
        state = StateFile(path)
        (tmp_path / "other.json").write_text(MARKS.to_json())
        path.unlink()
        path.symlink_to(tmp_path / "other.json")
        # Act
        with pytest.raises(StateFileError, match="a symbolic link, not followed"):
            state.load()

    def test_save_through_a_symbolic_link_replaces_the_file_it_names(self, tmp_path: Path) -> None:
        """Given the state file's path a symbolic link to a file on another volume (kept
        across reboots), when marks are saved, then the file the link names holds them
        and the link stays: a restart reading through it finds them."""
        # Arrange
        (tmp_path / "volume").mkdir()
        target = tmp_path / "volume" / "state.json"
        target.write_text(Marks().to_json())
        (tmp_path / "state.json").symlink_to(target)
        # Act
        StateFile(tmp_path / "state.json").save(MARKS)
        # Assert
        assert (tmp_path / "state.json").is_symlink()
        assert StateFile(target).load() == MARKS
