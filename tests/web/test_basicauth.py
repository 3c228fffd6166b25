"""HTTP basic auth against bcrypt hashes."""

from __future__ import annotations

import base64

import bcrypt
import pytest

from wool_idle.web.basicauth import BasicAuth

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$")


def header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class TestBasicAuth:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (header("prometheus", "s3cret"), True),
            (header("prometheus", "wrong"), False),
            (header("mallory", "s3cret"), False),
            (None, False),
            ("Bearer abc", False),
            ("Basic !!!", False),
            ("Basic " + base64.b64encode(b"no-colon").decode(), False),
        ],
    )
    async def test_check(self, value, expected: bool) -> None:
        """Given one user, when headers are checked, then only the right pair passes."""
        auth = BasicAuth({"prometheus": HASH.encode()})
        assert await auth.check(value) is expected
        assert await auth.check(value) is expected  # remembered results agree

    def test_unknown_user_checked_at_same_cost(self) -> None:
        """Given users hashed at some cost, then an unknown user is checked against a
        dummy hash of the same cost (same time as a wrong password)."""
        auth = BasicAuth({"prometheus": HASH.encode()})
        assert auth._dummy.split(b"$")[2] == HASH.encode().split(b"$")[2]
