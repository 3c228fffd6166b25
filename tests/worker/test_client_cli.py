"""`wool-idle idle` and `wool-idle stop` against workers that answer badly or not at all."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import grpc
import pytest
from support.draining import draining
from support.processes import run_cli
from support.raw import RawWorker
from support.scripted import ScriptedWorker


class TestIdleCli:
    def test_idle_exit_codes(self) -> None:
        """Given a dead address, when `wool-idle idle` polls it, then it exits 4 (unreachable)."""
        # Act
        result = run_cli(["idle", "127.0.0.1:1", "--timeout", "2s"])
        # Assert
        assert result.returncode == 4
        assert "UNAVAILABLE" in result.stderr


class TestIdleCliUndecodableReply:
    async def test_idle_undecodable_reply_exits_5_with_one_line(self) -> None:
        """Given a worker answering idle with bytes that are not an IdleTime, when
        `wool-idle idle` polls it, then it exits 5 (RPC error) with one line on
        stderr naming the problem, and no traceback."""
        # Arrange / Act
        async with RawWorker() as worker:
            result = await asyncio.to_thread(run_cli, ["idle", worker.address, "--timeout", "5s"])
        # Assert
        assert result.returncode == 5
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "INTERNAL" in result.stderr and "does not decode as IdleTime" in result.stderr


class TestIdleCliInvalidValue:
    @pytest.mark.parametrize("seconds", [math.nan, math.inf, -1.0])
    async def test_idle_invalid_value_exits_5_with_one_line(self, seconds: float) -> None:
        """Given a worker answering an idle value that is no idle value (NaN, infinity,
        negative), when `wool-idle idle` polls it, then nothing is printed on stdout and
        it exits 5 with one line naming the value, as for any answer without an idle
        value."""
        # Arrange
        worker = ScriptedWorker(seconds=seconds)
        address = await worker.start()
        # Act
        try:
            result = await asyncio.to_thread(run_cli, ["idle", address, "--timeout", "5s"])
        finally:
            await worker.close()
        # Assert
        assert (result.returncode, result.stdout) == (5, "")
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert f"no idle value ({seconds!r}" in result.stderr


class TestClientCliErrorDetails:
    @pytest.mark.parametrize("command", ["idle", "stop"])
    async def test_report_worker_details_cannot_drive_the_terminal_or_forge_a_line(
        self, command: str
    ) -> None:
        """Given a worker failing the call with a status message holding terminal escape
        sequences (clear the screen, a window title), a carriage return and a line
        break followed by a forged line, when `wool-idle idle` or `stop` calls it, then
        stderr is one line in which those characters are escaped (``\\u001b``): a
        worker cannot write to the operator's terminal or forge what it says."""
        # Arrange
        forged = "\x1b[2J\x1b]0;owned\x07ok\r\nwool-idle: stopped, all good\u2028"
        worker = ScriptedWorker(code=grpc.StatusCode.INTERNAL, details=forged)
        address = await worker.start()
        # Act
        try:
            result = await asyncio.to_thread(run_cli, [command, address])
        finally:
            await worker.close()
        # Assert
        assert result.returncode == 5
        assert result.stderr.endswith("\n") and result.stderr[:-1].isprintable(), result.stderr
        escaped = "INTERNAL: \\u001b[2J\\u001b]0;owned\\u0007ok\\r\\nwool-idle: stopped"
        assert escaped in result.stderr


class TestStopCliUnconditionalWorker:
    @pytest.mark.parametrize(
        ("seconds", "grace", "reason"),
        [
            (5.0, "30s", "idle 5.000s, required 600.000s"),
            (math.nan, "30s", "idle nans, required 600.000s"),
            (900.0, "0", "with --grace 0 a task arriving before the stop would be cancelled"),
        ],
        ids=["not_idle_enough", "no_idle_value", "grace_zero"],
    )
    async def test_stop_if_idle_for_on_a_worker_ignoring_it_is_held(
        self, seconds: float, grace: str, reason: str
    ) -> None:
        """Given a worker whose idle reply says it ignores the conditional stop (as a
        wool worker's does) and that is idle too briefly, has no idle value, or is
        asked with grace 0, when `wool-idle stop --if-idle-for 10m` runs, then no stop
        is sent (a wool worker would stop, busy or not) and it exits 3 with one line
        saying why."""
        # Arrange
        worker = ScriptedWorker(seconds=seconds)
        address = await worker.start()
        args = ["stop", address, "--if-idle-for", "10m", "--grace", grace]
        # Act
        try:
            result = await asyncio.to_thread(run_cli, args)
        finally:
            await worker.close()
        # Assert
        assert result.returncode == 3
        assert worker.stop_requests == []
        assert result.stderr == (
            f"wool-idle: {address} does not say it honours --if-idle-for (a wool worker stops "
            f"unconditionally): {reason}; not stopped\n"
        )

    async def test_stop_if_idle_for_on_a_worker_ignoring_it_idle_enough_stops(self) -> None:
        """Given a worker that ignores the conditional stop and has been idle past
        --if-idle-for, when `wool-idle stop --if-idle-for 10m` runs, then the stop is
        sent with its grace, it exits 0, and one line says the window was open."""
        # Arrange
        worker = ScriptedWorker(seconds=900.0)
        address = await worker.start()
        # Act
        try:
            result = await asyncio.to_thread(
                run_cli, ["stop", address, "--if-idle-for", "10m", "--grace", "30s"]
            )
        finally:
            await worker.close()
        # Assert
        assert result.returncode == 0
        assert [r.timeout for r in worker.stop_requests] == [30.0]
        assert "idle 900.000s, stopping it" in result.stderr

    async def test_stop_if_idle_for_on_a_worker_without_idle_is_held(self) -> None:
        """Given a worker older than the idle RPC (wool < 0.14), when `wool-idle stop
        --if-idle-for 10m` runs, then no stop is sent and it exits 3: the condition
        cannot be checked."""
        # Arrange
        worker = ScriptedWorker(with_idle=False)
        address = await worker.start()
        # Act
        try:
            result = await asyncio.to_thread(run_cli, ["stop", address, "--if-idle-for", "10m"])
        finally:
            await worker.close()
        # Assert
        assert result.returncode == 3
        assert worker.stop_requests == []

    async def test_stop_if_idle_for_on_a_worker_without_idle_says_not_stopped(self) -> None:
        """Given a worker older than the idle RPC, when `wool-idle stop --if-idle-for
        10m` runs, then its one line of stderr says the condition cannot be checked and
        the worker was not stopped (exit 3 is otherwise a refusal by the worker)."""
        # Arrange
        worker = ScriptedWorker(with_idle=False)
        address = await worker.start()
        # Act
        try:
            result = await asyncio.to_thread(run_cli, ["stop", address, "--if-idle-for", "10m"])
        finally:
            await worker.close()
        # Assert
        assert result.stderr.count("\n") == 1
        assert "--if-idle-for" in result.stderr and "not stopped" in result.stderr


class TestStopCliStoppingWorker:
    async def test_stop_if_idle_for_on_a_stopping_worker_exits_5_sending_no_stop(
        self, start_server, tmp_path: Path
    ) -> None:
        """Given a real worker draining a task for a stop another caller sent (it
        refuses idle with FAILED_PRECONDITION), when `wool-idle stop --if-idle-for 10m`
        runs, then it exits 5 naming the refusal, before any stop (a refusal does not
        say the server honours the conditional stop), and the drain goes on."""
        # Arrange
        gate = tmp_path / "gate"
        server, connection, running, first_stop = await draining(start_server, gate)
        args = ["stop", server.address, "--if-idle-for", "10m", "--grace", "30s"]
        # Act
        try:
            result = await asyncio.to_thread(run_cli, args)
            in_flight = len(server.service.in_flight)
        finally:
            gate.touch()
            await asyncio.gather(running, first_stop, return_exceptions=True)
            await connection.close()
        # Assert
        assert result.returncode == 5, result.stderr
        assert "worker is stopping" in result.stderr
        assert in_flight == 1


class TestStopCliTimeout:
    def test_stop_timeout_not_past_grace_exits_2(self) -> None:
        """Given --timeout no longer than --grace, when `wool-idle stop` runs, then it
        exits 2 naming --timeout before any call (the deadline ran out while the
        worker drained: exit 4, unreachable, for a worker that was stopping)."""
        # Act
        result = run_cli(["stop", "127.0.0.1:1", "--grace", "30s", "--timeout", "5s"])
        # Assert
        assert result.returncode == 2
        assert "--timeout" in result.stderr and "--grace" in result.stderr
