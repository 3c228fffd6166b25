"""Command-line plumbing shared by every subcommand: parsers that exit 2 with
one line naming the flag, durations, environment defaults and TLS flags."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeVar

from wool_idle.webconfig import WebConfig, WebConfigError, load_web_config
from wool_idle.worker.address import parse_address
from wool_idle.worker.tls import ClientTls

T = TypeVar("T")
USAGE_ERROR: Final = 2
ENV_PREFIX: Final = "WOOL_IDLE_"

_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS: Final = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr and exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(USAGE_ERROR)


def plain(docstring: str | None) -> str:
    """A docstring as ``--help`` text: without reStructuredText literals."""
    return (docstring or "").replace("``", "")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a plain number (``1.5``) or Prometheus-style (``1h30m``, ``500ms``).

    Raises ``ValueError`` for anything else, including negatives, NaN and infinity.
    """
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        if not text or _DURATION_PART.sub("", text):
            raise ValueError(
                f"invalid duration {text!r} (use seconds or e.g. 30s, 5m, 1h30m)"
            ) from None
        seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"invalid duration {text!r}: must be a finite number >= 0")
    return seconds


def argument_type(convert: Callable[[str], T], name: str) -> Callable[[str], T]:
    """Wrap ``convert`` so that its ``ValueError`` becomes argparse's one-line error."""

    def checked(text: str) -> T:
        try:
            return convert(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    checked.__name__ = name
    return checked


def _positive(text: str) -> float:
    seconds = parse_duration(text)
    if seconds == 0:
        raise ValueError(f"invalid duration {text!r}: must be greater than 0")
    return seconds


def _grace(text: str) -> float:
    return -1.0 if text.strip().lower() == "forever" else parse_duration(text)


def _count(minimum: int) -> Callable[[str], int]:
    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"invalid count {text!r}: expected a whole number") from None
        if value < minimum:
            raise ValueError(f"invalid count {text!r}: must be >= {minimum}")
        return value

    return count


duration = argument_type(parse_duration, "duration")
"""A duration >= 0."""
positive_duration = argument_type(_positive, "duration")
"""A duration > 0."""
grace_duration = argument_type(_grace, "grace")
"""A duration >= 0, or ``forever`` (-1: drain without limit)."""
address = argument_type(parse_address, "address")
listen_address = argument_type(lambda text: parse_address(text, listen=True), "address")


def _url(text: str) -> str:
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"invalid URL {text!r}: expected http(s)://host[:port]/path")
    try:
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        raise ValueError(f"invalid URL {text!r}: bad port") from None
    return text


url = argument_type(_url, "url")
"""An http(s) URL with a host."""


def count(minimum: int) -> Callable[[str], int]:
    """A whole number >= ``minimum``."""
    return argument_type(_count(minimum), "count")


def env_name(flag: str) -> str:
    """The environment variable that sets ``flag``: ``--max-idle`` -> ``WOOL_IDLE_MAX_IDLE``."""
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").replace(".", "_").upper()


def add(
    parser: argparse.ArgumentParser | Any,
    flag: str,
    *,
    default: Any = None,
    help: str,
    **kwargs: Any,
) -> None:
    """Add ``flag`` whose default comes from its environment variable when set.

    A value from the environment goes through the flag's ``type`` like one on
    the command line, so a bad one exits 2 naming the flag. Repeatable flags
    (``action="append"``) read a comma-separated list.
    """
    variable = env_name(flag)
    raw = os.environ.get(variable)
    if raw is not None:
        default = _from_environment(parser, flag, variable, raw, kwargs)
    parser.add_argument(flag, default=default, help=f"{help} [env {variable}]", **kwargs)


def _from_environment(
    parser: Any, flag: str, variable: str, raw: str, kwargs: dict[str, Any]
) -> Any:
    """The default ``raw`` gives ``flag``; exits 2 naming both when it is invalid.

    Single values stay text: argparse converts a text default through the
    flag's ``type`` itself, and reports a bad one against the flag.
    """
    fail = getattr(parser, "error", None) or parser._container.error  # groups have no error()
    if kwargs.get("action") == "store_true":
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    if kwargs.get("action") == "append":
        convert = kwargs.get("type", str)
        try:
            return [convert(item) for item in raw.split(",") if item.strip()]
        except argparse.ArgumentTypeError as error:
            fail(f"argument {flag} (from {variable}): {error}")
    choices = kwargs.get("choices")
    if choices is not None and raw not in choices:
        fail(
            f"argument {flag} (from {variable}): invalid choice {raw!r} "
            f"(choose from {', '.join(choices)})"
        )
    return raw


def add_logging(parser: argparse.ArgumentParser) -> None:
    """Add ``--log-format`` and ``--log-level``."""
    add(parser, "--log-format", default="text", choices=["text", "json"], help="log line format")
    add(
        parser,
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="least severe level logged",
    )


def add_client_tls(parser: argparse.ArgumentParser) -> None:
    """Add the flags of TLS connections to workers."""
    add(parser, "--tls-ca", help="PEM CA bundle to verify workers (enables TLS)")
    add(parser, "--tls-cert", help="PEM client certificate for mutual TLS")
    add(parser, "--tls-key", help="PEM client key for mutual TLS")
    add(parser, "--tls-server-name", help="expected name in the workers' certificates")


def client_tls(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ClientTls | None:
    """Build the ``ClientTls`` the flags ask for, exiting 2 on missing or unreadable files."""
    if not any((args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name)):
        return None
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("argument --tls-cert/--tls-key: give both or neither")
    for flag, path in (
        ("--tls-ca", args.tls_ca),
        ("--tls-cert", args.tls_cert),
        ("--tls-key", args.tls_key),
    ):
        require_readable(parser, flag, path)
    return ClientTls(
        ca_file=args.tls_ca,
        cert_file=args.tls_cert,
        key_file=args.tls_key,
        server_name=args.tls_server_name,
    )


def add_web_config(parser: argparse.ArgumentParser) -> None:
    """Add ``--web.config.file`` and ``--web.config.check`` (exporter-toolkit's format)."""
    add(
        parser,
        "--web.config.file",
        dest="web_config_file",
        help="exporter-toolkit web config (TLS, basic auth) for the HTTP endpoints",
    )
    add(
        parser,
        "--web.config.check",
        dest="web_config_check",
        action="store_true",
        help="validate --web.config.file and exit",
    )


def web_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> WebConfig:
    """Load ``--web.config.file``, exiting 2 with the reason when it is invalid."""
    if args.web_config_file is None:
        if args.web_config_check:
            parser.error("argument --web.config.check: needs --web.config.file")
        return WebConfig()
    try:
        return load_web_config(args.web_config_file)
    except WebConfigError as error:
        parser.error(f"argument --web.config.file: {args.web_config_file}: {error}")


def require_readable(parser: argparse.ArgumentParser, flag: str, path: str | None) -> None:
    """Exit 2 naming ``flag`` unless ``path`` is None or a readable file."""
    if path is None:
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        parser.error(f"argument {flag}: cannot read {path!r}: {error.strerror}")
