"""Reading a source's answer body whole, or failing.

The sources ask for gzip (``Accept-Encoding: gzip``, as Prometheus's scrapes do)
and decode it here, not in aiohttp: aiohttp ends a gzip stream cut short (a
server or a proxy between that stopped compressing midway, its HTTP framing
whole) without a word, and the text up to the cut drops series and digits. A
gzip body must end its last member (several follow one another, as RFC 1952
allows); one that does not, that does not decode, or that comes in an encoding
not asked for, is a ``BodyError``. The body is read up to ``max_bytes`` after
decoding: one over it is a ``BodyError``, so an endless answer or a small gzip
bomb costs at most that much memory; gzip is decoded on a thread, off the
event loop.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Final

import aiohttp

ACCEPT_ENCODING: Final = "gzip"
"""What the sources ask for: gzip or nothing (identity)."""
GZIP: Final = {"gzip", "x-gzip"}
IDENTITY: Final = {"", "identity"}
GZIP_WINDOW: Final = 16 + zlib.MAX_WBITS
"""``wbits`` of a gzip member (header and trailer checked)."""


class BodyError(Exception):
    """The body is over the limit, does not decode, or was cut short."""


class _Gunzip:
    """Decodes gzip members one after another, at most ``limit`` bytes in all."""

    def __init__(self, limit: int) -> None:
        self._decoder = zlib.decompressobj(GZIP_WINDOW)
        self._limit, self.size, self._fed = limit, 0, False

    def feed(self, data: bytes) -> bytes:
        """The bytes ``data`` decodes to; ``OverflowError`` past the limit, ``zlib.error``
        for what is not gzip."""
        self._fed = self._fed or bool(data)
        out = []
        while data:
            chunk = self._decoder.decompress(data, self._limit - self.size + 1)
            self.size += len(chunk)
            if self.size > self._limit:
                raise OverflowError
            out.append(chunk)
            if self._decoder.eof:
                data = self._decoder.unused_data
                if data:
                    self._decoder = zlib.decompressobj(GZIP_WINDOW)
            else:
                data = self._decoder.unconsumed_tail
        return b"".join(out)

    @property
    def complete(self) -> bool:
        """Whether the last member ended (or nothing came)."""
        return self._decoder.eof or not self._fed


async def read_body(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body of ``response`` (asked with ``auto_decompress=False``), decoded and read
    up to ``max_bytes``; ``BodyError`` beyond, or when it does not decode whole."""
    over = BodyError(f"body over {max_bytes} bytes (--source-max-bytes)")
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in GZIP | IDENTITY:
        raise BodyError(f"Content-Encoding {encoding!r} (asked for {ACCEPT_ENCODING})")
    gunzip = _Gunzip(max_bytes) if encoding in GZIP else None
    if gunzip is None and (response.content_length or 0) > max_bytes:
        raise over
    chunks, size = [], 0
    try:
        async for chunk in response.content.iter_any():
            data = chunk if gunzip is None else await asyncio.to_thread(gunzip.feed, chunk)
            size += len(data)
            if size > max_bytes:
                raise over
            chunks.append(data)
    except OverflowError:
        raise over from None
    except zlib.error as error:
        raise BodyError(f"a gzip body that does not decode: {error}") from None
    if gunzip is not None and not gunzip.complete:
        raise BodyError("a gzip body cut short (its last member never ends)")
    return b"".join(chunks)
