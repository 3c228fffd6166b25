"""Reading operator-named files: regular files only, bounded in size."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from wool_idle.files import FileRefused, describe_size, in_memory_file, read_regular_file


@pytest.mark.timeout(30)  # a FIFO that is opened for reading blocks: fail, not hang
class TestReadRegularFile:
    def test_read_regular_file_returns_its_bytes(self, tmp_path: Path) -> None:
        """Given a regular file within the limit, when read, then its bytes."""
        # Arrange
        path = tmp_path / "f"
        path.write_bytes(b"x" * 10)
        # Act
        data = read_regular_file(path, limit=10)
        # Assert
        assert data == b"x" * 10

    def test_read_regular_file_refuses_a_fifo_without_blocking(self, tmp_path: Path) -> None:
        """Given a FIFO nobody writes to, when read, then FileRefused at once
        (the open does not wait for a writer) saying it is a FIFO."""
        # Arrange
        path = tmp_path / "fifo"
        os.mkfifo(path)
        # Act
        with pytest.raises(FileRefused) as refused:
            read_regular_file(path, limit=1024)
        # Assert
        assert str(refused.value) == "a FIFO, not a regular file"
        assert refused.value.filename == str(path)

    @pytest.mark.parametrize(
        ("path", "kind"), [("/dev/zero", "a character device"), ("/", "a directory")]
    )
    def test_read_regular_file_refuses_special_files(self, path: str, kind: str) -> None:
        """Given an endless device or a directory, when read, then FileRefused naming
        its kind, without reading from it."""
        # Act
        with pytest.raises(FileRefused, match=kind):
            read_regular_file(path, limit=1024)

    def test_read_regular_file_refuses_a_file_over_the_limit(self, tmp_path: Path) -> None:
        """Given a (sparse) regular file one byte over the limit, when read, then
        FileRefused naming the limit."""
        # Arrange
        path = tmp_path / "big"
        with path.open("wb") as file:
            file.truncate(16 * 1024 * 1024 + 1)
        # Act
        with pytest.raises(FileRefused, match="larger than the limit of 16 MiB"):
            read_regular_file(path, limit=16 * 1024 * 1024)

    def test_read_regular_file_counts_bytes_not_the_announced_size(self) -> None:
        """Given a regular file whose size says 0 but holds more than the limit (a
        /proc file), when read, then FileRefused: the bytes read are what count."""
        # Arrange
        path = "/proc/self/maps"
        assert os.stat(path).st_size == 0
        # Act
        with pytest.raises(FileRefused, match="larger than the limit of 10 bytes"):
            read_regular_file(path, limit=10)

    def test_read_regular_file_missing_is_the_open_error(self, tmp_path: Path) -> None:
        """Given a path that does not exist, when read, then FileNotFoundError."""
        with pytest.raises(FileNotFoundError):
            read_regular_file(tmp_path / "missing", limit=10)


class TestDescribeSize:
    @pytest.mark.parametrize(
        ("size", "text"), [(16 * 1024 * 1024, "16 MiB"), (1000, "1000 bytes"), (0, "0 bytes")]
    )
    def test_describe_size(self, size: int, text: str) -> None:
        """Given a size, then mebibytes when whole, else bytes."""
        assert describe_size(size) == text


class TestInMemoryFile:
    @pytest.mark.parametrize("content", [b"first", b"", b"x" * 300_000])
    def test_in_memory_file_reads_as_the_content_then_closes(self, content: bytes) -> None:
        """Given content, then the path reads as it while the block runs, and no
        longer opens once it ended."""
        with in_memory_file(content) as path:
            read = Path(path).read_bytes()
        assert read == content
        with pytest.raises(OSError):
            Path(path).read_bytes()

    def test_in_memory_file_no_descriptor_left_says_why(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Given no descriptor left (EMFILE), then OSError says which copy could not
        be made and why."""

        def exhausted(name: str, flags: int) -> int:
            raise OSError(errno.EMFILE, "Too many open files")

        monkeypatch.setattr(os, "memfd_create", exhausted)
        refused = pytest.raises(OSError, match="in-memory copy OpenSSL loads: Too many open files")
        with refused, in_memory_file(b"x"):
            pass
