"""`wool-idle idle` and `wool-idle stop` against workers that answer badly or not at all."""

from __future__ import annotations

import asyncio
import math

import pytest
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
