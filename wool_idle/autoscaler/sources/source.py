"""What a source is, how it fails, and the one HTTP GET both sources make."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

from wool_idle.autoscaler.policy import Reading


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
) -> Any:
    """GET ``url``; the JSON body (or text), or ``SourceError`` for any failure.

    A body that does not decode, or is nested too deeply for the JSON decoder, is a
    failure like any other.
    """
    try:
        async with session.get(
            url, params=params, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            if response.status != 200:
                raise SourceError(f"GET {url}: HTTP {response.status}")
            if json_body:
                return await response.json(content_type=None)
            return await response.text()
    except (aiohttp.ClientError, TimeoutError, ValueError, RecursionError) as error:
        raise SourceError(f"GET {url}: {type(error).__name__}: {error}") from None
