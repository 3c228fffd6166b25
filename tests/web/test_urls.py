"""URLs fit to print."""

from __future__ import annotations

import pytest

from wool_idle.web.urls import redact, split_userinfo


class TestUrls:
    @pytest.mark.parametrize(
        ("url", "shown"),
        [
            ("https://bob:s3cret@host:9478/metrics", "https://xxxxx@host:9478/metrics"),
            ("http://token@host/", "http://xxxxx@host/"),
            ("http://a:b@c@host/x?q=1", "http://xxxxx@host/x?q=1"),
            ("http://host:9090/", "http://host:9090/"),
            ("http://u:p@[::1/broken", "http://xxxxx@[::1/broken"),
            ("http://u:p\n@host/", "http://xxxxx@host/"),
            ("not a url u:p@host", "not a url u:p@host"),
        ],
    )
    def test_redact(self, url: str, shown: str) -> None:
        """Given a URL with or without userinfo, then the userinfo is hidden, the rest kept."""
        assert redact(url) == shown

    def test_split_userinfo(self) -> None:
        """Given a URL with percent-encoded userinfo, then the bare URL and the
        decoded user and password."""
        assert split_userinfo("https://bob:p%40ss%3A1@host:1/m?x=1") == (
            "https://host:1/m?x=1",
            ("bob", "p@ss:1"),
        )

    def test_split_userinfo_none(self) -> None:
        assert split_userinfo("http://host/m") == ("http://host/m", None)
