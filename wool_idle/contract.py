"""The vocabulary every part shares. Imports nothing but the standard library.

- Series and label names: what the exporter renders, the autoscaler reads back,
  the dashboards and alert rules query.
- ``valid_idle``: the one rule for what counts as an idle value at all;
  ``encodes_as_utf8``: the one test for text that must go out as bytes.
- ``DEFAULT_GRACE`` and ``stop_deadline``: how long a stop drains, and how long
  its RPC may take.
- ``MAX_REPLY_BYTES``: the largest reply the daemons' clients take from a worker.
- ``MAX_LABELS_TEXT`` and ``labels_text``: how much text a worker's labels may take.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Final

WORKER_LABEL: Final = "worker"
"""The label naming a worker on every per-worker series: its address as configured."""

IDLE_SECONDS: Final = "wool_worker_idle_seconds"
"""Seconds the worker has been continuously idle; absent when it has no idle value."""
UP: Final = "wool_worker_up"
"""1 if the worker demonstrably answered the idle RPC (a value, valid or not,
``UNIMPLEMENTED``, or a status only a server sends), else 0."""
IDLE_SUPPORTED: Final = "wool_worker_idle_supported"
"""0 if the worker predates the idle RPC, else 1 when up."""
PROBE_DURATION: Final = "wool_worker_probe_duration_seconds"
"""How long the worker's idle RPC took."""
WORKER_INFO: Final = "wool_worker_info"
"""Always 1, one per worker found through wool's discovery: its volatile facts
(``UID_LABEL``, ``PID_LABEL``, ``VERSION_LABEL``, ``SECURE_LABEL``) as labels, beside
``worker`` and the stable labels, so a restart changes this one series only."""
NAMESPACE_LABEL: Final = "wool_namespace"
"""The wool discovery namespace a worker was found in (on every series of such a worker)."""
TAGS_LABEL: Final = "wool_tags"
"""A discovered worker's wool tags, sorted and comma-joined (on every series of such a
worker; absent when it has none)."""
UID_LABEL: Final = "uid"
"""``WORKER_INFO``: the worker's wool uid."""
PID_LABEL: Final = "pid"
"""``WORKER_INFO``: the worker's process id."""
VERSION_LABEL: Final = "version"
"""``WORKER_INFO``: the wool version the worker runs."""
SECURE_LABEL: Final = "secure"
"""``WORKER_INFO``: ``true`` if the worker's record says it serves TLS, else ``false``."""
DISCOVERY_LABEL: Final = "discovery"
"""Names a followed discovery (``local:NAMESPACE``, ``lan:NAMESPACE``) on the exporter's
own discovery series."""
DISCOVERY_UP: Final = "wool_exporter_discovery_up"
"""1 while the exporter follows the discovery, 0 while it cannot (namespace missing,
subscription failing)."""
DISCOVERY_WORKERS: Final = "wool_exporter_discovery_workers"
"""Workers the exporter currently takes from the discovery."""
DISCOVERY_ERRORS: Final = "wool_exporter_discovery_errors"
"""A counter (``_total``) of the discovery's problems, by ``reason``: failed attempts to
follow it, and records skipped (a bad address, labels that are not UTF-8)."""
DISCOVERY_REPLACEMENTS: Final = "wool_exporter_discovery_replacements"
"""A counter (``_total``) of the times a ``local`` discovery's namespace was created
again by a new owner (its holder restarted) after the exporter had attached to it:
pools still attached to the old namespace serve on, unlisted."""
DISCOVERY_ORPHANED: Final = "wool_exporter_discovery_orphaned_workers"
"""Workers a ``local`` discovery listed right before its last replacement that it has
not listed again since, counted pool by pool (their tags), those of an earlier
replacement not yet back included (``discovery.orphans``): left on an old namespace,
unlisted. 0 with no replacement, once every one is back, and an hour after the last."""
RETIRED_TIMESTAMP: Final = "wool_autoscaler_retired_timestamp_seconds"
"""On the autoscaler's ``/metrics``: Unix time at which it stopped the worker
(label ``worker``, plus the worker's ``--group-by`` labels); the alert rules
and the dashboard tell a retired worker from a down one by it."""
BUILD_INFO: Final = "wool_idle_build_info"
"""Always 1, on the exporter's and the autoscaler's ``/metrics``: labels ``version``,
``python`` and ``grpc`` say what runs."""

LABEL_NAME: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
"""A Prometheus label name (names starting ``__`` are reserved for internal use), with
``match``: ``\\Z``, not ``$``, which also matches before a final newline."""

DEFAULT_GRACE: Final = 30.0
"""Seconds a worker drains in-flight tasks on stop unless told otherwise."""
STOP_DEADLINE_MARGIN: Final = 10.0
"""Seconds a stop RPC's deadline exceeds the grace (the worker answers after draining)."""
MAX_REPLY_BYTES: Final = 64 * 1024
"""The largest idle or stop reply the exporter and the autoscaler read from a worker
(wool's idle reply is 9 bytes; room for fields of later versions). A larger one
(``RESOURCE_EXHAUSTED``) is that worker's failure: a hostile target cannot make
either daemon take in gRPC's default 4 MiB per call."""

MAX_LABELS_TEXT: Final = 16 * 1024
"""The most characters a worker's own labels (all but ``worker``: a targets file's,
or the facts of a discovered worker) may take in exposition text (``labels_text``).
A worker over it is refused where it comes from (a targets file is not loaded, a
discovery record is skipped), so every line of a series stays well under the 64 KiB
line the autoscaler reads: it refuses a whole ``/metrics`` for one longer line, every
worker's reading for one worker's labels."""


def labels_text(labels: Iterable[tuple[str, str]]) -> int:
    """The characters ``labels`` take in exposition text, as ``name="value",`` each (a
    backslash, double quote or newline in a value escaped by a backslash)."""
    return sum(
        len(name) + len(value) + 4 + value.count("\\") + value.count('"') + value.count("\n")
        for name, value in labels
    )


def valid_idle(seconds: object) -> bool:
    """Whether ``seconds`` is an idle value at all: a finite number >= 0.

    Anything else a worker answers (NaN, infinity, a negative number, not a
    number) means the worker has no idle value: never a 0 (busy), never idle.
    """
    if isinstance(seconds, float):
        return 0 <= seconds < math.inf  # NaN compares false
    return isinstance(seconds, int) and not isinstance(seconds, bool) and seconds >= 0


def encodes_as_utf8(text: str) -> bool:
    """Whether ``text`` has a UTF-8 encoding: it holds no lone surrogate (a JSON or YAML
    ``"\\ud800"`` escape makes one), which no label value or header can carry."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def stop_deadline(grace: float) -> float | None:
    """The deadline for a stop RPC with ``grace``: past the drain, or none if it is unbounded."""
    return None if grace < 0 else grace + STOP_DEADLINE_MARGIN
