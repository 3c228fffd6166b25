"""End to end: the autoscaler reading a real Pushgateway (``--metrics-url``) to which
a real exporter's answer was pushed before a worker crashed, by a job that has pushed
nothing since. The Pushgateway serves the text unstamped for ever; only its
``push_time_seconds`` says how old it is. The crashed worker must hold no floor."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.fleet import ExporterProcess, Fleet
from support.processes import run_cli
from support.prometheus import free_port
from support.waiting import eventually

from wool_idle.autoscaler.sources import parse_exposition

pytestmark = pytest.mark.e2e


@pytest.fixture
def pushgateway() -> Iterator[str]:
    """A real Pushgateway (Debian's prometheus-pushgateway); its base URL."""
    binary = shutil.which("prometheus-pushgateway")
    assert binary, "Debian's prometheus-pushgateway is required (scripts/ensure-prometheus)"
    address = f"127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        # Debian's build persists to /var/lib/prometheus by default: another run's
        # pushes would be loaded (and this one's kept); in memory only.
        [binary, f"--web.listen-address={address}", "--persistence.file="],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert eventually(lambda: ready(f"http://{address}"), timeout=30)
        yield f"http://{address}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


async def get_text(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url) as response:
        return await response.text()


def push_time(text: str) -> float:
    """The one group's last push time in a Pushgateway's answer."""
    families = text_string_to_metric_families(text)
    (time_family,) = (f for f in families if f.name == "push_time_seconds")
    (sample,) = time_family.samples
    return sample.value


class TestPushgateway:
    async def test_autoscaler_push_from_before_a_crash_holds_no_floor(
        self, pushgateway: str
    ) -> None:
        """Given two idle workers (real processes) behind a real exporter, whose answer
        was pushed to a real Pushgateway before one of them crashed and not since (older
        than --max-staleness), and --min-workers 1, when the autoscaler reads the
        Pushgateway once, then nothing it read is fresh: the crashed worker holds no
        floor and the live worker (the longer idle) is not stopped but read stale."""
        # Arrange
        fleet = Fleet()
        (live,) = await fleet.start(1)
        (doomed,) = await fleet.start(1)
        exporter = ExporterProcess([live, doomed])
        url = await asyncio.to_thread(exporter.start)
        metrics = f"{pushgateway}/metrics"
        try:
            async with aiohttp.ClientSession() as session:
                text = await get_text(session, url)
                while sum((r.idle or 0.0) >= 1.0 for r in parse_exposition(text)) < 2:
                    await asyncio.sleep(0.2)
                    text = await get_text(session, url)
                group = f"{metrics}/job/wool/instance/exporter"
                async with session.put(group, data=text.encode()) as pushed:
                    assert pushed.status == 200, await pushed.text()
                await next(w for w in fleet.workers if w.address == doomed).kill()
                while time.time() - push_time(await get_text(session, metrics)) < 2.0:
                    await asyncio.sleep(0.2)
            # Act
            done = await asyncio.to_thread(
                run_cli,
                [
                    *("autoscaler", "--once", "--max-idle", "1s", "--min-workers", "1"),
                    *("--max-staleness", "1s", "--metrics-url", metrics, "--log.level", "debug"),
                ],
            )
            # Assert
            assert done.returncode == 0, done.stderr
            assert "verdict=stop" not in done.stderr
            assert f"worker={live} verdict=stale" in done.stderr
        finally:
            exporter.stop()
            await fleet.close()
