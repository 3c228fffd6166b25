"""``wool-idle autoscaler`` as a real process."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import unix_http
from support.metrics import fetch, samples
from support.processes import (
    run_cli,
    spawn_cli,
    spawn_with_stalled_lookups,
    spawn_with_stalled_reads,
    terminated_once_stalled,
)
from support.waiting import eventually_async

from wool_idle.cli import build_parser, main

WAIT = 15.0


async def wait_ready(url: str) -> int:
    """Poll the autoscaler's /-/ready until 200 (or WAIT seconds); the last status."""
    deadline = asyncio.get_running_loop().time() + WAIT
    status = 0
    while status != 200 and asyncio.get_running_loop().time() < deadline:
        status, _ = await unix_http.get(url, "/-/ready")
        await asyncio.sleep(0.1)
    return status


def once_stopping_idle(url: str) -> list[str]:
    """`autoscaler --once` over the exporter at ``url``, stopping workers idle 200 ms,
    floor 0, grace 2 s."""
    args = ["autoscaler", "--max-idle", "200ms", "--metrics-url", url, "--min-workers", "0"]
    return [*args, "--grace", "2s", "--once"]


class TestAutoscalerCli:
    async def test_once_stops_idle_worker(self, fleet, exporter_process) -> None:
        """Given an idle worker behind an exporter, when `autoscaler --once` runs past
        max-idle with a floor of 0, then it exits 0 and the worker exits 0."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        await asyncio.sleep(0.3)
        # Act
        result = await asyncio.to_thread(
            run_cli,
            once_stopping_idle(exporter.url),
        )
        # Assert
        assert result.returncode == 0, result.stderr
        assert "result=stopped" in result.stderr
        assert await fleet.wait_exit(address) == 0

    async def test_once_proxy_environment_is_not_dialled(self, fleet, exporter_process) -> None:
        """Given an idle worker behind an exporter, and an autoscaler whose environment
        names a forward proxy for every scheme (``http_proxy``, ``https_proxy``,
        ``grpc_proxy``: a corporate host) at an address nothing listens on, when
        `--once` runs past max-idle with a floor of 0, then it read the exporter,
        confirmed and stopped the worker directly (never ``unreachable``)."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        dead = "http://127.0.0.1:1"
        proxies = {name: dead for name in ("http_proxy", "https_proxy", "grpc_proxy")}
        await asyncio.sleep(0.3)
        # Act
        result = await asyncio.to_thread(
            run_cli,
            once_stopping_idle(exporter.url),
            env={**proxies, "no_proxy": ""},
        )
        # Assert
        assert result.returncode == 0, result.stderr
        assert "result=stopped" in result.stderr
        assert await fleet.wait_exit(address) == 0

    async def test_once_signalled_lets_the_stop_it_sent_end(self, scripted, serve_text) -> None:
        """Given an idle worker that answers its stop once drained, 2 s later, when
        `--once` gets SIGTERM after sending the stop, then it waits for the stop and
        exits 0: the call is answered, not cut short (a wool worker whose stop call is
        cut never exits)."""
        # Arrange
        worker = await scripted(seconds=900.0, stop_delay=2.0)
        text = (
            f'wool_worker_idle_seconds{{worker="{worker.address}"}} 900\n'
            f'wool_worker_up{{worker="{worker.address}"}} 1\n'
            f'wool_worker_idle_supported{{worker="{worker.address}"}} 1\n'
        )
        url = await serve_text(text)
        once = ["autoscaler", "--once", "--metrics-url", url, "--max-idle", "1m"]
        process = spawn_cli([*once, "--min-workers", "0", "--grace", "5s"])
        # Act
        sent = await eventually_async(lambda: len(worker.stop_requests) == 1, timeout=WAIT)
        process.send_signal(signal.SIGTERM)
        returncode = await asyncio.to_thread(process.wait, WAIT)
        # Assert
        assert sent
        assert returncode == 0, process.stderr.read() if process.stderr else ""
        assert (worker.stops_answered, worker.stops_cancelled) == (1, 0)

    async def test_daemon_signalled_says_so_at_once(self, serve_text) -> None:
        """Given the daemon running, when it gets SIGTERM, then it logs at once that it
        was signalled, sends no more stops and how long those sent may hold it, before
        it has stopped (it said nothing until then: up to the stops' deadline, 40 s at
        the defaults), and exits 0."""
        # Arrange
        url = await serve_text("")
        daemon = ["autoscaler", "--metrics-url", url, "--max-idle", "1m", "--interval", "0.1s"]
        process = spawn_cli([*daemon, "--web.listen-address", "127.0.0.1:0"])
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()  # the ready line: the handlers are installed
        # Act
        process.send_signal(signal.SIGTERM)
        returncode = await asyncio.to_thread(process.wait, WAIT)
        log = process.stderr.read()
        # Assert
        assert returncode == 0, log
        assert "autoscaler: signalled, sending no more stops; those sent may end (40s" in log
        assert log.index("signalled") < log.index("autoscaler stopped")

    @pytest.mark.parametrize("mode", ["daemon", "once"])
    async def test_signalled_during_a_stalled_source_read_leaves_and_stops_no_one(
        self, fleet, stalled_source, mode: str
    ) -> None:
        """Given an idle worker, a floor of 0 and a source that never answers (a stalled
        Prometheus) read with a --source-timeout of an hour, when the autoscaler (the
        daemon, or --once) gets SIGTERM while it reads, then it exits 0 without waiting
        out the read (it held the exit up to the source timeout), logs that it was
        signalled and that the read was cut short, and sent no stop: the worker serves."""
        # Arrange
        (address,) = await fleet.start(1)
        source = await stalled_source()
        args = ["autoscaler", "--metrics-url", source.url, "--max-idle", "200ms",
                "--min-workers", "0", "--source-timeout", "1h"]  # fmt: skip
        args += ["--once"] if mode == "once" else ["--web.listen-address", "127.0.0.1:0"]
        process = spawn_cli(args)
        try:
            await asyncio.wait_for(source.asked.wait(), WAIT)
            # Act
            process.send_signal(signal.SIGTERM)
            returncode = await asyncio.to_thread(process.wait, WAIT)
        finally:
            process.kill()
            process.wait()
        log = process.stderr.read() if process.stderr else ""
        # Assert
        assert returncode == 0, log
        assert "signalled, sending no more stops" in log
        assert "shutting down: the read of the source cut short" in log
        assert "result=" not in log
        assert fleet.alive(address)

    def test_daemon_signalled_while_a_secret_file_read_stalls_exits_0(self, tmp_path: Path) -> None:
        """Given the daemon whose source's password file is read in a file system that
        stalls for good, when it gets SIGTERM, then it exits 0 all the same: nothing
        waits for the stalled read (it waited for good, until systemd or the kubelet
        killed it)."""
        # Arrange
        secret = tmp_path / "password"
        secret.write_text("s3cret\n")
        config = tmp_path / "http.yml"
        config.write_text(f"basic_auth: {{username: u, password_file: {secret}}}\n")
        process = spawn_with_stalled_reads(
            "wool_idle.web.client_config",
            secret,
            ["autoscaler", "--metrics-url", "http://127.0.0.1:1/metrics", "--max-idle", "1m",
             "--source-timeout", "1s", "--http.config.file", str(config),
             "--web.listen-address", "127.0.0.1:0"],
        )  # fmt: skip
        try:
            assert process.stdout is not None
            assert process.stdout.readline().startswith("http://")
            # Act
            status = terminated_once_stalled(process)
        finally:
            process.kill()
            process.wait()
        # Assert
        assert status == 0

    @pytest.mark.parametrize("mode", ["daemon", "once"])
    def test_signalled_while_the_source_name_lookup_hangs_exits_0(self, mode: str) -> None:
        """Given the autoscaler (the daemon, or --once) whose source's host name is looked
        up against a DNS server that does not answer, when it gets SIGTERM during that
        lookup, then it exits 0 all the same: the read is cut short and nothing waits for
        the lookup (aiohttp's ran on the default executor, which the exit waited for as
        long as the lookup hung)."""
        # Arrange
        args = ["autoscaler", "--metrics-url", "http://source.invalid:9/metrics",
                "--max-idle", "1m", "--source-timeout", "1h"]  # fmt: skip
        args += ["--once"] if mode == "once" else ["--web.listen-address", "127.0.0.1:0"]
        process = spawn_with_stalled_lookups("source.invalid", args)
        try:
            # Act
            status = terminated_once_stalled(process)
        finally:
            process.kill()
            process.wait()
        # Assert
        assert status == 0

    def test_once_source_down_exits_1(self) -> None:
        """Given no exporter at the URL, when `--once` runs, then it exits 1 and says so."""
        # Act
        result = run_cli(
            [
                "autoscaler",
                "--max-idle",
                "1s",
                "--metrics-url",
                "http://127.0.0.1:1/metrics",
                "--once",
            ]
        )
        # Assert
        assert result.returncode == 1
        assert "stopping no one" in result.stderr

    async def test_daemon_serves_metrics_and_decisions_and_exits_on_sigterm(
        self, fleet, exporter_process
    ) -> None:
        """Given the daemon running against an idle worker, when its endpoints are read
        and it gets SIGTERM, then /metrics has its series, /decisions has the stop, and
        it exits 0."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        await asyncio.sleep(0.3)
        process = spawn_cli(
            [
                "autoscaler",
                "--max-idle",
                "0.2s",
                "--metrics-url",
                exporter.url,
                "--min-workers",
                "0",
                "--interval",
                "0.2s",
                "--grace",
                "1s",
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ]
        )
        url = process.stdout.readline().strip()
        # Act
        await fleet.wait_exit(address)
        await asyncio.sleep(0.5)
        metrics = fetch(url)
        decisions = json.loads(fetch(url.replace("/metrics", "/decisions")))
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=30)
        log_lines = [json.loads(line) for line in process.stderr.read().splitlines() if line]
        # Assert
        assert (
            samples(metrics)[("wool_autoscaler_stops_total", frozenset({("result", "stopped")}))]
            == 1
        )
        assert any(d["worker"] == address and d["result"] == "stopped" for d in decisions)
        assert status == 0
        assert any(line.get("result") == "stopped" for line in log_lines)

    async def test_ready_once_a_source_read_succeeded(self, fleet, exporter_process) -> None:
        """Given two daemons on Unix sockets, one reading a dead URL and one a live
        exporter, when /-/ready is asked, then the first says 503 (no read succeeded
        yet) and the second becomes 200; its /metrics has its build info and, as the
        exporter's, its process's series."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        common = ["autoscaler", "--max-idle", "1h", "--interval", "0.2s"]
        processes = {
            source: spawn_cli(
                [
                    *common,
                    "--metrics-url",
                    source,
                    "--web.listen-address",
                    f"unix:{unix_http.socket_path('autoscaler')}",
                ]
            )
            for source in ("http://127.0.0.1:1/metrics", exporter.url)
        }
        urls = {source: p.stdout.readline().strip() for source, p in processes.items()}
        # Act
        dead = await unix_http.get(urls["http://127.0.0.1:1/metrics"], "/-/ready")
        live = await wait_ready(urls[exporter.url])
        metrics = await unix_http.get(urls[exporter.url], "/metrics")
        for process in processes.values():
            process.terminate()
        statuses = [p.wait(timeout=30) for p in processes.values()]
        # Assert
        assert dead == (503, "no successful read of the source yet\n")
        assert live == 200
        names = {name for name, _ in samples(metrics[1])}
        assert {"wool_idle_build_info", "process_cpu_seconds_total", "python_info"} <= names
        assert statuses == [0, 0]


def start_exporter(targets_file: Path) -> subprocess.Popen[str]:
    """``wool-idle exporter`` over a file_sd targets file; its URL is its first line."""
    return spawn_cli(["exporter", "--listen", "127.0.0.1:0", "--targets-file", str(targets_file)])


async def once_over_pools(fleet, directory: Path, label: str, *flags: str) -> list[int]:
    """Three hot and two cold workers, idle since start, listed in a targets file with
    ``label`` hot or cold; `autoscaler --once --min-workers 1 FLAGS` over them. How
    many of each pool survive."""
    hot, cold = await fleet.start(3), await fleet.start(2)
    groups = [
        {"targets": hot, "labels": {label: "hot"}},
        {"targets": cold, "labels": {label: "cold"}},
    ]
    (directory / "targets.yml").write_text(yaml.safe_dump(groups))
    exporter = start_exporter(directory / "targets.yml")
    url = exporter.stdout.readline().strip()
    await asyncio.sleep(0.3)
    once = ["autoscaler", "--once", "--metrics-url", url, "--max-idle", "200ms"]
    result = await asyncio.to_thread(
        run_cli, [*once, "--min-workers", "1", "--grace", "1s", *flags]
    )
    exporter.terminate()
    exporter.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    for address in (*hot, *cold):
        if f"worker={address} verdict=stop " in result.stderr:
            await fleet.wait_exit(address)
    return [sum(fleet.alive(a) for a in pool) for pool in (hot, cold)]


class TestGroupsAndDrops:
    @pytest.mark.parametrize("label", ["wool_tags", "wool_namespace", "pool"])
    async def test_once_group_by_keeps_a_worker_of_every_group(
        self, fleet, tmp_path: Path, label: str
    ) -> None:
        """Given a hot pool of three and a cold pool of two, every worker idle since
        start, labelled by a targets file (the exporter's discovery labels are
        ordinary labels), when `--once --min-workers 1 --group-by LABEL` runs, then
        exactly one worker of each pool survives."""
        # Act
        survivors = await once_over_pools(fleet, tmp_path, label, "--group-by", label)
        # Assert
        assert survivors == [1, 1]

    async def test_once_without_group_by_may_empty_a_pool(self, fleet, tmp_path: Path) -> None:
        """Given the same pools and no --group-by, when `--once --min-workers 1` runs,
        then one worker of the whole fleet survives: a pool is emptied (why groups)."""
        # Act
        survivors = await once_over_pools(fleet, tmp_path, "wool_tags")
        # Assert
        assert sum(survivors) == 1 and 0 in survivors

    async def test_once_min_age_holds_new_workers(self, fleet, exporter_process) -> None:
        """Given an idle worker, when `--once --min-age 1h` runs (every worker is new to
        a fresh autoscaler), then it is held by min_age and keeps running."""
        # Arrange
        (address,) = await fleet.start(1)
        exporter = exporter_process([address])
        await asyncio.sleep(0.3)
        # Act
        result = await asyncio.to_thread(
            run_cli,
            [
                "autoscaler",
                "--once",
                "--metrics-url",
                exporter.url,
                "--max-idle",
                "200ms",
                "--min-workers",
                "0",
                "--min-age",
                "1h",
            ],
        )
        # Assert
        assert result.returncode == 0, result.stderr
        assert f"worker={address} verdict=min_age" in result.stderr
        assert fleet.alive(address)

    def test_selector_with_an_escaped_comma_is_one_matcher(self) -> None:
        """Given --selector with a regex whose comma is written \\x2c (a comma separates
        selectors), when parsed, then it is one matcher that matches the comma-joined
        wool_tags value."""
        # Arrange
        parser = build_parser()
        # Act
        args = parser.parse_args(["autoscaler", "--max-idle", "1s", "--selector", r"t=~a\x2cb"])
        # Assert
        (selector,) = args.selector
        assert selector.matches({"t": "a,b"}) and not selector.matches({"t": "a"})

    def test_lan_discovery_is_logged_as_having_no_drop(self) -> None:
        """Given --wool-discovery lan:NS, when the autoscaler starts, then it is
        accepted and the log says LAN has no drop (the retired series shows it)."""
        # Act
        result = run_cli(
            [
                "autoscaler",
                "--once",
                "--max-idle",
                "1s",
                "--metrics-url",
                "http://127.0.0.1:1/metrics",
                "--wool-discovery",
                "lan:pool-a",
            ]
        )
        # Assert
        assert result.returncode == 1  # the source is down; the flag itself was fine
        assert "lan:pool-a: LAN discovery has no drop" in result.stderr

    def test_local_discovery_without_wool_exits_2(self, monkeypatch, capsys) -> None:
        """Given --wool-discovery local:NS and no wool package importable, when the
        autoscaler parses its flags, then it exits 2 with one line naming the flag."""
        # Arrange
        monkeypatch.setitem(sys.modules, "wool", None)
        # Act
        with pytest.raises(SystemExit) as exited:
            main(["autoscaler", "--max-idle", "1s", "--wool-discovery", "local:ns", "--once"])
        # Assert
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert err.count("\n") == 1 and "--wool-discovery" in err and "wool" in err


def idle_text(*workers) -> str:
    """Exposition text of ``workers``, up, idle 900 s, 899 s, ... (a cache serving it)."""
    return "".join(
        f'wool_worker_idle_seconds{{worker="{w.address}"}} {900 - i}\n'
        f'wool_worker_up{{worker="{w.address}"}} 1\n'
        f'wool_worker_idle_supported{{worker="{w.address}"}} 1\n'
        for i, w in enumerate(workers)
    )


def once_with_state(url: str, state: Path, *, min_workers: int) -> list[str]:
    """`autoscaler --once` over ``url`` with ``--state-file state``, max idle 1m."""
    return [
        "autoscaler",
        "--once",
        "--metrics-url",
        url,
        "--max-idle",
        "1m",
        "--min-workers",
        str(min_workers),
        "--state-file",
        str(state),
    ]


def daemon_with_state(url: str, state: Path) -> list[str]:
    """The `autoscaler` daemon over ``url`` (max idle 1m, no floor, grouped by
    wool_tags) with ``--state-file state``, on a Unix socket; its URL is its first line."""
    return [
        "autoscaler",
        "--metrics-url",
        url,
        "--max-idle",
        "1m",
        "--min-workers",
        "0",
        "--group-by",
        "wool_tags",
        "--interval",
        "0.2s",
        "--state-file",
        str(state),
        "--web.listen-address",
        f"unix:{unix_http.socket_path('autoscaler')}",
    ]


def retired_series(text: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of ``wool_autoscaler_retired_timestamp_seconds`` in ``text``."""
    name = "wool_autoscaler_retired_timestamp_seconds"
    return {labels: value for (sample, labels), value in samples(text).items() if sample == name}


async def wait_retired(url: str) -> dict[frozenset[tuple[str, str]], float]:
    """Poll the autoscaler's /metrics until it shows a retired worker (or WAIT seconds);
    the retired series last read."""
    deadline = asyncio.get_running_loop().time() + WAIT
    series: dict[frozenset[tuple[str, str]], float] = {}
    while not series and asyncio.get_running_loop().time() < deadline:
        series = retired_series((await unix_http.get(url, "/metrics"))[1])
        await asyncio.sleep(0.1)
    return series


class TestStateFileCli:
    async def test_second_once_counts_the_first_ones_stop_retiring(
        self, scripted, serve_text, tmp_path: Path
    ) -> None:
        """Given three idle workers served as up and idle after their stop too (a cache,
        or a worker still draining), a floor of 2 and a state file, when `--once` runs
        twice on it, then only the first run stops a worker: the second counts that one
        as retiring, not alive, and stops no other (without the file it would, leaving
        one worker against a floor of 2)."""
        # Arrange
        workers = [await scripted(seconds=900.0) for _ in range(3)]
        url = await serve_text(idle_text(*workers))
        state = tmp_path / "state.json"
        once = once_with_state(url, state, min_workers=2)
        state.write_text('{"version": 1, "retiring": {}, "unreachable": {}, "cooldown_until": {}}')
        # Act
        first = await asyncio.to_thread(run_cli, once)
        second = await asyncio.to_thread(run_cli, once)
        # Assert
        assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
        assert [len(w.stop_requests) for w in workers] == [1, 0, 0]
        assert "1 worker(s) retiring" in second.stderr
        assert list(json.loads(state.read_text())["retiring"]) == [workers[0].address]

    async def test_restarted_daemon_shows_the_worker_it_retired(
        self, scripted, serve_text, tmp_path: Path
    ) -> None:
        """Given a daemon on a state file, grouped by wool_tags, that stopped an idle
        worker, when it is restarted (SIGTERM, then a new process on the same file) over
        a source that reads the worker down (its static target stays), then the new
        process serves the worker's retired series again, with the stop time and group
        the first one served (WoolWorkerDown's `unless on(worker)` still matches it)."""
        # Arrange
        worker = await scripted(seconds=900.0)
        labels = f'worker="{worker.address}",wool_tags="hot"'
        idle = await serve_text(
            f"wool_worker_idle_seconds{{{labels}}} 900\nwool_worker_up{{{labels}}} 1\n"
            f"wool_worker_idle_supported{{{labels}}} 1\n"
        )
        down = await serve_text(f"wool_worker_up{{{labels}}} 0\n")
        state = tmp_path / "state.json"
        state.write_text('{"version": 1, "retiring": {}, "unreachable": {}, "cooldown_until": {}}')
        first = spawn_cli(daemon_with_state(idle, state))
        first_url = first.stdout.readline().strip()
        before = await wait_retired(first_url)
        first.send_signal(signal.SIGTERM)
        first_status = first.wait(timeout=WAIT)
        # Act
        restarted = spawn_cli(daemon_with_state(down, state))
        restarted_url = restarted.stdout.readline().strip()
        ready = await wait_ready(restarted_url)
        after = retired_series((await unix_http.get(restarted_url, "/metrics"))[1])
        restarted.send_signal(signal.SIGTERM)
        statuses = [first_status, restarted.wait(timeout=WAIT)]
        # Assert
        assert (statuses, ready, len(worker.stop_requests)) == ([0, 0], 200, 1)
        assert list(before) == [frozenset({("worker", worker.address), ("wool_tags", "hot")})]
        assert after == before

    async def test_unreadable_state_file_holds_and_says_why(
        self, scripted, serve_text, tmp_path: Path
    ) -> None:
        """Given an idle worker and a state file that is not JSON, when `--once` runs,
        then it exits 0, stops no one (held as min_age: the earlier stops are unknown),
        says why naming the file, and writes the file anew."""
        # Arrange
        worker = await scripted(seconds=900.0)
        url = await serve_text(idle_text(worker))
        state = tmp_path / "state.json"
        state.write_text("{garbage")
        # Act
        result = await asyncio.to_thread(run_cli, once_with_state(url, state, min_workers=0))
        # Assert
        assert result.returncode == 0, result.stderr
        assert worker.stop_requests == []
        assert "verdict=min_age" in result.stderr
        assert f"state file {state}: not JSON" in result.stderr
        assert json.loads(state.read_text())["retiring"] == {}

    async def test_state_file_in_use_exits_2(self, serve_text, tmp_path: Path) -> None:
        """Given a running autoscaler on a state file, when a second one is started on
        the same file, then the second exits 2 naming --state-file (two processes would
        overwrite each other's marks), and the first runs on."""
        # Arrange
        url = await serve_text("")
        state = str(tmp_path / "state.json")
        common = ["autoscaler", "--metrics-url", url, "--max-idle", "1m", "--state-file", state]
        first = spawn_cli([*common, "--listen", "127.0.0.1:0"])
        assert first.stdout is not None and first.stdout.readline().startswith("http")
        # Act
        second = await asyncio.to_thread(run_cli, [*common, "--once"])
        running = first.poll() is None
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=WAIT)
        # Assert
        assert second.returncode == 2
        assert "argument --state-file" in second.stderr and "in use" in second.stderr
        assert running
