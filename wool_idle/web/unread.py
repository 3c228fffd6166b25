"""Closing the connections of clients that do not take their answers.

aiohttp waits for ever for a client to read what it was sent: a handler whose
answer does not fit the socket's buffers waits in its write, and a connection
closed with bytes unsent waits for them, so a client that sends a request and
never reads holds its descriptor, and the answer's memory, for good (the wait
for a whole request, ``site.REQUEST_WAIT``, never applies: one came). Enough
of them took every descriptor (``/-/healthy`` went unanswered) or all memory.
And aiohttp keeps a connection's last answer until its next request: clients
that read their answers and stay connected held one body each.
"""

from __future__ import annotations

import asyncio
import fcntl
import sys
import termios
from typing import Final, NamedTuple

from aiohttp import web

SWEEP_PERIOD: Final = 1.0
"""Seconds between two looks at the answers under way (at most a quarter of the
wait): how late past the wait an answer is aborted, and how long a sent body is
kept."""


class _Answer(NamedTuple):
    began: float
    task: asyncio.Task[object]
    response: web.StreamResponse


class UnreadAnswers:
    """A response-prepare hook: a connection still writing its latest answer, or
    holding unsent bytes, ``wait`` seconds after that answer began is aborted (its
    unsent bytes dropped); once the answer's task has handed it over, its body is
    let go.

    A request only notes its answer (one entry per connection, replaced by the
    next answer); one timer per hook looks at the entries every ``SWEEP_PERIOD``
    while there are any, and forgets those that are done with or closed.
    ``close`` stops it."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.period = min(SWEEP_PERIOD, wait / 4)
        self._latest: dict[asyncio.Transport, _Answer] = {}
        self._sweep: asyncio.TimerHandle | None = None

    async def __call__(self, request: web.Request, response: web.StreamResponse) -> None:
        """Note ``response``, the answer to ``request`` being written on its task."""
        transport = request.transport
        task = asyncio.current_task()
        if transport is None or task is None:
            return
        loop = asyncio.get_running_loop()
        self._latest[transport] = _Answer(loop.time(), task, response)
        if self._sweep is None:
            self._sweep = loop.call_later(self.period, self._look, loop)

    def __len__(self) -> int:
        """The answers under watch."""
        return len(self._latest)

    def close(self) -> None:
        """Stop looking (the server closed its connections)."""
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self._latest.clear()

    def _look(self, loop: asyncio.AbstractEventLoop) -> None:
        """Abort each connection still writing its answer (over TLS the bytes wait
        below the transport, which shows none unsent) or holding unsent bytes past
        the wait; let go of the bodies sent; forget what is closed or done with."""
        now = loop.time()
        for transport, answer in list(self._latest.items()):
            done = answer.task.done()
            if done and isinstance(answer.response, web.Response):
                answer.response.body = None
            if transport.is_closing() or (done and not _unsent(transport)):
                del self._latest[transport]
            elif now - answer.began >= self.wait:
                del self._latest[transport]
                transport.abort()
        self._sweep = loop.call_later(self.period, self._look, loop) if self._latest else None


def _unsent(transport: asyncio.Transport) -> bool:
    """Whether ``transport`` holds bytes its peer has not taken (a closed one: none):
    in its buffer, or in the socket's send queue (under a TLS layer, whose own
    buffer hands its bytes down at once, the transport's are only there)."""
    try:
        if transport.get_write_buffer_size() > 0:
            return True
        sock = transport.get_extra_info("socket")
        queued = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, bytes(4))
    except (AttributeError, OSError, ValueError):  # closed (a TLS one drops its layer)
        return False
    return int.from_bytes(queued, sys.byteorder) > 0
