"""``--http.config.file``: how a daemon's HTTP client authenticates to what it reads
(Prometheus's HTTP client configuration format, see ``web.client_config``)."""

from __future__ import annotations

import argparse
import dataclasses

from wool_idle.cli.parser import Parser, Section
from wool_idle.cli.values import FILE
from wool_idle.web.client_config import (
    ClientConfigError,
    Credentials,
    HttpClientConfig,
    Secret,
)
from wool_idle.web.live_client_config import LiveClientConfig
from wool_idle.web.urls import split_userinfo


def add_http_client_flags(section: Section) -> None:
    """Add ``--http.config.file`` to ``section``."""
    section.add(
        "--http.config.file",
        FILE,
        "Prometheus HTTP client config (basic_auth, authorization, tls_config) for the source",
        default=None,
    )


def http_client_config(
    parser: Parser, args: argparse.Namespace, url: str, *, url_flag: str
) -> tuple[str, LiveClientConfig]:
    """``url`` (the value of ``url_flag``) without its userinfo, and the client
    config in force, followed as the file changes: the file's, with the URL's
    userinfo as basic auth. Exits 2 naming the flag, the file and the key when the
    file is invalid, or when the URL and the file both carry credentials."""
    clean, userinfo = split_userinfo(url)
    path = args.http_config_file

    def with_url(config: HttpClientConfig) -> HttpClientConfig:
        if userinfo is None:
            return config
        if config.credentials is not None:
            raise CredentialsTwice(
                f"{url_flag} carries credentials, and the file sets them too: give them once"
            )
        user, password = userinfo
        secret = Secret(f"the password of {url_flag}", value=password)
        return dataclasses.replace(config, credentials=Credentials("Basic", secret, user))

    try:
        if path is None:
            return clean, LiveClientConfig(with_url(HttpClientConfig()))
        return clean, LiveClientConfig.load(path, with_url)
    except CredentialsTwice:
        parser.error(
            f"argument {url_flag}: carries credentials, and --http.config.file "
            "sets them too: give them once"
        )
    except ClientConfigError as error:
        parser.error(f"argument --http.config.file: {path}: {error}")


class CredentialsTwice(ClientConfigError):
    """Both the source URL and a version of the file carry credentials."""
