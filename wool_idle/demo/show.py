"""The demo's run: start the fleet and the daemons, redraw the table, start the
wool client on time, stop everything, and say what happened."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Final

import aiohttp

from wool_idle.autoscaler.sources import ExporterSource, SourceError
from wool_idle.autoscaler.sources.source import fetch
from wool_idle.contract import TAGS_LABEL
from wool_idle.demo.fleet import Processes
from wool_idle.demo.settings import COLD, HOT, DemoSettings
from wool_idle.demo.table import Board, render

READ_TIMEOUT: Final = 5.0
"""Seconds one read of the exporter or of the autoscaler's decisions may take."""
CLIENT_INTERVAL: Final = 0.25
"""Seconds the wool client waits between two tasks."""
CLIENT_TASK_SECONDS: Final = 0.5
"""How long each of the client's tasks runs on a worker."""
STOP_GRACE: Final = "5s"
"""The autoscaler's ``--grace``: how long a retired worker drains."""


class Demo:
    """One run of the demo; ``run`` returns its exit status."""

    def __init__(self, settings: DemoSettings) -> None:
        self.settings = settings
        self.namespace = f"demo-{uuid.uuid4().hex[:8]}"
        self.log_dir = Path(tempfile.mkdtemp(prefix="wool-idle-demo-"))
        self.processes = Processes(self.namespace, self.log_dir)
        self.board = Board(decision_ttl=2 * settings.interval)
        self.interactive = sys.stdout.isatty()
        self.banner = ""
        self.problem = ""
        self.shown: object = None

    async def run(self) -> int:
        """Run until the duration is over or a signal (SIGINT, SIGTERM, or SIGHUP: its
        terminal closed; the children, in sessions of their own, get none of these and
        are stopped either way); 0 if every process started, the client lost no task
        and no process is left, else 1."""
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(signum, done.set)
        failure = ""
        try:
            exporter_url, decisions_url = await self._start()
            async with aiohttp.ClientSession() as session:
                source = ExporterSource(
                    session, exporter_url, (), READ_TIMEOUT, group_by=(TAGS_LABEL,)
                )
                await self._watch(source, session, decisions_url, done)
        except (TimeoutError, RuntimeError) as error:  # a child did not get ready
            failure = str(error)
            print(f"a process of the demo did not start: {failure}", file=sys.stderr)
        finally:
            left = await self.processes.stop()
        return self._summary(left, failed=bool(failure))

    async def _start(self) -> tuple[str, str]:
        """The wool fleet, the exporter following it, the autoscaler; their URLs."""
        settings, local = self.settings, f"local:{self.namespace}"
        await self.processes.start_wool(settings.hot, settings.cold)
        exporter = ["exporter", "--wool-discovery", local]
        exporter_url = await self.processes.start(
            "exporter", [*exporter, "--web.listen-address", "127.0.0.1:0"]
        )
        autoscaler = ["autoscaler", "--metrics-url", exporter_url, "--wool-discovery", local]
        autoscaler += ["--group-by", TAGS_LABEL, "--min-workers", "1", "--grace", STOP_GRACE]
        autoscaler += ["--max-idle", str(settings.max_idle), "--interval", str(settings.interval)]
        autoscaler_url = await self.processes.start(
            "autoscaler", [*autoscaler, "--web.listen-address", "127.0.0.1:0"]
        )
        decisions_url = autoscaler_url.replace("/metrics", "/decisions")
        self.banner = (
            f"wool pools: namespace {self.namespace} (LocalDiscovery),"
            f" {settings.hot} {HOT} + {settings.cold} {COLD} workers\n"
            f"exporter:   {exporter_url}  (--wool-discovery {local})\n"
            f"autoscaler: {autoscaler_url}  (and /decisions)\n"
            f"            --group-by {TAGS_LABEL} --min-workers 1"
            f" --max-idle {settings.max_idle:g}s --wool-discovery {local}\n"
            f"logs:       {self.log_dir}\n"
        )
        print(self.banner, flush=True)
        return exporter_url, decisions_url

    async def _watch(
        self,
        source: ExporterSource,
        session: aiohttp.ClientSession,
        decisions_url: str,
        done: asyncio.Event,
    ) -> None:
        settings, started = self.settings, time.monotonic()
        while not done.is_set():
            elapsed = time.monotonic() - started
            if settings.duration and elapsed >= settings.duration:
                break
            if self.processes.client is None and elapsed >= settings.client_after:
                await self.processes.start_client(
                    HOT, interval=CLIENT_INTERVAL, task_seconds=CLIENT_TASK_SECONDS
                )
            await self._read(source, session, decisions_url)
            self._draw(elapsed)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), settings.refresh)
        await self._read(source, session, decisions_url)
        self._draw(time.monotonic() - started, final=True)

    async def _read(
        self, source: ExporterSource, session: aiohttp.ClientSession, decisions_url: str
    ) -> None:
        """Refresh the board from the exporter and the autoscaler's decisions."""
        try:
            self.board.read_exporter(await source.read())
            self.board.read_decisions(await fetch(session, decisions_url, {}, READ_TIMEOUT))
            self.problem = ""
        except SourceError as error:
            self.problem = f"(waiting for the exporter and the autoscaler: {error})"

    def _draw(self, elapsed: float, *, final: bool = False) -> None:
        """The table: redrawn in place on a terminal; otherwise printed when a
        worker's state or decision changed, and at the end."""
        rows = self.board.rows()
        settings = self.settings
        heading = (
            f"t={elapsed:5.1f}s  retire after {settings.max_idle:g}s idle, keep 1 per tag"
            f"  {self.problem}"
        ).rstrip()
        text = render(rows, heading, self._client_line())
        if self.interactive:
            hint = "stopping…" if final else "Ctrl-C to stop."
            sys.stdout.write(f"\x1b[H\x1b[J{self.banner}\n{text}\n\n{hint}\n")
        else:
            changes = [(r.worker, r.state, r.decision) for r in rows]
            if changes == self.shown and not final:
                return
            self.shown = changes
            sys.stdout.write(text + "\n\n")
        sys.stdout.flush()

    def _client_line(self) -> str:
        counts = self.processes.client
        if counts is None:
            return f"wool client on {HOT}: starts at t={self.settings.client_after:g}s"
        return (
            f"wool client on {HOT}: submitted={counts.submitted} completed={counts.completed}"
            f" failed={counts.failed}"
        )

    def _summary(self, left: list[str], *, failed: bool) -> int:
        """Print who was retired, what is left, the client's counts and the leftovers."""
        board, counts = self.board, self.processes.client
        retired = [f"{worker} {board.tags.get(worker, '-')}" for worker in board.retired]
        kept = [f"{tags} {len(ws)} ({', '.join(ws)})" for tags, ws in board.left().items()]
        print(f"retired idle workers: {len(retired)} ({', '.join(retired) or 'none'})")
        print(f"workers left: {'; '.join(kept) or 'none'}")
        print(self._client_line() if counts else f"wool client on {HOT}: did not start")
        if left:
            print(f"child processes left: {', '.join(left)} (killed)")
        else:
            count = len(self.processes.children)
            print(f"child processes left: none (all {count} and their workers exited)")
        print(f"logs: {self.log_dir}")
        lost = counts is not None and (counts.failed or counts.submitted != counts.completed)
        return 1 if lost or left or failed else 0
