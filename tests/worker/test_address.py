"""Worker addresses: strict, ASCII, no control characters."""

from __future__ import annotations

import pytest

from wool_idle.worker.address import parse_address, same_endpoint, split_host_port


class TestParseAddress:
    @pytest.mark.parametrize(
        "text", ["127.0.0.1:50051", "worker-1.pool.svc:1", "[::1]:8080", "unix:/run/w.sock"]
    )
    def test_parse_address_accepts(self, text: str) -> None:
        """Given an IPv4, hostname, bracketed IPv6 or Unix address, then it unchanged."""
        assert parse_address(text) == text

    @pytest.mark.parametrize(
        "text",
        [
            "host:\u0668\u0660",  # Arabic-Indic digits: str.isdigit accepts them
            "host:\u00b9",  # superscript one: isdigit, yet int() raises
            "host:\uff18\uff10",  # fullwidth digits
            "h\u00f6st:1",
            "host\n:1",
            "host:1\n",  # "$" in a regex matches before a trailing newline
            "ho\x00st:1",
            "[::1\n]:1",
            "unix:/run/w\n.sock",
            "unix:/run/w\udcff.sock",  # undecodable byte 0xff of argv (surrogateescape)
            "host:-1",
            "host:0",
            "host:65536",
            "host:",
            ":80",
        ],
    )
    def test_parse_address_rejects(self, text: str) -> None:
        """Given a port of non-ASCII digits, a host with a control character or
        non-ASCII letter, or a port out of range, then ValueError (never a traceback
        later, never a request to a mangled address)."""
        with pytest.raises(ValueError, match="invalid address"):
            parse_address(text)

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("::1:8080", r"in brackets: \[::1\]:8080 or \[::1:8080\]:PORT"),
            ("fd00::2:8080", r"in brackets: \[fd00::2\]:8080 or \[fd00::2:8080\]:PORT"),
            ("fd00::2:", r"in brackets: \[fd00::2\]:PORT$"),
            (":::9478", r"in brackets: \[::\]:9478$"),
            ("::1", r"an IPv6 host goes in brackets: \[::1\]:PORT"),
            ("fe80::1%eth0", r"an IPv6 host goes in brackets: \[fe80::1%eth0\]:PORT"),
            ("[::1]", r"no port: \[::1\]:PORT"),
            ("[::]", r"no port: \[::\]:PORT"),
        ],
    )
    def test_parse_address_ipv6_without_brackets_or_port(self, text: str, message: str) -> None:
        """Given an IPv6 host without brackets (``::1:8080``: which colon ends the host
        is ambiguous) or a bracketed one without a port, then ValueError saying how to
        write it (it said ``bad host '[:'`` of ``[::1]``)."""
        with pytest.raises(ValueError, match=message):
            parse_address(text)

    @pytest.mark.parametrize("path", ["/run/w%41.sock", "/run/w%.sock", "/run/%2Fw.sock"])
    def test_parse_address_unix_path_with_percent(self, path: str) -> None:
        """Given a Unix path with ``%`` (gRPC percent-decodes ``unix:`` paths, so
        ``/run/w%41.sock`` binds and dials ``/run/wA.sock``: a worker would take over
        another's socket, and the exporter would label one worker with another's
        address), then ValueError naming the ``%``."""
        with pytest.raises(ValueError, match="'%' in a unix socket path"):
            parse_address(f"unix:{path}")

    @pytest.mark.parametrize("path", ["/run/w?a.sock", "/run/w#b.sock"])
    def test_parse_address_unix_path_with_query_or_fragment(self, path: str) -> None:
        """Given a Unix path with ``?`` or ``#`` (gRPC binds it as named, but dials
        ``/run/w``: a query or fragment ends a URI's path, so the exporter would read,
        and the autoscaler stop, the worker at ``/run/w`` under this one's name), then
        ValueError naming the character."""
        with pytest.raises(ValueError, match=f"{path[6]!r} in a unix socket path"):
            parse_address(f"unix:{path}")

    @pytest.mark.parametrize("path", ["//run/w.sock", "//w.sock"])
    def test_parse_address_unix_path_with_authority(self, path: str) -> None:
        """Given a Unix path starting with exactly two slashes (gRPC binds
        ``unix://run/w.sock`` at ``/run/w.sock`` but reads ``run`` as a URI authority
        when it dials, and dials nothing: the worker would be down for good to the
        exporter and never stopped), then ValueError."""
        with pytest.raises(ValueError, match="'//' starts a URI authority"):
            parse_address(f"unix:{path}")

    @pytest.mark.parametrize("path", ["///run/w.sock", "/run//w.sock"])
    def test_parse_address_unix_path_with_more_slashes(self, path: str) -> None:
        """Given a Unix path of three leading slashes, or two inside it (plain paths
        to gRPC too), then it is accepted."""
        assert parse_address(f"unix:{path}") == f"unix:{path}"

    def test_parse_address_listen_allows_port_zero(self) -> None:
        """Given port 0 to listen on, then it is accepted (the system picks a port)."""
        assert parse_address("127.0.0.1:0", listen=True) == "127.0.0.1:0"

    @pytest.mark.parametrize("host", ["unix-abstract", "vsock"])
    def test_parse_address_listen_host_named_like_a_server_scheme(self, host: str) -> None:
        """Given a host that a gRPC server reads as a scheme (it would bind the abstract
        socket ``50051``, which any local user may bind first, where clients dial the
        host so named), then it is refused to listen on and accepted to dial."""
        with pytest.raises(ValueError, match=f"listen on {host!r} as a scheme"):
            parse_address(f"{host}:50051", listen=True)
        assert parse_address(f"{host}:50051") == f"{host}:50051"

    @pytest.mark.parametrize("grpc_server", [True, False])
    def test_parse_address_listen_without_host(self, grpc_server: bool) -> None:
        """Given ``:9478`` to listen on (Go exporters read it as every interface), then
        ValueError naming the addresses that mean every interface here."""
        hint = r"no host \(every interface: 0\.0\.0\.0:9478 or \[::\]:9478\)"
        with pytest.raises(ValueError, match=hint):
            parse_address(":9478", listen=True, grpc_server=grpc_server)

    def test_parse_address_unix_path_up_to_sun_path_limit(self) -> None:
        """Given Unix paths of 107 and 108 bytes (``sun_path`` holds 107 and a NUL;
        a multi-byte character counts by its bytes), then the first is accepted and
        the longer ones are refused naming the limit: no client can ever reach them."""
        # Arrange
        longest = "/" + "x" * 106
        too_long = ["/" + "x" * 107, "/" + "\u00e9" * 54]  # 108 and 109 bytes
        # Act
        accepted = parse_address(f"unix:{longest}")
        # Assert
        assert accepted == f"unix:{longest}"
        for path in too_long:
            with pytest.raises(ValueError, match="longer than 107 bytes"):
                parse_address(f"unix:{path}")


class TestSplitHostPort:
    @pytest.mark.parametrize(
        ("address", "expected"),
        [
            ("127.0.0.1:50051", ("127.0.0.1", 50051)),
            ("worker-1.pool.svc:1", ("worker-1.pool.svc", 1)),
            ("[::1]:8080", ("::1", 8080)),
            ("[::ffff:127.0.0.1]:9", ("::ffff:127.0.0.1", 9)),
        ],
    )
    def test_split_host_port_valid_address(self, address: str, expected: tuple[str, int]) -> None:
        """Given a valid host:port address, when split, then its host (an IPv6 one
        without brackets) and its port as a number."""
        # Arrange
        assert parse_address(address) == address

        # Act
        found = split_host_port(address)

        # Assert
        assert found == expected


class TestSameEndpoint:
    @pytest.mark.parametrize(
        ("address", "other", "expected"),
        [
            ("[::1]:7", "[0:0:0:0:0:0:0:1]:7", True),
            ("[fd00::2]:7", "[FD00::2]:7", True),
            ("[::ffff:127.0.0.1]:7", "127.0.0.1:7", True),
            ("[fe80::1%eth0]:7", "[FE80::1%eth0]:7", True),
            ("unix:/run/w.sock", "unix:/run/w.sock", True),
            ("[::1]:7", "127.0.0.1:7", False),
            ("[::1]:7", "[::1]:8", False),
            ("[fe80::1%eth0]:7", "[fe80::1]:7", False),
            ("localhost:7", "127.0.0.1:7", False),
            ("unix:/run/w.sock", "unix:/run/./w.sock", False),
        ],
    )
    def test_same_endpoint_spellings(self, address: str, other: str, expected: bool) -> None:
        """Given two valid addresses, when compared, then they are one endpoint exactly
        when their IP hosts are one address (however spelt, IPv4-mapped as IPv4, the
        zone as written) at one port; names and paths only as written."""
        # Arrange
        assert parse_address(address) == address and parse_address(other) == other

        # Act
        found = same_endpoint(address, other), same_endpoint(other, address)

        # Assert
        assert found == (expected, expected)
