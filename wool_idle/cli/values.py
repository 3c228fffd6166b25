"""What a flag's text may be. Each value type turns one text into a value or
raises ``ValueError`` saying why; the command line and the environment call
the very same function, so one text is accepted or refused alike from both.

- Durations (``durations``): seconds (``1.5``) or Prometheus-style (``30s``,
  ``5m``, ``1h30m``, ``500ms``; units from the largest down, each once), at
  most ``MAX_DURATION``.
- Booleans (environment only; on the command line a switch takes no value):
  one of ``TRUE_WORDS`` or ``FALSE_WORDS``, any case, surrounding blanks
  ignored. Anything else, the empty text included, is refused.
- Lists: comma-separated items, blanks around each ignored; an empty item is
  refused (so ``" , "`` never means "no restriction").
"""

from __future__ import annotations

import ipaddress
import ssl
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from wool_idle.cli.durations import format_duration, parse_duration, parse_grace, positive_duration
from wool_idle.contract import LABEL_NAME
from wool_idle.discovery.spec import DiscoverySpec
from wool_idle.files import CONFIG_FILE_LIMIT, in_memory_file, read_regular_file
from wool_idle.web.urls import REDACTED, redact
from wool_idle.worker.address import CONTROL_CHARACTER, parse_address

T = TypeVar("T")

TRUE_WORDS: Final = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS: Final = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class Value(Generic[T]):
    """A value type: its ``--help`` placeholder, its parser, and how a default shows."""

    metavar: str
    parse: Callable[[str], T]
    show: Callable[[Any], str] = str


def parse_bool(text: str) -> bool:
    """``True`` for a word of ``TRUE_WORDS``, ``False`` for one of ``FALSE_WORDS``."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(
        f"invalid boolean {text!r} (true: {', '.join(sorted(TRUE_WORDS))}; "
        f"false: {', '.join(sorted(FALSE_WORDS))})"
    )


def parse_list(text: str, item: Callable[[str], T]) -> list[T]:
    """The comma-separated items of ``text``, each stripped and parsed by ``item``."""
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise ValueError(f"invalid list {text!r}: empty item")
    return [item(part) for part in parts]


def _whole_number(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        stripped = text.strip()
        if not (stripped.isascii() and stripped.isdigit()):
            raise ValueError(f"invalid number {text!r}: expected a whole number >= {minimum}")
        if int(stripped) < minimum:
            raise ValueError(f"invalid number {text!r}: must be >= {minimum}")
        return int(stripped)

    return parse


def _text(text: str) -> str:
    _path(text)
    try:  # an undecodable byte of argv or the environment stands for no character
        text.encode()
    except UnicodeEncodeError:
        raise ValueError(f"invalid text {text!r}: not valid UTF-8") from None
    return text


def _path(text: str) -> str:
    """Any text but an empty one or one with a control character (a path may hold
    bytes that are not UTF-8: they reach the file system as they came)."""
    if not text.strip():
        raise ValueError("must not be empty")
    if CONTROL_CHARACTER.search(text):
        raise ValueError(f"invalid text {text!r}: control character")
    return text


def _url(text: str) -> str:
    if CONTROL_CHARACTER.search(text):
        raise ValueError(f"invalid URL {redact(text)!r}: control character")
    _text(text)
    parts = urllib.parse.urlsplit(text)
    if "@" in parts.path + parts.query + parts.fragment:  # userinfo cut short by / ? #
        scheme, _, rest = text.partition("://")
        hidden = f"{scheme}://{REDACTED}@{rest.rpartition('@')[2]}"
        raise ValueError(
            f"invalid URL {hidden!r}: '@' after the host (percent-encode a '/', '?' or '#' "
            "of the user or password: %2F, %3F, %23)"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in text:
        raise ValueError(f"invalid URL {redact(text)!r}: expected http(s)://host[:port]/path")
    try:
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        raise ValueError(f"invalid URL {redact(text)!r}: bad port") from None
    return _zone_unquoted(text, parts.netloc)


def _zone_unquoted(text: str, netloc: str) -> str:
    """``text`` with an IPv6 zone written as RFC 6874 does (``[fe80::1%25eth0]``, as
    curl, Go and the daemons' ready lines write it) as aiohttp dials it
    (``[fe80::1%eth0]``): it looks up the host undecoded, and finds no ``%25eth0``."""
    host = netloc.rpartition("@")[2]
    if not host.startswith("[") or "%25" not in host:
        return text
    start = text.index("//") + 2 + len(netloc) - len(host)
    return text[:start] + host.replace("%25", "%", 1) + text[start + len(host) :]


def _readable_file(text: str) -> str:
    """A regular file readable now, no larger than ``CONFIG_FILE_LIMIT`` (so that a
    FIFO or ``/dev/zero`` is refused here rather than hanging the reader)."""
    _read(text)
    return text


def _read(text: str) -> bytes:
    """The bytes of ``_readable_file`` ``text``."""
    _path(text)
    try:
        return read_regular_file(text, limit=CONFIG_FILE_LIMIT)
    except OSError as error:
        raise ValueError(f"cannot read {text!r}: {error.strerror}") from None


def _certificates(text: str) -> str:
    """A readable file holding at least one PEM certificate OpenSSL can parse (OpenSSL
    loads an in-memory copy of the bytes read, never a path swapped since)."""
    content = _read(text)
    try:
        with in_memory_file(content) as copy:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=copy)
    except ssl.SSLError as error:
        why = error.reason or "not PEM"
        raise ValueError(f"{text!r} holds no valid PEM certificate ({why})") from None
    except OSError as error:
        raise ValueError(f"cannot check {text!r}: {error}") from None
    return text


def _ip_address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise ValueError(f"invalid IP address {text!r} (e.g. 127.0.0.1 or ::1)") from None


def _label_name(text: str) -> str:
    if not LABEL_NAME.match(text) or text.startswith("__"):
        raise ValueError(f"invalid label name {text!r}")
    return text


def choice(*words: str) -> Value[str]:
    """One of ``words`` (any case; the value is the word as listed)."""

    def parse(text: str) -> str:
        word = text.strip().lower()
        if word not in words:
            raise ValueError(f"invalid choice {text!r} (choose from {', '.join(words)})")
        return word

    return Value("{" + ",".join(words) + "}", parse)


def whole_number(minimum: int) -> Value[int]:
    """A whole number >= ``minimum`` (ASCII digits only)."""
    return Value("N", _whole_number(minimum))


DURATION: Final = Value("DURATION", parse_duration, format_duration)
"""A duration >= 0."""
POSITIVE_DURATION: Final = Value("DURATION", positive_duration, format_duration)
"""A duration > 0."""
GRACE: Final = Value("DURATION", parse_grace, format_duration)
"""0, a duration of at least 1ms, or ``forever`` (``FOREVER``: drain without limit)."""
ADDRESS: Final = Value("ADDRESS", parse_address)
"""A worker address: ``host:port``, ``[v6]:port`` or ``unix:/path``."""
LISTEN_ADDRESS: Final = Value("ADDRESS", lambda text: parse_address(text, listen=True))
"""An address for a gRPC server to listen on (port 0 picks a free one)."""
HTTP_LISTEN_ADDRESS: Final = Value(
    "ADDRESS", lambda text: parse_address(text, listen=True, grpc_server=False)
)
"""An address for an HTTP server to listen on: ``LISTEN_ADDRESS``, but a host named
like a gRPC scheme (``vsock``) is a host (aiohttp reads no scheme)."""
URL: Final = Value("URL", _url)
"""An http(s) URL with a host."""
TEXT: Final = Value("TEXT", _text)
"""Any UTF-8 text but an empty one (or one with a control character)."""
FILE: Final = Value("PATH", _path)
"""A path; whether the file exists is the reader's business (it may come later)."""
READABLE_FILE: Final = Value("PATH", _readable_file)
"""A path to a regular file readable now (at most ``CONFIG_FILE_LIMIT`` bytes)."""
CERTIFICATES: Final = Value("PATH", _certificates)
"""A PEM file with at least one certificate that parses."""
IP_ADDRESS: Final = Value("IP", _ip_address)
"""An IPv4 or IPv6 address literal (no host name, no interface name)."""
DISCOVERY: Final = Value("KIND:NAMESPACE", DiscoverySpec.parse)
"""A wool discovery to follow: ``local:NAMESPACE`` or ``lan:NAMESPACE``."""
LABEL: Final = Value("LABEL", _label_name)
"""A label name that is not reserved (``__...``)."""
