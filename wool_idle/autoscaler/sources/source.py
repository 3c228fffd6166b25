"""What a source is, how it fails, and the one HTTP GET both sources make.

Text is UTF-8, as Prometheus reads it: a ``charset`` in the answer's
Content-Type is not heeded (some codecs, punycode, decode in quadratic time).
A body is read up to ``max_bytes`` after decoding, and a gzip body must decode
whole (see ``body``): anything else is a ``SourceError``, so an endless, huge
or cut answer stops no one. An answer must say where it ends (``Content-Length``
or chunked encoding): one ended by the connection's close (or reset: aiohttp
reads both as its end) cannot be told from one cut short, which drops series (a
worker's conflicting one, that kept it from being stopped) or digits, so it is
a ``SourceError``; Prometheus, its Pushgateway and the exporter always say.
A text answer's own age (``answer_age``) comes from its ``Age`` and ``Date``
headers: a cache between serves old text as if it were new. Bodies are decoded
(JSON) on a thread, off the event loop, and the sources parse them on a thread
too (as the planner plans): a large answer never holds up ``/-/healthy`` or the
daemon's other work.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Final, Protocol

import aiohttp
from multidict import CIMultiDictProxy

from wool_idle.autoscaler.policy import Reading
from wool_idle.autoscaler.sources.body import ACCEPT_ENCODING, BodyError, read_body
from wool_idle.logs import bounded

DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
"""64 MiB: the largest body a source reads (``--source-max-bytes``). A fleet of
10,000 workers answers about 3 MB (exposition) or 5 MB (Prometheus API)."""


CLOCK_TOLERANCE: Final = 5.0
"""Seconds an answer's time (Prometheus's evaluation time, an HTTP ``Date``) may lie
outside the read, by this host's clock, before it counts."""


class SourceError(Exception):
    """The source could not be read or answered something malformed. The message is
    ``bounded``: it may quote the answer (a redirect's ``Location`` of 8 KiB, each byte
    that is not UTF-8 escaped as six characters in the text log)."""

    def __init__(self, message: str) -> None:
        super().__init__(bounded(message))


class WrongPage(SourceError):
    """The URL answers, but not with what the source reads (a 404, an HTML page): most
    likely the flag names another page than the one meant."""


class Source(Protocol):
    """Anything that yields this cycle's readings."""

    description: str
    empty_hint: str
    """What a read listing no worker most likely means, asked in the warning."""

    async def read(self) -> list[Reading]:
        """One reading per worker; ``SourceError`` (and nothing else) if unusable."""
        ...


async def fetch(
    session: aiohttp.ClientSession,
    url: str,
    params: Mapping[str, str],
    timeout: float,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Any:
    """GET ``url``; its JSON body, or ``SourceError`` for any failure (text is
    ``fetch_text``'s).

    A body over ``max_bytes``, one that does not decode, or JSON nested too deeply
    for the decoder, is a failure like any other.
    """
    body, _ = await _get(session, url, params, timeout, max_bytes)
    try:
        return await asyncio.to_thread(json.loads, body)
    except (ValueError, RecursionError) as error:
        raise SourceError(f"GET {url}: {type(error).__name__}: {error}") from None


async def fetch_text(
    session: aiohttp.ClientSession, url: str, timeout: float, *, max_bytes: int
) -> tuple[str, float]:
    """GET ``url``; its text and its ``answer_age``, or ``SourceError`` for any failure
    (``WrongPage`` for an HTML page: a landing page or a UI, never metrics)."""
    body, headers = await _get(session, url, {}, timeout, max_bytes)
    if headers.get("Content-Type", "").lower().startswith("text/html"):
        raise WrongPage(f"GET {url}: an HTML page, not metrics")
    try:
        text = body.decode()  # the text format is UTF-8, whatever the charset says
    except ValueError as error:
        raise SourceError(f"GET {url}: {type(error).__name__}: {error}") from None
    return text, answer_age(headers.getall("Age", []), headers.get("Date"))


async def _get(
    session: aiohttp.ClientSession,
    url: str,
    params: Mapping[str, str],
    timeout: float,
    max_bytes: int,
) -> tuple[bytes, CIMultiDictProxy[str]]:
    """GET ``url``; the body and headers of a 200 answer, or ``SourceError``
    (``WrongPage`` for a 404)."""
    try:
        async with session.get(
            url,
            params=params,
            timeout=aiohttp.ClientTimeout(total=timeout),
            headers={"Accept-Encoding": ACCEPT_ENCODING},
            auto_decompress=False,
        ) as response:
            if response.status == 404:
                raise WrongPage(f"GET {url}: HTTP 404")
            if response.status in (401, 403):
                raise SourceError(f"GET {url}: HTTP {response.status} ({REFUSED})")
            if response.status != 200:
                raise SourceError(f"GET {url}: HTTP {response.status}")
            if not _delimited(response):
                raise SourceError(f"GET {url}: {UNDELIMITED}")
            return await read_body(response, max_bytes), response.headers
    except BodyError as error:
        raise SourceError(f"GET {url}: {error}") from None
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        raise SourceError(f"GET {url}: {type(error).__name__}: {error}") from None


REFUSED: Final = "the credentials of --http.config.file, or none, were refused"
"""Why a source answers 401 or 403: its web config asks for basic auth or a client
certificate the autoscaler's HTTP client config does not give (or gives wrong)."""
UNDELIMITED: Final = (
    "an answer with neither Content-Length nor chunked encoding: its end cannot be "
    "told from a connection cut short"
)


def _delimited(response: aiohttp.ClientResponse) -> bool:
    """Whether ``response`` says where its body ends (a length, or chunks: ``chunked``
    as the last transfer coding, RFC 9112; after it, the close ends the body)."""
    codings = ",".join(response.headers.getall("Transfer-Encoding", [])).split(",")
    return response.content_length is not None or codings[-1].strip().lower() == "chunked"


def answer_age(ages: list[str], date: str | None, now: float | None = None) -> float:
    """How old an answer is, in seconds, by its headers (``now``: this host's Unix time).

    A cache (RFC 9111) says in ``Age`` how long it has held an answer, and keeps its
    origin's ``Date``; a cache that says neither (or a proxy handing on old text) cannot
    be told from a fresh answer. The age is the largest ``Age``, or, when more, ``now``
    less ``Date`` if that is more than ``CLOCK_TOLERANCE`` (clocks a little apart are
    not an age); 0 without either. An ``Age`` that is not a number of seconds makes the
    age unknown: ``math.inf``; so does a ``Date`` ahead of ``now`` by more than
    ``CLOCK_TOLERANCE`` (this host's clock set back, or clocks apart: an answer held
    for up to that long reads as new). A ``Date`` that does not parse is no age.
    """
    digits = [age.strip() for age in ages]
    if not all(age.isascii() and age.isdigit() for age in digits):
        return math.inf
    held = max((float(age) for age in digits), default=0.0)
    sent = _unix_time(date) if date else None
    behind = 0.0 if sent is None else (time.time() if now is None else now) - sent
    if behind < -CLOCK_TOLERANCE:
        return math.inf
    return max(held, behind if behind > CLOCK_TOLERANCE else 0.0)


def _unix_time(date: str) -> float | None:
    """The Unix time of an HTTP ``Date`` (GMT), or None (no age) if unreadable."""
    try:
        sent = parsedate_to_datetime(date)
        return sent.replace(tzinfo=sent.tzinfo or UTC).timestamp()
    except (TypeError, ValueError, OverflowError):
        return None
