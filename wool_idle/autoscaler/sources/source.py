"""What a source is, how it fails, and the one HTTP GET both sources make.

Text is UTF-8, as Prometheus reads it: a ``charset`` in the answer's
Content-Type is not heeded (some codecs, punycode, decode in quadratic time).
A body is read up to ``max_bytes`` (after any decompression): one over it is a
``SourceError``, so an endless or huge answer costs at most that much memory
and stops no one. Bodies are decoded (JSON) on a thread, off the event loop,
and the sources parse them on a thread too (as the planner plans): a large
answer never holds up ``/-/healthy`` or the daemon's other work.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, Final, Protocol

import aiohttp

from wool_idle.autoscaler.policy import Reading

DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
"""64 MiB: the largest body a source reads (``--source-max-bytes``). A fleet of
10,000 workers answers about 3 MB (exposition) or 5 MB (Prometheus API)."""


class SourceError(Exception):
    """The source could not be read or answered something malformed."""


class Source(Protocol):
    """Anything that yields this cycle's readings."""

    description: str

    async def read(self) -> list[Reading]:
        """One reading per worker; ``SourceError`` (and nothing else) if unusable."""
        ...


async def fetch(
    session: aiohttp.ClientSession,
    url: str,
    params: Mapping[str, str],
    timeout: float,
    *,
    json_body: bool = True,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Any:
    """GET ``url``; the JSON body (or text), or ``SourceError`` for any failure.

    A body over ``max_bytes``, one that does not decode, or JSON nested too deeply
    for the decoder, is a failure like any other.
    """
    try:
        async with session.get(
            url, params=params, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            if response.status != 200:
                raise SourceError(f"GET {url}: HTTP {response.status}")
            body = await _body(response, url, max_bytes)
            if json_body:
                return await asyncio.to_thread(json.loads, body)
            return body.decode()  # the text format is UTF-8, whatever the charset says
    except (aiohttp.ClientError, TimeoutError, ValueError, RecursionError) as error:
        raise SourceError(f"GET {url}: {type(error).__name__}: {error}") from None


async def _body(response: aiohttp.ClientResponse, url: str, max_bytes: int) -> bytes:
    """The body of ``response``, read up to ``max_bytes``; ``SourceError`` beyond."""
    over = SourceError(f"GET {url}: body over {max_bytes} bytes (--source-max-bytes)")
    if response.content_length is not None and response.content_length > max_bytes:
        raise over
    chunks, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > max_bytes:
            raise over
        chunks.append(chunk)
    return b"".join(chunks)
