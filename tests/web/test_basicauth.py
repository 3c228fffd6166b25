"""HTTP basic auth against bcrypt hashes: one check at a time, every verdict remembered."""

from __future__ import annotations

import asyncio
import base64
import threading

import bcrypt
import pytest

from wool_idle.web import basicauth
from wool_idle.web.basicauth import REMEMBERED_MAX, BasicAuth

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$")


def header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class CountingCheck:
    """The real bcrypt check, counted: how many ran, and the most at once. Each
    call waits (up to ``overlap_wait``) for another to join it, so checks run in
    parallel are seen to overlap."""

    def __init__(self, overlap_wait: float = 0.0) -> None:
        self.calls = 0
        self.inside = 0
        self.most_inside = 0
        self.overlap_wait = overlap_wait
        self._lock = threading.Lock()
        self._joined = threading.Event()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.calls += 1
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            if self.inside > 1:
                self._joined.set()
        self._joined.wait(self.overlap_wait)
        try:
            return basicauth.bcrypt.checkpw(password, hashed)
        finally:
            with self._lock:
                self.inside -= 1


@pytest.fixture
def counting(monkeypatch) -> CountingCheck:
    check = CountingCheck()
    monkeypatch.setattr(basicauth, "checkpw", check)
    return check


class TestBasicAuth:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (header("prometheus", "s3cret"), True),
            (header("prometheus", "wrong"), False),
            (header("mallory", "s3cret"), False),
            (None, False),
            ("Bearer abc", False),
            ("Basic !!!", False),
            ("Basic " + base64.b64encode(b"no-colon").decode(), False),
            ("Basic " + base64.b64encode(b"\xff\xfe:s3cret").decode(), False),
        ],
    )
    async def test_check(self, value, expected: bool) -> None:
        """Given one user, when headers are checked, then only the right pair passes."""
        auth = BasicAuth({"prometheus": HASH.encode()})
        assert await auth.check(value) is expected
        assert await auth.check(value) is expected  # remembered results agree

    def test_unknown_user_checked_at_same_cost(self) -> None:
        """Given users hashed at some cost, then an unknown user is checked against a
        dummy hash of the same cost (same time as a wrong password)."""
        auth = BasicAuth({"prometheus": HASH.encode()})
        assert auth._dummy.split(b"$")[2] == HASH.encode().split(b"$")[2]

    async def test_check_failure_remembered(self, counting: CountingCheck) -> None:
        """Given a wrong password and an unknown user, when each is checked three
        times, then bcrypt runs once for each (failures are cached like successes)."""
        # Arrange
        auth = BasicAuth({"prometheus": HASH.encode()})
        # Act
        for _ in range(3):
            assert not await auth.check(header("prometheus", "wrong"))
            assert not await auth.check(header("mallory", "wrong"))
        # Assert
        assert counting.calls == 2

    async def test_check_one_bcrypt_at_a_time(self, monkeypatch) -> None:
        """Given four different wrong passwords at once, when checked concurrently, then
        bcrypt never runs twice at the same time (each check would wait for a second
        one to join it), and each runs once."""
        # Arrange
        check = CountingCheck(overlap_wait=0.2)
        monkeypatch.setattr(basicauth, "checkpw", check)
        auth = BasicAuth({"prometheus": HASH.encode()})
        # Act
        verdicts = await asyncio.gather(
            *(auth.check(header("prometheus", f"wrong{i}")) for i in range(4))
        )
        # Assert
        assert verdicts == [False] * 4
        assert check.calls == 4
        assert check.most_inside == 1

    async def test_check_same_credentials_at_once_checked_once(
        self, counting: CountingCheck
    ) -> None:
        """Given the right credentials sent by ten requests at once, then bcrypt runs
        once: the others find the verdict remembered once they get their turn."""
        # Arrange
        auth = BasicAuth({"prometheus": HASH.encode()})
        # Act
        verdicts = await asyncio.gather(
            *(auth.check(header("prometheus", "s3cret")) for _ in range(10))
        )
        # Assert
        assert verdicts == [True] * 10
        assert counting.calls == 1

    async def test_check_memory_bounded(self, counting: CountingCheck) -> None:
        """Given more distinct wrong passwords than the memory holds, then it holds at
        most REMEMBERED_MAX verdicts, the oldest forgotten first (checked again), and
        the scraper's recent success kept."""
        # Arrange
        auth = BasicAuth({"prometheus": HASH.encode()})
        assert await auth.check(header("prometheus", "wrong-first")) is False
        # Act
        for i in range(REMEMBERED_MAX):
            await auth.check(header("prometheus", f"wrong{i}"))
            if i % 100 == 0:
                assert await auth.check(header("prometheus", "s3cret"))
        before = counting.calls
        await auth.check(header("prometheus", "wrong-first"))
        assert await auth.check(header("prometheus", "s3cret"))
        # Assert
        assert len(auth._verdicts) == REMEMBERED_MAX
        assert counting.calls == before + 1
