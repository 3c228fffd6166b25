"""Which worker each address names: lookups, real paths, a short memory, and the labels
that share a worker."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clock import Clock
from support.processes import run_python

from wool_idle.autoscaler import endpoints, identity
from wool_idle.autoscaler.identity import LOOKUP_THREADS, AddressResolver, identities


def loopback(port: int, *points: str) -> frozenset[str]:
    """The endpoints of loopback ``points`` at ``port``: each, and ``loopback:PORT``."""
    return frozenset({*(f"{point}:{port}" for point in points), f"loopback:{port}"})


def localhost_endpoints(port: int) -> frozenset[str]:
    """What ``localhost`` resolves to here, as endpoints (``::1`` too on some hosts)."""
    found = socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)
    return loopback(port, *(f"[{a[4][0]}]" if a[0] is socket.AF_INET6 else a[4][0] for a in found))


def socket_endpoints(path: Path) -> frozenset[str]:
    """The endpoints of the socket at ``path``: its real path and its inode."""
    found = path.stat()
    return frozenset({f"unix:{path.resolve()}", f"unix-inode:{found.st_dev}:{found.st_ino}"})


def bound_socket(path: Path) -> socket.socket:
    """A unix socket bound at ``path`` (a worker's, as far as the path goes)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return sock


@pytest.fixture
def busy_lookups() -> Iterator[threading.Event]:
    """Every lookup thread busy until the event is set (a DNS that does not answer)."""
    release = threading.Event()
    for _ in range(LOOKUP_THREADS):
        identity._LOOKUPS.submit(release.wait)
    yield release
    release.set()


class TestAddressResolver:
    async def test_resolve_addresses(self, tmp_path: Path) -> None:
        """Given an IP address, a name, an IPv6 address, a unix socket named through a
        symbolic link, a relative unix path, a unix path where no socket is (nothing, a
        regular file) and a name that does not exist, when resolved, then the first four
        give their endpoints (the link followed), and the others are left out: they do
        not resolve."""
        # Arrange
        listening = bound_socket(tmp_path / "real.sock")
        (tmp_path / "link.sock").symlink_to(tmp_path / "real.sock")
        (tmp_path / "file.sock").touch()
        workers = [
            "127.0.0.1:5",
            "localhost:5",
            "[::1]:5",
            f"unix:{tmp_path}/link.sock",
            "unix:w.sock",
            f"unix:{tmp_path}/none.sock",
            f"unix:{tmp_path}/file.sock",
            "no-such-host.invalid:5",
        ]
        # Act
        resolved = await AddressResolver().resolve(workers)
        real = socket_endpoints(tmp_path / "real.sock")
        listening.close()
        # Assert
        assert resolved == {
            "127.0.0.1:5": loopback(5, "127.0.0.1"),
            "localhost:5": localhost_endpoints(5),
            "[::1]:5": loopback(5, "[::1]"),
            f"unix:{tmp_path}/link.sock": real,
        }

    @pytest.mark.parametrize(
        "worker", ["0.0.0.0:5", "[::]:5", "[::ffff:0.0.0.0]:5", "0:5", "[::%1]:5", "[::%lo]:5"]
    )
    async def test_resolve_unspecified_address_names_no_worker(self, worker: str) -> None:
        """Given a label that is, or resolves to, an unspecified address however spelt
        (it reaches whichever local worker listens on the port, which another label
        names already), when resolved, then it is left out: it does not resolve."""
        resolved = await AddressResolver().resolve([worker, "127.0.0.1:5"])
        assert resolved == {"127.0.0.1:5": loopback(5, "127.0.0.1")}

    @pytest.mark.parametrize(
        "worker", ["127.0.0.010:5", "0177.0.0.1:5", "127.1:5", "2130706433:5", "0x7f.0.0.1:5"]
    )
    @pytest.mark.parametrize("lookup", [False, True], ids=["resolver", "look_up"])
    async def test_resolve_name_ending_in_a_number_names_no_worker(
        self, worker: str, lookup: bool
    ) -> None:
        """Given a label whose host is an IPv4 address in a form other than plain dotted
        decimal (leading zeros, octal, fewer parts, one number, hexadecimal), when
        resolved, then it is left out: getaddrinfo and gRPC read such a host apart
        (127.0.0.010 is 127.0.0.8 to one, 127.0.0.10 to the other), so which worker
        it names is unknown."""
        # Act
        if lookup:
            resolved = {w: p for w in [worker, "127.0.0.1:5"] if (p := endpoints.look_up(w))}
        else:
            resolved = await AddressResolver().resolve([worker, "127.0.0.1:5"])
        # Assert
        assert resolved == {"127.0.0.1:5": loopback(5, "127.0.0.1")}

    @pytest.mark.parametrize("lookup", [False, True], ids=["literal", "getaddrinfo"])
    async def test_resolve_ipv6_zone_by_name_or_number_is_one_zone(self, lookup: bool) -> None:
        """Given one link-local address with its zone as the interface's name, as its
        index (with a leading zero too) and with no zone, when resolved (as a literal
        by the resolver, or through a lookup), then the zoned spellings lead to one
        endpoint, the zone as the index, and the unzoned one apart: a worker named
        both ways counts once, and two links' workers stay two."""
        # Arrange
        index = socket.if_nametoindex("lo")
        workers = ["[fe80::1%lo]:5", f"[fe80::1%{index}]:5", f"[fe80::1%0{index}]:5"]
        # Act
        if lookup:
            resolved = {w: endpoints.look_up(w) for w in [*workers, "[fe80::1]:5"]}
        else:
            resolved = await AddressResolver().resolve([*workers, "[fe80::1]:5"])
        # Assert
        assert resolved == {
            **dict.fromkeys(workers, frozenset({f"[fe80::1%{index}]:5"})),
            "[fe80::1]:5": frozenset({"[fe80::1]:5"}),
        }

    @pytest.mark.parametrize("zone", ["nosuch", "+1", "4294967296", "\u0661"])
    async def test_resolve_zone_naming_no_interface_stays_apart(self, zone: str) -> None:
        """Given a link-local address whose zone names no interface here (an unknown
        name, a sign, an index past 32 bits, another script's digit), when resolved,
        then it raises nothing and leads to its own endpoint, apart from the unzoned
        address: an unknown zone merges with no other worker."""
        # Arrange
        worker = f"[fe80::1%{zone}]:5"
        # Act
        resolved = await AddressResolver().resolve([worker, "[fe80::1]:5"])
        # Assert
        assert resolved[worker] != resolved["[fe80::1]:5"]
        assert identities(resolved) == {}

    @pytest.mark.parametrize(
        ("worker", "plain"),
        [
            ("[::1%lo]:5", loopback(5, "[::1]")),
            ("[::1%1]:5", loopback(5, "[::1]")),
            ("[::1%0]:5", loopback(5, "[::1]")),
            ("[fe80::1%0]:5", frozenset({"[fe80::1]:5"})),
        ],
    )
    async def test_resolve_zone_on_no_link_local_address_is_none(
        self, worker: str, plain: frozenset[str]
    ) -> None:
        """Given a zone on an address that is not link-local (the kernel ignores it
        there), or zone 0, when resolved, then it leads where the address without the
        zone leads: one worker, not two."""
        # Act
        resolved = await AddressResolver().resolve([worker])
        # Assert
        assert resolved == {worker: plain}

    async def test_resolve_localhost_pair_of_a_port_is_one_worker(self) -> None:
        """Given a port named on 127.0.0.1, ::1 (zoned too) and IPv4-mapped 127.0.0.1 (a
        worker bound on localhost answers on both), on 127.0.0.2, and 127.0.0.1 at
        another port, when given identities, then the first four share one and the
        others stay apart: a worker bound on localhost is never counted twice, and
        distinct workers on other loopback addresses are never merged."""
        # Arrange
        spellings = ["127.0.0.1:5", "[::1]:5", "[::1%lo]:5", "[::ffff:127.0.0.1]:5"]
        # Act
        resolved = await AddressResolver().resolve([*spellings, "127.0.0.2:5", "127.0.0.1:6"])
        shared = identities(resolved)
        # Assert
        assert len({shared[label] for label in spellings}) == 1
        assert "127.0.0.2:5" not in shared and "127.0.0.1:6" not in shared

    async def test_resolve_keeps_answers_for_the_ttl(self, tmp_path: Path) -> None:
        """Given a unix label resolved once, when its link is turned to another path,
        then the answer is kept until the TTL has passed, and then read again."""
        # Arrange
        clock = Clock()
        resolver = AddressResolver(ttl=60.0, clock=clock)
        sockets = [bound_socket(tmp_path / name) for name in ("first", "second")]
        link, label = tmp_path / "w.sock", f"unix:{tmp_path}/w.sock"
        link.symlink_to(tmp_path / "first")
        before = await resolver.resolve([label])
        link.unlink()
        link.symlink_to(tmp_path / "second")
        # Act
        clock.now = 59.0
        within = await resolver.resolve([label])
        clock.now = 61.0
        after = await resolver.resolve([label])
        first, second = (socket_endpoints(tmp_path / n) for n in ("first", "second"))
        for sock in sockets:
            sock.close()
        # Assert
        assert before == within == {label: first}
        assert after == {label: second}

    async def test_resolve_does_not_wait_past_its_timeout(
        self, busy_lookups: threading.Event
    ) -> None:
        """Given every lookup thread busy (a DNS that does not answer), when a name is
        resolved, then the call returns at its timeout with no endpoints for it (an
        unknown worker), and once the lookup is done a later call has its answer."""
        # Arrange
        resolver = AddressResolver(timeout=0.05)
        # Act
        stuck = await resolver.resolve(["localhost:5"])
        busy_lookups.set()
        later = stuck
        while not later:
            await asyncio.sleep(0.01)
            later = await resolver.resolve(["localhost:5"])
        # Assert
        assert stuck == {}
        assert later == {"localhost:5": localhost_endpoints(5)}

    def test_resolve_hung_lookups_never_hold_up_the_exit(self) -> None:
        """Given a process whose name lookups hang (a DNS server that does not answer:
        here a ``getaddrinfo`` that never returns, as one cannot be run here), with more
        names read than there are lookup threads, when the resolve times out and the
        process then leaves, then it exits at once: neither the lookups under way nor
        those queued are waited for (each costs the resolver's own timeouts: with dozens
        of names, SIGTERM took minutes to end the daemon)."""
        # Arrange
        script = (
            "import asyncio, socket, threading\n"
            "from wool_idle.autoscaler.identity import LOOKUP_THREADS, AddressResolver\n"
            "socket.getaddrinfo = lambda *args, **kwargs: threading.Event().wait()\n"
            "names = [f'w{n}.example:1' for n in range(2 * LOOKUP_THREADS)]\n"
            "found = asyncio.run(AddressResolver(timeout=0.1).resolve(names))\n"
            "print(f'resolved: {len(found)}')\n"
        )
        # Act
        result = run_python(script, timeout=30.0)
        # Assert
        assert result.returncode == 0, result.stderr
        assert result.stdout == "resolved: 0\n"

    async def test_resolve_forgets_labels_no_longer_read(self) -> None:
        """Given labels resolved on one call, when the next call asks for others, then
        only theirs are kept (the memory is bounded by one read's labels)."""
        # Arrange
        resolver = AddressResolver()
        await resolver.resolve(["127.0.0.1:1", "127.0.0.2:1"])
        # Act
        await resolver.resolve(["127.0.0.3:1"])
        # Assert
        assert set(resolver._answers) == {"127.0.0.3:1"}


class TestIdentities:
    def test_identities_labels_that_overlap_share_one(self) -> None:
        """Given labels whose endpoints overlap directly or through another label, and a
        label of its own, when given identities, then the overlapping ones share one
        (all their endpoints) and the lone label has none."""
        # Arrange
        endpoints = {
            "127.0.0.1:5": frozenset({"127.0.0.1:5"}),
            "localhost:5": frozenset({"127.0.0.1:5", "[::1]:5"}),
            "ip6-localhost:5": frozenset({"[::1]:5"}),
            "10.0.0.1:5": frozenset({"10.0.0.1:5"}),
        }
        # Act
        shared = identities(endpoints)
        # Assert
        assert shared == dict.fromkeys(
            ["127.0.0.1:5", "localhost:5", "ip6-localhost:5"], "127.0.0.1:5,[::1]:5"
        )

    def test_identities_distinct_workers_have_none(self) -> None:
        """Given labels that all lead apart (other ports, other hosts), then none shares."""
        endpoints = {f"127.0.0.1:{p}": frozenset({f"127.0.0.1:{p}"}) for p in range(1, 50)}
        assert identities(endpoints) == {}
