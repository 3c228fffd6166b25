"""URLs fit to print: a URL's userinfo (``user:password@``) never reaches a log."""

from __future__ import annotations

import re
import urllib.parse
from typing import Final

REDACTED: Final = "xxxxx"
_USERINFO: Final = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


def redact(url: str) -> str:
    """``url`` with its userinfo (if any) replaced by ``REDACTED``; any text is
    accepted (a malformed URL included), nothing raises."""
    return _USERINFO.sub(rf"\g<scheme>{REDACTED}@", url)


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
