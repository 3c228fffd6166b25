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

from aiohttp import web


class UnreadAnswers:
    """A response-prepare hook: a connection still writing its latest answer, or
    holding unsent bytes, ``wait`` seconds after that answer began is aborted (its
    unsent bytes dropped).
    One timer per connection, and only while it has an answer under way or bytes
    unsent. An answer's body is let go once its task has handed it over."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self._timers: dict[asyncio.Transport, asyncio.TimerHandle] = {}

    async def __call__(self, request: web.Request, response: web.StreamResponse) -> None:
        """Start the wait of the answer ``response`` to ``request``, on that request's task."""
        transport = request.transport
        task = asyncio.current_task()
        if transport is None or task is None:
            return
        self._forget(transport)
        loop = asyncio.get_running_loop()
        self._timers[transport] = loop.call_later(self.wait, self._expire, transport, task)
        task.add_done_callback(lambda _: self._sent(transport, response))

    def _sent(self, transport: asyncio.Transport, response: web.StreamResponse) -> None:
        """The answer's task ended: its body is let go (aiohttp keeps the last answer
        of a connection until the next request, up to the request wait: 1 MB and
        more each at 10,000 targets), and nothing more is waited for unless bytes
        are still unsent."""
        if isinstance(response, web.Response):
            response.body = None
        if not _unsent(transport):
            self._forget(transport)

    def _expire(self, transport: asyncio.Transport, task: asyncio.Task[object]) -> None:
        """Abort if the answer is still being written (over TLS the bytes wait below
        the transport, which shows none unsent) or bytes are still unsent."""
        del self._timers[transport]
        if not task.done() or _unsent(transport):
            transport.abort()

    def _forget(self, transport: asyncio.Transport) -> None:
        timer = self._timers.pop(transport, None)
        if timer is not None:
            timer.cancel()


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
