"""HTTP basic auth against bcrypt hashes: one check at a time, every verdict remembered."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import bcrypt
import pytest
from aiohttp import web

from wool_idle.web import basicauth
from wool_idle.web.basicauth import REMEMBERED_MAX, BasicAuth
from wool_idle.web.config import WebConfig
from wool_idle.web.site import serve_app

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

    async def test_check_unknown_user_against_a_configured_hash(self, monkeypatch) -> None:
        """Given two users, when an unknown user sends the first user's right password,
        then it is refused after a bcrypt check against a configured hash (the same cost
        as a wrong password, so no faster answer tells that the user does not exist)."""
        # Arrange
        checked: list[bytes] = []

        def recording(password: bytes, hashed: bytes) -> bool:
            checked.append(hashed)
            return basicauth.bcrypt.checkpw(password, hashed)

        monkeypatch.setattr(basicauth, "checkpw", recording)
        other = bcrypt.hashpw(b"other", bcrypt.gensalt(rounds=4))
        auth = BasicAuth({"prometheus": HASH.encode(), "grafana": other})
        # Act
        verdict = await auth.check(header("mallory", "s3cret"))
        # Assert
        assert verdict is False
        assert checked == [HASH.encode()]

    async def test_serve_with_the_highest_cost_starts_at_once(self) -> None:
        """Given a user whose hash has bcrypt's highest cost (31: days per check), when
        an app is served with it, then it starts (no hash is computed at start) and
        answers a request without credentials 401 at once."""
        # Arrange
        highest = HASH[:4] + "31" + HASH[6:]
        config = WebConfig(users={"prometheus": highest.encode()})
        app = web.Application()

        async def ok(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app.router.add_get("/", ok)
        # Act
        async with (
            serve_app(app, "127.0.0.1:0", config) as url,
            aiohttp.ClientSession() as session,
            session.get(url) as response,
        ):
            status = response.status
        # Assert
        assert status == 401

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


CHECK_THEN_LEAVE = """
import asyncio, base64, sys
from wool_idle.web.basicauth import BasicAuth

async def main():
    auth = BasicAuth({"prometheus": sys.argv[1].encode()})
    header = "Basic " + base64.b64encode(b"prometheus:s3cret").decode()
    check = asyncio.ensure_future(auth.check(header))
    await asyncio.sleep(0)
    print("checking", flush=True)
    sys.stdin.readline()  # until the test has seen the check burn CPU
    check.cancel()

asyncio.run(main())
"""
"""A process that starts a days-long check, then leaves (its loop ends)."""


def cpu_ticks(pid: int) -> int:
    """User plus system CPU time of process ``pid``, in clock ticks (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


class TestBasicAuthExit:
    def test_exit_does_not_wait_for_a_days_long_check(self) -> None:
        """Given a process whose loop started a check of a password against bcrypt's
        highest cost (days), when the check is under way (the process burns CPU on it)
        and the loop ends, then the process exits 0: the check runs on a daemon thread
        that the interpreter's exit does not wait for."""
        # Arrange
        highest = HASH[:4] + "31" + HASH[6:]
        process = subprocess.Popen(
            [sys.executable, "-c", CHECK_THEN_LEAVE, highest],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdin is not None and process.stdout is not None
        assert process.stdout.readline() == "checking\n"
        started = cpu_ticks(process.pid)
        while cpu_ticks(process.pid) < started + 50:  # half a second of bcrypt: under way
            time.sleep(0.05)
        # Act
        process.stdin.write("leave\n")
        process.stdin.flush()
        try:
            code = process.wait(timeout=60)
        finally:
            process.kill()
        # Assert
        assert code == 0
