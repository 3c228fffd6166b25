"""HTTP basic auth against bcrypt hashes: one check at a time, every verdict remembered."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import bcrypt
import pytest
from aiohttp import web

from wool_idle.web import basicauth
from wool_idle.web.basicauth import REMEMBERED_MAX, BasicAuth, Handler
from wool_idle.web.config import WebConfig
from wool_idle.web.live_config import LiveWebConfig
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
            ("basic " + header("prometheus", "s3cret").removeprefix("Basic "), True),
            ("BASIC " + header("prometheus", "s3cret").removeprefix("Basic "), True),
            (header("prometheus", "wrong"), False),
            (header("mallory", "s3cret"), False),
            (None, False),
            ("Bearer abc", False),
            ("Basic !!!", False),
            ("Basic " + base64.b64encode(b"no-colon").decode(), False),
            ("Basic " + base64.b64encode(b"\xff\xfe:s3cret").decode(), False),
            ("Basic \xe9", False),  # not ASCII: how aiohttp hands over bytes 0xC3 0xA9
            ("Basic \udcff", False),  # an undecodable byte, as aiohttp hands it over
        ],
    )
    async def test_check(self, value, expected: bool) -> None:
        """Given one user, when headers are checked, then only the right pair passes,
        its scheme named in any case (RFC 9110, as Go's net/http reads it), and a header
        that is no base64 (not even ASCII) is refused like any other, never raising."""
        auth = BasicAuth(lambda: {"prometheus": HASH.encode()})
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
        auth = BasicAuth(lambda: {"prometheus": HASH.encode(), "grafana": other})
        # Act
        verdict = await auth.check(header("mallory", "s3cret"))
        # Assert
        assert verdict is False
        assert checked == [HASH.encode()]

    async def test_check_follows_the_users_in_force(self) -> None:
        """Given alice and bob sharing one hash (a copied line) and alice's login
        remembered, when alice is removed, then her password is refused (her hash is
        now only the stand-in), and accepted again once she is back."""
        # Arrange
        users = {"alice": HASH.encode(), "bob": HASH.encode()}
        auth = BasicAuth(lambda: users)
        first = await auth.check(header("alice", "s3cret"))
        # Act
        del users["alice"]
        removed = await auth.check(header("alice", "s3cret"))
        users["alice"] = HASH.encode()
        back = await auth.check(header("alice", "s3cret"))
        # Assert
        assert (first, removed, back) == (True, False, True)

    async def test_check_without_users_in_force_refuses(self) -> None:
        """Given no user in force, then a check refuses (the middleware lets requests
        through without asking)."""
        auth = BasicAuth(dict)
        assert await auth.check(header("alice", "s3cret")) is False

    async def test_serve_with_the_highest_cost_starts_at_once(self) -> None:
        """Given a user whose hash has bcrypt's highest cost (31: days per check), when
        an app is served with it, then it starts (no hash is computed at start) and
        answers a request without credentials 401 at once."""
        # Arrange
        highest = HASH[:4] + "31" + HASH[6:]
        config = LiveWebConfig(WebConfig(users={"prometheus": highest.encode()}))
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
        auth = BasicAuth(lambda: {"prometheus": HASH.encode()})
        # Act
        for _ in range(3):
            assert not await auth.check(header("prometheus", "wrong"))
            assert not await auth.check(header("mallory", "wrong"))
        # Assert
        assert counting.calls == 2

    async def test_check_not_run_refuses_without_remembering(self, monkeypatch) -> None:
        """Given the right password, when its check cannot run (no thread can be
        started: a pids limit), then it is refused, and checked again by the next
        request once threads can be started: a refusal remembered as the verdict
        locked the scraper out until a restart."""
        # Arrange
        auth = BasicAuth(lambda: {"prometheus": HASH.encode()})
        start = threading.Thread.start

        def refuse(thread: threading.Thread) -> None:
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(threading.Thread, "start", refuse)
        # Act
        refused = await auth.check(header("prometheus", "s3cret"))
        monkeypatch.setattr(threading.Thread, "start", start)
        accepted = await auth.check(header("prometheus", "s3cret"))
        # Assert
        assert (refused, accepted) == (False, True)

    async def test_check_one_bcrypt_at_a_time(self, monkeypatch) -> None:
        """Given four different wrong passwords at once, when checked concurrently, then
        bcrypt never runs twice at the same time (each check would wait for a second
        one to join it), and each runs once."""
        # Arrange
        check = CountingCheck(overlap_wait=0.2)
        monkeypatch.setattr(basicauth, "checkpw", check)
        auth = BasicAuth(lambda: {"prometheus": HASH.encode()})
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
        auth = BasicAuth(lambda: {"prometheus": HASH.encode()})
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
        auth = BasicAuth(lambda: {"prometheus": HASH.encode()})
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


class GatedCheck:
    """The real bcrypt check, recording each password checked, in order; the first
    check waits until ``gate`` is set (so the test can queue requests behind it)."""

    def __init__(self) -> None:
        self.passwords: list[bytes] = []
        self.gate = threading.Event()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.passwords.append(password)
        if len(self.passwords) == 1:
            self.gate.wait(60)
        return basicauth.bcrypt.checkpw(password, hashed)


@contextlib.asynccontextmanager
async def guarded_app(arrived: list[web.Request]) -> AsyncIterator[str]:
    """A real HTTP server behind basic auth; ``arrived`` gets each request as it
    arrives, before it authenticates. Yields the base URL."""

    @web.middleware
    async def arrival(request: web.Request, handler: Handler) -> web.StreamResponse:
        arrived.append(request)
        return await handler(request)

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(middlewares=[arrival])
    app.router.add_get("/", ok)
    config = LiveWebConfig(WebConfig(users={"prometheus": HASH.encode()}))
    async with serve_app(app, "127.0.0.1:0", config) as url:
        yield url


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


class TestBasicAuthUsersChanging:
    async def test_check_running_when_its_user_is_removed_refuses(self, monkeypatch) -> None:
        """Given a check of alice's right password running, when alice is removed from
        the users in force before it ends, then it refuses her."""
        # Arrange
        check = GatedCheck()
        monkeypatch.setattr(basicauth, "checkpw", check)
        users = {"alice": HASH.encode(), "bob": HASH.encode()}
        auth = BasicAuth(lambda: users)
        running = asyncio.ensure_future(auth.check(header("alice", "s3cret")))
        await until(lambda: len(check.passwords) == 1)
        # Act
        del users["alice"]
        check.gate.set()
        verdict = await running
        # Assert
        assert verdict is False

    async def test_check_queued_for_a_replaced_hash_is_not_run(self, monkeypatch) -> None:
        """Given a check waiting behind another for bcrypt, when its user's hash is
        replaced meanwhile, then it refuses without running bcrypt (the next login
        is checked against the new hash)."""
        # Arrange
        check = GatedCheck()
        monkeypatch.setattr(basicauth, "checkpw", check)
        new = bcrypt.hashpw(b"new", bcrypt.gensalt(rounds=4))
        users = {"alice": HASH.encode(), "bob": HASH.encode()}
        auth = BasicAuth(lambda: users)
        held = asyncio.ensure_future(auth.check(header("bob", "held"), peer="b"))
        await until(lambda: len(check.passwords) == 1)
        queued = asyncio.ensure_future(auth.check(header("alice", "s3cret"), peer="a"))
        await asyncio.sleep(0.05)
        # Act
        users["alice"] = new
        check.gate.set()
        verdicts = (await held, await queued)
        fresh = await auth.check(header("alice", "new"), peer="a")
        # Assert
        assert verdicts == (False, False)
        assert fresh is True
        assert check.passwords == [b"held", b"new"]


class TestBasicAuthFlood:
    async def test_middleware_flood_from_one_peer_delays_another_by_one_check(
        self, monkeypatch
    ) -> None:
        """Given twenty requests with distinct wrong passwords from one peer queued
        behind a check in progress, when the scraper (another peer, verdict not yet
        remembered) asks, then its check runs next: right after the one in progress,
        not after the whole flood."""
        # Arrange
        check = GatedCheck()
        monkeypatch.setattr(basicauth, "checkpw", check)
        arrived: list[web.Request] = []
        async with guarded_app(arrived) as url, aiohttp.ClientSession() as flood:
            attempts = [
                asyncio.ensure_future(
                    flood.get(url, headers={"Authorization": header("prometheus", f"wrong{i}")})
                )
                for i in range(20)
            ]
            await until(lambda: len(arrived) == 20)
            scraper = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
            async with aiohttp.ClientSession(connector=scraper) as session:
                scrape = asyncio.ensure_future(
                    session.get(url, headers={"Authorization": header("prometheus", "s3cret")})
                )
                await until(lambda: len(arrived) == 21)
                # Act
                check.gate.set()
                async with await scrape as response:
                    status = response.status
            for response in await asyncio.gather(*attempts):
                response.release()
        # Assert
        assert status == 200
        assert check.passwords.index(b"s3cret") == 1

    async def test_middleware_client_gone_costs_no_check(self, monkeypatch) -> None:
        """Given twenty requests with distinct wrong passwords whose clients hung up
        at once, queued behind a check in progress, when their turns come, then no
        bcrypt runs for them: the scraper's check is the next one run."""
        # Arrange
        check = GatedCheck()
        monkeypatch.setattr(basicauth, "checkpw", check)
        arrived: list[web.Request] = []
        async with guarded_app(arrived) as url, aiohttp.ClientSession() as session:
            held = asyncio.ensure_future(
                session.get(url, headers={"Authorization": header("prometheus", "held")})
            )
            await until(lambda: len(arrived) == 1)
            port = int(url.rstrip("/").rpartition(":")[2])
            for i in range(20):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                credentials = header("prometheus", f"wrong{i}")
                request = f"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: {credentials}\r\n\r\n"
                writer.write(request.encode())
                await writer.drain()
                writer.close()
            await until(lambda: len(arrived) == 21)
            await until(
                lambda: all(r.transport is None or r.transport.is_closing() for r in arrived[1:])
            )
            # Act
            check.gate.set()
            (await held).release()
            response = await session.get(
                url, headers={"Authorization": header("prometheus", "s3cret")}
            )
            status = response.status
            response.release()
        # Assert
        assert status == 200
        assert check.passwords == [b"held", b"s3cret"]


CHECK_THEN_LEAVE = """
import asyncio, base64, sys
from wool_idle.web.basicauth import BasicAuth

async def main():
    auth = BasicAuth(lambda: {"prometheus": sys.argv[1].encode()})
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
