"""``--http.config.file``: a bad file exits 2 naming the flag, the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from wool_idle.cli import build_parser, main
from wool_idle.cli.http_flags import http_client_config

SCALE = ["autoscaler", "--max-idle", "1m", "--once"]


def failure(args: list[str], capsys) -> str:
    """The one line a command that must exit 2 writes."""
    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert len(err.splitlines()) == 1, err
    return err


class TestHttpClientConfig:
    @pytest.mark.parametrize(
        ("content", "key"),
        [
            ("basic_auth: {username: a, passwd: x}\n", "basic_auth.passwd"),
            ("basic_auth: {password_file: nope}\n", "basic_auth.password_file"),
            ("tls_config: {ca_file: nope.crt}\n", "tls_config.ca_file"),
            ("authorization: {credentials: a}\nauthorization: {credentials: b}\n", "authorization"),
            ("tls_config: {min_version: TLS1.2}\n", "tls_config.min_version"),
        ],
    )
    def test_http_client_config_bad_file_exits_2(
        self, content: str, key: str, tmp_path: Path, capsys
    ) -> None:
        """Given a bad client config, when the autoscaler starts, then it exits 2 with
        one line naming the flag, the file and the key."""
        # Arrange
        path = tmp_path / "http.yml"
        path.write_text(content)
        # Act
        err = failure([*SCALE, "--http.config.file", str(path)], capsys)
        # Assert
        assert f"argument --http.config.file: {path}: " in err
        assert key in err

    def test_http_client_config_url_and_file_credentials_exit_2(
        self, tmp_path: Path, capsys
    ) -> None:
        """Given credentials in --prometheus-url and in the file, then exit 2 naming the
        URL's flag, without printing the URL's password."""
        # Arrange
        path = tmp_path / "http.yml"
        path.write_text("bearer_token: t\n")
        url = "https://bob:hunter2@prometheus:9090"
        # Act
        err = failure([*SCALE, "--prometheus-url", url, "--http.config.file", str(path)], capsys)
        # Assert
        assert "argument --prometheus-url: carries credentials" in err
        assert "hunter2" not in err

    def test_http_client_config_url_userinfo_becomes_basic_auth(self) -> None:
        """Given a --metrics-url with userinfo and no file, then the URL without it and
        basic-auth credentials of it."""
        # Arrange
        args = build_parser().parse_args(
            ["autoscaler", "--max-idle", "1m", "--metrics-url", "http://bob:s%20t@h:1/metrics"]
        )
        # Act
        url, live = http_client_config(
            args.parser, args, args.metrics_url, url_flag="--metrics-url"
        )
        # Assert
        assert url == "http://h:1/metrics"
        assert live.current.credentials is not None
        assert live.current.credentials.header() == "Basic Ym9iOnMgdA=="  # bob:s t

    @pytest.mark.parametrize(
        "url", ["http://bob:hun/ter2@h/m", "http://bob:99/hunter2@h/m", "http://bob:9#hunter2@h/m"]
    )
    def test_userinfo_cut_short_by_a_slash_is_refused_unshown(self, url: str, capsys) -> None:
        """Given a source URL whose password holds a '/' or '#' not percent-encoded (so
        the host ends there: read as host `bob`, the password in the path), then it is
        refused (never sent to host `bob`) with a one-line error that shows no part of
        the user or password."""
        err = failure(["autoscaler", "--max-idle", "1m", "--metrics-url", url], capsys)
        assert "argument --metrics-url: invalid URL 'http://xxxxx@h/m'" in err
        assert "hun" not in err and "bob" not in err

    @pytest.mark.parametrize(
        "url",
        ["http://bob:hunter2@host:99999/m", "http://bob:hunter2@h/\tx", "ftp://bob:hunter2@h/"],
    )
    def test_bad_url_error_never_shows_the_password(self, url: str, capsys) -> None:
        """Given a source URL with userinfo that is invalid, then the one-line error
        names the flag and shows the URL with its userinfo hidden."""
        err = failure(["autoscaler", "--max-idle", "1m", "--metrics-url", url], capsys)
        assert "argument --metrics-url: invalid URL 'http" in err or "'ftp" in err
        assert "hunter2" not in err and "bob" not in err and "xxxxx@" in err


class TestHttpClientConfigFollowed:
    async def test_reload_file_gaining_credentials_beside_the_url_keeps_the_url_ones(
        self, tmp_path: Path
    ) -> None:
        """Given a --metrics-url carrying credentials and a file carrying none, when the
        file gains a bearer token and is reloaded, then the failure names the file and
        the URL's flag, and the URL's basic auth stays in force."""
        # Arrange
        path = tmp_path / "http.yml"
        path.write_text("follow_redirects: true\n")
        args = build_parser().parse_args(
            ["autoscaler", "--max-idle", "1m", "--metrics-url", "http://bob:pw@h:1/metrics",
             "--http.config.file", str(path)]
        )  # fmt: skip
        _, live = http_client_config(args.parser, args, args.metrics_url, url_flag="--metrics-url")
        path.write_text("bearer_token: tok\n")
        # Act
        failure = await live.reload()
        # Assert
        assert failure.startswith(f"{path}: --metrics-url carries credentials")
        assert "pw" not in failure.removeprefix(str(path))
        assert live.current.credentials is not None
        assert live.current.credentials.header() == "Basic Ym9iOnB3"  # bob:pw
