"""URLs fit to print: a URL's userinfo (``user:password@``) never reaches a log."""

from __future__ import annotations

import urllib.parse
from typing import Final

REDACTED: Final = "xxxxx"


def redact(url: str) -> str:
    """``url`` with its userinfo (if any) replaced by ``REDACTED``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{REDACTED}@{host}"))


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its userinfo, and that userinfo as (user, password),
    percent-decoded (None when the URL has none)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    clean = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return clean, (urllib.parse.unquote(user), urllib.parse.unquote(password))
