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
    load_client_config,
)
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
) -> tuple[str, HttpClientConfig]:
    """``url`` (the value of ``url_flag``) without its userinfo, and the client
    config: the file's, with the URL's userinfo as basic auth. Exits 2 naming the
    flag, the file and the key when the file is invalid, or when the URL and the
    file both carry credentials."""
    clean, userinfo = split_userinfo(url)
    path = args.http_config_file
    config = HttpClientConfig()
    if path is not None:
        try:
            config = load_client_config(path)
        except ClientConfigError as error:
            parser.error(f"argument --http.config.file: {path}: {error}")
    if userinfo is not None:
        if config.credentials is not None:
            parser.error(
                f"argument {url_flag}: carries credentials, and --http.config.file "
                "sets them too: give them once"
            )
        user, password = userinfo
        secret = Secret(f"the password of {url_flag}", value=password)
        config = dataclasses.replace(config, credentials=Credentials("Basic", secret, user))
    return clean, config
