"""``wool-idle exporter`` as a real process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from support import unix_http
from support.blackhole import Blackhole
from support.metrics import by_worker, fetch, samples
from support.processes import spawn_cli, spawn_with_stalled_reads, terminated_once_stalled
from support.waiting import eventually_async

import wool_idle
from wool_idle.cli import build_parser, main
from wool_idle.discovery.spec import DiscoverySpec
from wool_idle.exporter.cli import prepare_discovery
from wool_idle.exporter.settings import DaemonSettings

EVENT_ENGINE_OFF = "-event_engine_client,-event_engine_for_all_other_endpoints"
"""gRPC's event-engine client off (docs/scaling.md: an operator's tuning)."""


def wait_for(predicate, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.1)


@pytest.fixture
def worker_address():
    process = spawn_cli(["worker"])
    address = process.stdout.readline().strip()
    yield address
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture
def start_exporter():
    processes = []

    def start(*args: str, **kwargs) -> str:
        process = spawn_cli(["exporter", "--listen", "127.0.0.1:0", *args], **kwargs)
        processes.append(process)
        url = process.stdout.readline().strip()
        assert url.startswith("http://"), process.stderr.read()
        return url

    start.processes = processes
    yield start
    for process in processes:
        process.terminate()
        assert process.wait(timeout=30) == 0


class TestExporterCli:
    def test_targets_file_edit_and_broken_edit(
        self, start_exporter, worker_address, tmp_path: Path
    ) -> None:
        """Given an exporter on a targets file, when the file is edited while it runs,
        then the next scrapes show the new targets with their labels; when a broken
        edit follows, the previous set stays and the reload metric flips to 0."""
        # Arrange
        path = tmp_path / "targets.json"
        path.write_text(json.dumps([{"targets": ["127.0.0.1:1"]}]))
        url = start_exporter("--targets-file", str(path), "--targets-refresh", "0.2s")
        before = by_worker(fetch(url), "wool_worker_up")
        # Act
        path.write_text(json.dumps([{"targets": [worker_address], "labels": {"pool": "a"}}]))
        wait_for(lambda: worker_address in by_worker(fetch(url), "wool_worker_idle_seconds"))
        edited = fetch(url)
        path.write_text("[{not json")
        wait_for(
            lambda: samples(fetch(url))[("wool_exporter_targets_reload_success", frozenset())] == 0
        )
        broken = fetch(url)
        # Assert
        assert before == {"127.0.0.1:1": 0}
        labels = frozenset({("worker", worker_address), ("pool", "a")})
        assert ("wool_worker_idle_seconds", labels) in samples(edited)
        assert set(by_worker(broken, "wool_worker_up")) == {worker_address}

    def test_sighup_reloads_targets_file(
        self, start_exporter, worker_address, tmp_path: Path
    ) -> None:
        """Given an exporter that checks its file only hourly, when the file changes and
        the exporter gets SIGHUP, then the next scrape has the new target."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("[]\n")
        url = start_exporter("--targets-file", str(path), "--targets-refresh", "1h")
        path.write_text(f"- targets: ['{worker_address}']\n")
        unchanged = by_worker(fetch(url), "wool_worker_up")
        # Act
        start_exporter.processes[-1].send_signal(signal.SIGHUP)
        wait_for(lambda: worker_address in by_worker(fetch(url), "wool_worker_up"))
        # Assert
        assert unchanged == {}

    def test_more_targets_than_open_files_still_answers(self, start_exporter) -> None:
        """Given an exporter under a hard limit of 64 open files (raising it is no help)
        and 100 targets that drop handshakes (each connect holds a socket), when it is
        scraped again and again, then ``/metrics`` and ``/-/healthy`` answer every time,
        each target with its own failure: the connects took every descriptor, and the
        listening socket's accept failed with them (a blank scrape, healthy unanswered)."""

        # Arrange
        def lower() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

        with contextlib.ExitStack() as stack:
            holes = [stack.enter_context(Blackhole()) for _ in range(100)]
            url = start_exporter(
                "--target",
                ",".join(h.address for h in holes),
                "--timeout",
                "1s",
                preexec_fn=lower,
            )
            healthy = url.removesuffix("/metrics") + "/-/healthy"
            # Act
            scrapes = []
            for _ in range(10):
                scrapes.append(by_worker(fetch(url), "wool_worker_up"))
                fetch(healthy)
        # Assert
        assert all(ups == {h.address: 0 for h in holes} for ups in scrapes)

    def test_open_files_soft_limit_raised_to_hard(self, start_exporter) -> None:
        """Given an exporter started with a soft limit of 1024 open files (systemd's
        default) below its hard limit, when it serves, then its soft limit is the hard
        one, so a connection per worker does not run out of descriptors."""
        # Arrange
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

        def lower() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))

        # Act
        start_exporter("--target", "127.0.0.1:1", preexec_fn=lower)
        pid = start_exporter.processes[-1].pid
        limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
        # Assert
        row = next(line for line in limits if line.startswith("Max open files"))
        assert row.split()[3:5] == [str(hard), str(hard)]
        assert hard > 1024

    def test_environment_sets_targets(self, start_exporter, worker_address) -> None:
        """Given WOOL_IDLE_TARGET in the environment, when the exporter starts without
        --target, then it scrapes those workers."""
        # Arrange
        import os

        env = {**os.environ, "WOOL_IDLE_TARGET": f"{worker_address},127.0.0.1:1"}
        # Act
        url = start_exporter(env=env)
        # Assert
        assert set(by_worker(fetch(url), "wool_worker_up")) == {worker_address, "127.0.0.1:1"}

    def test_event_engine_off_still_scrapes_and_probes(
        self, start_exporter, worker_address
    ) -> None:
        """Given the operator tuning of docs/scaling.md (GRPC_EXPERIMENTS turning gRPC's
        event-engine client off), when the exporter serves a real worker, then
        /metrics and /probe report its idle value and a dead address as down."""
        # Arrange
        env = {**os.environ, "GRPC_EXPERIMENTS": EVENT_ENGINE_OFF}
        url = start_exporter("--target", worker_address, "--target", "127.0.0.1:1", env=env)
        probe_url = url.removesuffix("/metrics") + f"/probe?target={worker_address}"
        # Act
        metrics, probe = fetch(url), fetch(probe_url)
        # Assert
        assert set(by_worker(metrics, "wool_worker_idle_seconds")) == {worker_address}
        assert by_worker(metrics, "wool_worker_up") == {worker_address: 1, "127.0.0.1:1": 0}
        assert set(by_worker(probe, "wool_worker_idle_seconds")) == {worker_address}

    def test_proxy_environment_is_not_dialled(self, start_exporter, worker_address) -> None:
        """Given an exporter whose environment names a forward proxy for every scheme
        (``http_proxy``, ``https_proxy``, ``grpc_proxy``: a corporate host) at an
        address nothing listens on, when it serves a real worker, then the worker
        reads up with its idle value: workers are dialled directly."""
        # Arrange
        dead = "http://127.0.0.1:1"
        proxies = {name: dead for name in ("http_proxy", "https_proxy", "grpc_proxy")}
        env = {**os.environ, **proxies, "no_proxy": ""}
        url = start_exporter("--target", worker_address, env=env)
        # Act
        metrics = fetch(url)
        # Assert
        assert by_worker(metrics, "wool_worker_up") == {worker_address: 1}
        assert set(by_worker(metrics, "wool_worker_idle_seconds")) == {worker_address}

    def test_grpc_errors_of_a_probed_address_stay_out_of_the_log(self, start_exporter) -> None:
        """Given an exporter started without GRPC_VERBOSITY in its environment, when
        /probe is asked about an IPv6 address whose zone names no interface (anyone
        who can reach /probe can ask), then gRPC's C-core writes no error line of its
        own to stderr (one per probe, past every log filter: a client flooded the log)."""
        # Arrange
        env = {name: value for name, value in os.environ.items() if name != "GRPC_VERBOSITY"}
        url = start_exporter("--target", "127.0.0.1:1", env=env)
        probe_url = url.removesuffix("/metrics") + "/probe?target=[::1%25nosuchif]:1"
        # Act
        probes = [fetch(probe_url) for _ in range(3)]
        process = start_exporter.processes[-1]
        process.terminate()
        _, stderr = process.communicate(timeout=30)
        # Assert
        assert [by_worker(probe, "wool_worker_up") for probe in probes] == [
            {"[::1%nosuchif]:1": 0}
        ] * 3
        assert "Invalid interface name" not in stderr

    async def test_serves_on_unix_socket(self, worker_address) -> None:
        """Given `--web.listen-address unix:/path`, when the exporter starts, then it
        prints the http+unix URL of its /metrics and serves the fleet, its build info
        and /-/ready over the socket; on SIGTERM it exits 0 and removes the socket."""
        # Arrange
        path = unix_http.socket_path("exporter")
        process = spawn_cli(
            ["exporter", "--web.listen-address", f"unix:{path}", "--target", worker_address]
        )
        # Act
        url = process.stdout.readline().strip()
        metrics = await unix_http.get(url, "/metrics")
        ready = await unix_http.get(url, "/-/ready")
        process.terminate()
        status = process.wait(timeout=30)
        # Assert
        assert url.endswith("/metrics"), process.stderr.read()
        assert metrics[0] == 200 and worker_address in by_worker(
            metrics[1], "wool_worker_idle_seconds"
        )
        build = frozenset({("version", wool_idle.__version__)})
        assert any(
            name == "wool_idle_build_info" and build <= labels and value == 1
            for (name, labels), value in samples(metrics[1]).items()
        )
        assert ready[0] == 200
        assert status == 0 and not Path(path).exists()

    async def test_sigterm_during_a_scrape_of_a_hung_worker_exits_0(self, scripted) -> None:
        """Given an exporter whose one target never answers its idle RPC, with a --timeout
        of an hour, when it gets SIGTERM while a /metrics scrape waits on that worker,
        then it exits 0 without waiting out the scrape (it waited for it, 60 s: aiohttp's
        own bound), the scrape cut short (no answer), and logs that it stopped."""
        # Arrange
        hung = await scripted(hang=True)
        path = unix_http.socket_path("exporter")
        process = spawn_cli(["exporter", "--web.listen-address", f"unix:{path}",
                             "--target", hung.address, "--timeout", "1h"])  # fmt: skip
        try:
            url = (await asyncio.to_thread(process.stdout.readline)).strip()
            scrape = asyncio.ensure_future(unix_http.get(url, "/metrics"))
            assert await eventually_async(lambda: hung.idle_calls > 0)
            # Act
            process.send_signal(signal.SIGTERM)
            status = await asyncio.to_thread(process.wait, 30)
        finally:
            process.kill()
            process.wait()
        (answer,) = await asyncio.gather(scrape, return_exceptions=True)
        # Assert
        assert status == 0
        assert isinstance(answer, aiohttp.ClientError)
        assert "exporter stopped" in process.stderr.read()

    @pytest.mark.parametrize("reload", ["SIGHUP", "POST /-/reload"])
    def test_sigterm_while_a_targets_file_read_stalls_exits_0(
        self, tmp_path: Path, reload: str
    ) -> None:
        """Given an exporter whose re-read of its targets file (SIGHUP, or a POST /-/reload
        waiting for its answer) stalls in the file system for good, when it gets SIGTERM,
        then it exits 0 all the same, the POST answered 503: nothing waits for the
        stalled read (it waited for good, until systemd or the kubelet killed it)."""
        # Arrange
        path = tmp_path / "targets.yml"
        path.write_text("- targets: ['127.0.0.1:1']\n")
        process = spawn_with_stalled_reads(
            "wool_idle.exporter.targets",
            path,
            ["exporter", "--targets-file", str(path), "--targets-refresh", "1h",
             "--web.listen-address", "127.0.0.1:0"],
        )  # fmt: skip
        answers: list[int] = []
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip().removesuffix("/metrics")
            if reload == "SIGHUP":
                process.send_signal(signal.SIGHUP)
            else:
                posting = threading.Thread(target=lambda: answers.append(_post(url + "/-/reload")))
                posting.start()
            # Act
            status = terminated_once_stalled(process)
        finally:
            process.kill()
            process.wait()
        if reload != "SIGHUP":
            posting.join()
        # Assert
        assert status == 0
        assert answers == ([] if reload == "SIGHUP" else [503])

    async def test_stdout_closed_before_the_ready_line(self) -> None:
        """Given an exporter whose stdout is a pipe the reader closed (a log collector
        that exited), when it binds and prints its ready line, then it serves on and
        logs that the line was not printed; on SIGTERM it exits 0, no traceback."""
        # Arrange
        path = unix_http.socket_path("exporter")
        process = spawn_cli(["exporter", "--web.listen-address", f"unix:{path}"])
        process.stdout.close()
        url = "http+unix://" + urllib.parse.quote(path, safe="")
        # Act
        healthy = await _healthy(url, process)
        process.terminate()
        status = process.wait(timeout=30)
        stderr = process.stderr.read()
        # Assert
        assert healthy, stderr
        assert "ready line not printed" in stderr
        assert status == 0 and "Traceback" not in stderr


def _post(url: str) -> int:
    """The status of an empty POST to ``url``."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=60):
            return 200
    except urllib.error.HTTPError as error:
        return error.code


async def _healthy(url: str, process, timeout: float = 15.0) -> bool:
    """Whether the daemon at ``url`` answered /-/healthy before it exited or ``timeout``."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if (await unix_http.get(url, "/-/healthy"))[0] == 200:
                return True
        await asyncio.sleep(0.05)
    return False


class TestExporterCliDiscovery:
    def test_wool_discovery_without_wool_exits_2_naming_flag(self, monkeypatch, capsys) -> None:
        """Given a process where the wool package cannot be imported, when the exporter
        is asked to follow a wool discovery, then it exits 2 with one line naming
        --wool-discovery and the extra to install, before serving anything."""
        # Arrange
        monkeypatch.setitem(sys.modules, "wool", None)
        # Act
        with pytest.raises(SystemExit) as exited:
            main(["exporter", "--listen", "127.0.0.1:0", "--wool-discovery", "local:pool"])
        err = capsys.readouterr().err
        # Assert
        assert exited.value.code == 2
        assert len(err.strip().splitlines()) == 1
        assert "argument --wool-discovery:" in err and "wool-idle[wool]" in err

    def test_lan_interface_restricts_wools_zeroconf(self, monkeypatch) -> None:
        """Given a lan discovery and --wool-discovery.lan-interface, when checked at
        start, then every zeroconf wool's LanDiscovery makes binds those interfaces
        only (wool has no option for it)."""
        # Arrange
        import wool.runtime.discovery.lan as wool_lan

        monkeypatch.setattr(wool_lan, "AsyncZeroconf", wool_lan.AsyncZeroconf)
        daemon = DaemonSettings(
            wool_discovery=(DiscoverySpec.parse("lan:pool"),),
            wool_discovery_lan_interface=("127.0.0.1", "::1"),
        )
        # Act
        prepare_discovery(build_parser().subcommands["exporter"], daemon)
        # Assert
        assert wool_lan.AsyncZeroconf.keywords == {"interfaces": ["127.0.0.1", "::1"]}
