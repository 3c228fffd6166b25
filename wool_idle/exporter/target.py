"""One target of the exporter: a worker's address and the labels of its series."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from wool_idle.contract import WORKER_LABEL

Labels = tuple[tuple[str, str], ...]


def pool_digest(labels: Labels) -> str:
    """A short digest of a target's labels: the same for the same labels in every
    exporter, another for any other labels."""
    return hashlib.blake2b(json.dumps(labels).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Target:
    """One worker to scrape: its address and the extra labels of its series."""

    address: str
    labels: Labels = ()
    info: Labels = ()
    """A discovered worker's volatile facts (uid, pid, ...): the labels of its info
    series only; empty for the targets of flags and files."""
    secure: bool | None = None
    """Whether a discovered worker's record says it serves TLS; None when nothing
    says (flags and files: TLS exactly when client TLS is configured)."""
    pool_unknown: bool = False
    """A discovered worker kept only by discoveries down past their grace (see
    ``discovered``): which pool answers at its address is unknown, so its idle value
    is withheld (reason ``discovery_down``)."""
    regrouped: bool = False
    """A worker of a discovery or the file whose labels changed within the grace (see
    ``regrouped``): its idle value is withheld (reason ``pool_changed``)."""
    _label_dict: dict[str, str] = field(init=False, repr=False, compare=False)
    _info_dict: dict[str, str] = field(init=False, repr=False, compare=False)
    _pool_digest: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Built once per target, not per scrape.
        label_dict = {WORKER_LABEL: self.address, **dict(self.labels)}
        object.__setattr__(self, "_label_dict", label_dict)
        object.__setattr__(self, "_info_dict", {**label_dict, **dict(self.info)})

    def label_dict(self) -> dict[str, str]:
        """``worker`` plus the target's labels. The same dict every call: do not modify."""
        return self._label_dict

    def info_dict(self) -> dict[str, str]:
        """``label_dict`` plus ``info``: the info series' labels. Do not modify."""
        return self._info_dict

    def pool_digest(self) -> str:
        """``pool_digest(self.labels)``, worked out on the first call and kept: ``/sd``
        and every ``/probe`` that names a ``pool`` ask for it."""
        digest = self._pool_digest
        if digest is None:
            digest = pool_digest(self.labels)
            object.__setattr__(self, "_pool_digest", digest)
        return digest
