"""``wool-idle demo``: real workers, some kept busy, the exporter and the
autoscaler on the embedded default (the autoscaler reads the exporter), and a
live table of who is busy, who is idle and who was retired."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
import urllib.request

from wool_idle import logs
from wool_idle.cli.parser import Parser, help_from_docstring
from wool_idle.cli.values import DURATION, POSITIVE_DURATION, whole_number
from wool_idle.demo import table
from wool_idle.demo.tasks import crunch
from wool_idle.exceptions import WoolError
from wool_idle.worker import LocalWorker, WorkerConnection

CHILD_EXIT_TIMEOUT = 15.0


def register(root: Parser) -> None:
    """Add ``demo`` to the top-level parser."""
    parser = root.add_subcommand(
        "demo", help="watch idle workers being retired", description=help_from_docstring(__doc__)
    )
    demo = parser.section("demo")
    demo.add("--workers", whole_number(2), "workers to start", default=5)
    demo.add("--busy", whole_number(1), "workers kept busy with a stream of tasks", default=2)
    demo.add("--max-idle", POSITIVE_DURATION, "retire workers idle this long", default=10.0)
    demo.add("--duration", DURATION, "how long the demo runs (0: until Ctrl-C)", default=45.0)
    demo.add("--refresh", POSITIVE_DURATION, "how often the table is redrawn", default=1.0)
    parser.set_defaults(func=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    """Run the demo; every child process is gone when it returns."""
    if args.busy >= args.workers:
        args.parser.error("argument --busy: must be less than --workers")
    logs.configure(logs.LogSettings(log_level="warning"))
    return asyncio.run(Demo(args).run())


async def _spawn(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    """Start ``wool-idle ARGS`` and return it with the URL it prints when ready."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wool_idle",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        stdin=asyncio.subprocess.DEVNULL,
        start_new_session=True,  # the demo stops it in order; Ctrl-C is not its business
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    if not line:
        raise RuntimeError(f"wool-idle {args[0]} exited before it was ready")
    return process, line.decode().strip()


class Demo:
    """The demo's processes and its table loop."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workers: list[LocalWorker] = []
        self.roles: dict[str, str] = {}
        self.children: list[asyncio.subprocess.Process] = []
        self.tasks_done = 0
        self.decisions: dict[str, str] = {}
        self.decisions_url = ""
        self.banner = ""
        self.interactive = sys.stdout.isatty()

    async def run(self) -> int:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, done.set)
        feeders: list[asyncio.Task[None]] = []
        try:
            exporter_url, autoscaler_url = await self._start()
            feeders = [
                asyncio.ensure_future(self._feed(address))
                for address, role in self.roles.items()
                if role == "busy"
            ]
            self.decisions_url = autoscaler_url.replace("/metrics", "/decisions")
            self.banner = (
                f"exporter metrics:   {exporter_url}\n"
                f"autoscaler metrics: {autoscaler_url}  (decisions: {self.decisions_url})\n"
            )
            print(self.banner, flush=True)
            await self._watch(exporter_url, done)
        finally:
            for feeder in feeders:
                feeder.cancel()
            await asyncio.gather(*feeders, return_exceptions=True)
            with contextlib.suppress(OSError, ValueError):
                await asyncio.to_thread(self._read_decisions)
            await self._stop_all()
        return self._summary()

    async def _start(self) -> tuple[str, str]:
        self.workers = [LocalWorker() for _ in range(self.args.workers)]
        addresses = await asyncio.gather(*(w.start() for w in self.workers))
        for index, address in enumerate(addresses):
            self.roles[address] = "busy" if index < self.args.busy else "idle"
        targets = [flag for address in addresses for flag in ("--target", address)]
        exporter, exporter_url = await _spawn(
            "exporter", "--web.listen-address", "127.0.0.1:0", *targets
        )
        self.children.append(exporter)
        interval = max(0.5, min(2.0, self.args.max_idle / 5))
        autoscaler, autoscaler_url = await _spawn(
            "autoscaler",
            "--metrics-url",
            exporter_url,
            "--max-idle",
            str(self.args.max_idle),
            "--interval",
            str(interval),
            "--min-workers",
            "1",
            "--grace",
            "5s",
            "--web.listen-address",
            "127.0.0.1:0",
        )
        self.children.append(autoscaler)
        return exporter_url, autoscaler_url

    async def _feed(self, address: str) -> None:
        """Keep ``address`` busy: one short task after another."""
        async with WorkerConnection(address) as connection:
            while True:
                try:
                    await connection.dispatch(crunch, 0.5)
                    self.tasks_done += 1
                except WoolError:
                    await asyncio.sleep(0.5)

    async def _watch(self, exporter_url: str, done: asyncio.Event) -> None:
        started = time.monotonic()
        while not done.is_set():
            elapsed = time.monotonic() - started
            if self.args.duration and elapsed >= self.args.duration:
                break
            text = await asyncio.to_thread(self._snapshot, exporter_url, elapsed)
            if self.interactive:
                sys.stdout.write(f"\x1b[H\x1b[J{self.banner}\n{text}\n\nCtrl-C to stop.\n")
            else:
                sys.stdout.write(text + "\n\n")
            sys.stdout.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self.args.refresh)

    def _read_decisions(self) -> None:
        """Refresh the autoscaler's last decision per worker from ``/decisions``."""
        with urllib.request.urlopen(self.decisions_url, timeout=5) as response:
            self.decisions = table.last_decisions(json.loads(response.read()))

    def _snapshot(self, exporter_url: str, elapsed: float) -> str:
        try:
            with urllib.request.urlopen(exporter_url, timeout=5) as response:
                idle, _ = table.idle_by_worker(response.read().decode())
            self._read_decisions()
        except (OSError, ValueError) as error:
            return f"(waiting for the exporter and autoscaler: {error})"
        exited = {
            w.address: w.process is not None and w.process.returncode is not None
            for w in self.workers
        }
        rows = table.rows(self.roles, exited, idle, self.decisions)
        return table.render(rows, elapsed, self.args.max_idle)

    async def _stop_all(self) -> None:
        for child in self.children:
            if child.returncode is None:
                child.terminate()
        for child in self.children:
            try:
                await asyncio.wait_for(child.wait(), CHILD_EXIT_TIMEOUT)
            except TimeoutError:
                child.kill()
                await child.wait()
        for worker in self.workers:
            if worker.process is not None and worker.process.returncode is None:
                with contextlib.suppress(WoolError):
                    await worker.stop(grace=2.0)
                await worker.kill()

    def _summary(self) -> int:
        """Print who the autoscaler retired (from its own decision log)."""
        retired = [w for w, decision in self.decisions.items() if decision == "stopped"]
        busy = [a for a, role in self.roles.items() if role == "busy"]
        retired_busy = [a for a in busy if a in retired]
        retired_idle = [a for a in retired if a not in busy]
        print(f"retired idle workers: {len(retired_idle)} ({', '.join(retired_idle) or 'none'})")
        print(f"busy workers retired: {len(retired_busy)}; tasks completed: {self.tasks_done}")
        print("all child processes stopped")
        return 0
