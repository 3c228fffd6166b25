"""Following a wool ``LanDiscovery`` namespace (DNS-SD over multicast, zeroconf).

Facts of wool 0.15 this relies on: a namespace is the service type
``_wool-<md5(namespace)[:6]>._tcp.local.``; browsing is push-based (no poll);
a pool that exits cleanly says goodbye (its workers drop at once), one that is
killed does not (its workers stay until zeroconf's records expire, and show
as down). wool has no option for the network interface: every subscription
calls ``AsyncZeroconf()`` with no arguments, which ``restrict_zeroconf``
rebinds for the whole process.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from wool_idle.discovery.attachment import FollowProblem

MIN_SETTLE: Final = 2.0
"""Seconds a new subscription is given to hear every live worker at least."""


def restrict_zeroconf(interfaces: Sequence[str]) -> None:
    """Make every ``LanDiscovery`` of this process use zeroconf on ``interfaces`` only
    (IP addresses of local interfaces), in both directions."""
    import wool.runtime.discovery.lan as wool_lan

    wool_lan.AsyncZeroconf = functools.partial(_zeroconf_on, interfaces=list(interfaces))


def _zeroconf_on(*args: Any, interfaces: list[str], **kwargs: Any) -> Any:
    """zeroconf's ``AsyncZeroconf`` on ``interfaces``; the ``OSError`` of an address no
    interface has (the OS says only "No such device") names the flag that chose it."""
    from zeroconf.asyncio import AsyncZeroconf

    try:
        return AsyncZeroconf(*args, interfaces=interfaces, **kwargs)
    except OSError as error:
        chosen = ",".join(interfaces)
        raise OSError(
            error.errno, f"{error.strerror} on --wool-discovery.lan-interface {chosen}"
        ) from None


class LanAttachment:
    """Subscriptions to one ``LanDiscovery`` namespace."""

    def __init__(self, namespace: str, *, poll_interval: float) -> None:
        self.namespace = namespace
        self.poll_interval = poll_interval

    @property
    def settle(self) -> float:
        """Long enough for the answers to the first browse query."""
        return max(MIN_SETTLE, 2 * self.poll_interval)

    def attach(self) -> bool:
        """Nothing to check beforehand: a namespace nobody publishes is just empty. Never
        replaced: a browse follows the network as it changes."""
        return False

    def subscribe(self) -> AsyncIterator[Any]:
        """wool's subscriber of the namespace's service type."""
        from wool import LanDiscovery

        subscriber: AsyncIterator[Any] = aiter(LanDiscovery(self.namespace).subscribe())
        return subscriber

    def announced(self) -> bool:
        """Always: a browse's answers come in their own time (``settle``)."""
        return True

    def detached(self) -> bool:
        """Never: a browse follows the network as it changes."""
        return False

    def problem(self, error: BaseException) -> FollowProblem:
        """Every failure (an interface that is not up, say) is ``failed``."""
        return FollowProblem.FAILED
