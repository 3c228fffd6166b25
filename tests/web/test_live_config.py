"""The web config in force follows its file: good versions replace it, bad ones are
logged once and leave the last good one in force."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path

import bcrypt
import pytest
from support.clock import Clock

from wool_idle.web import live_config
from wool_idle.web.config import WebConfig, WebConfigError
from wool_idle.web.followed_config import FAILED_RETRY
from wool_idle.web.live_config import LiveWebConfig

ALICE = bcrypt.hashpw(b"a", bcrypt.gensalt(rounds=4)).decode()
BOB = bcrypt.hashpw(b"b", bcrypt.gensalt(rounds=4)).decode()


def users(*names: str) -> str:
    hashes = {"alice": ALICE, "bob": BOB}
    return "basic_auth_users:\n" + "".join(f"  {name}: '{hashes[name]}'\n" for name in names)


def tls_config(directory: Path, tls_material, extra: str = "") -> str:
    """A ``tls_server_config`` line serving copies of the server files in ``directory``."""
    shutil.copy(tls_material.server.cert, directory / "server.crt")
    shutil.copy(tls_material.server.key, directory / "server.key")
    return f"tls_server_config: {{cert_file: server.crt, key_file: server.key{extra}}}\n"


async def settle(live: LiveWebConfig) -> None:
    """Look at the file twice, as following does over two intervals: a version is
    loaded once two looks in a row found it."""
    await live.recheck()
    await live.recheck()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


class TestLiveWebConfig:
    async def test_new_users_and_headers_are_put_in_force(self, tmp_path: Path, caplog) -> None:
        """Given a followed file with alice, when it is rewritten with bob and a header,
        then bob and the header are in force, and the reload is logged."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path))
        caplog.set_level(logging.INFO, logger="wool_idle.web.live_config")
        # Act
        path.write_text(users("bob") + "http_server_config: {headers: {X-Frame-Options: deny}}\n")
        await settle(live)
        # Assert
        assert set(live.current.users) == {"bob"}
        assert live.current.headers == {"X-Frame-Options": "deny"}
        assert any("web config reloaded" in r.getMessage() for r in caplog.records)

    @pytest.mark.parametrize(
        "bad",
        [
            "basic_auth_users: {alice: not-a-hash}\n",
            "basic_auth_users: [\n",
            "unknown_key: 1\n",
            "tls_server_config: {cert_file: missing.crt, key_file: missing.key}\n",
            None,  # the file is gone
        ],
        ids=["bad-hash", "not-yaml", "unknown-key", "missing-certificate", "gone"],
    )
    async def test_bad_version_keeps_the_last_good_and_is_logged_once(
        self, tmp_path: Path, caplog, bad: str | None
    ) -> None:
        """Given a followed file, when it becomes invalid (or is removed) and is looked
        at twice, then the last good users stay in force, and one warning names the
        file and the reason."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path))
        good = live.current
        # Act
        if bad is None:
            path.unlink()
        else:
            path.write_text(bad)
        await settle(live)
        await settle(live)
        # Assert
        assert live.current is good
        found = warnings(caplog)
        assert len(found) == 1
        assert found[0].startswith(f"keeping the web config loaded before: {path}: ")

    async def test_good_version_after_a_bad_one_is_put_in_force(self, tmp_path: Path) -> None:
        """Given a followed file that became invalid, when it is mended, then the mended
        version is in force."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path))
        path.write_text("basic_auth_users: {alice: not-a-hash}\n")
        await settle(live)
        # Act
        path.write_text(users("bob"))
        await settle(live)
        # Assert
        assert set(live.current.users) == {"bob"}

    async def test_failed_version_is_tried_again_after_the_retry_time(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given a new version naming certificate files that are not there yet, when
        they appear (the web config file itself unchanged), then the version is not
        parsed again before the retry time, and is in force at the first look after."""
        # Arrange
        clock = Clock()
        path = tmp_path / "web.yml"
        path.write_text(tls_config(tmp_path, tls_material))
        live = LiveWebConfig.load(str(path), clock=clock)
        path.write_text(
            "tls_server_config: {cert_file: new.crt, key_file: new.key}\n" + users("bob")
        )
        await settle(live)
        shutil.copy(tls_material.server.cert, tmp_path / "new.crt")
        shutil.copy(tls_material.server.key, tmp_path / "new.key")
        # Act
        clock.now = FAILED_RETRY - 0.5
        await live.recheck()
        early = set(live.current.users)
        clock.now = FAILED_RETRY
        await live.recheck()
        # Assert
        assert early == set()
        assert set(live.current.users) == {"bob"}

    async def test_version_caught_being_written_never_serves(self, tmp_path: Path) -> None:
        """Given a followed file with alice, when a look catches it truncated (no users:
        auth off) and the next finds it written out with bob, then alice stays in force
        through both (neither was found twice), and bob once a third look agrees."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path))
        seen = []
        # Act
        for text in ("", users("bob"), users("bob")):
            path.write_text(text)
            await live.recheck()
            seen.append(set(live.current.users))
        # Assert
        assert seen == [{"alice"}, {"alice"}, {"bob"}]

    async def test_unchanged_file_is_not_parsed_again(self, tmp_path: Path, caplog) -> None:
        """Given a followed file, when it is looked at without a change, then the same
        config stays in force and nothing is logged."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path))
        first = live.current
        caplog.set_level(logging.INFO, logger="wool_idle.web.live_config")
        # Act
        await live.recheck()
        # Assert
        assert live.current is first
        assert not caplog.records

    @pytest.mark.parametrize("starts_with_tls", [True, False], ids=["tls-off", "tls-on"])
    async def test_tls_cannot_be_turned_on_or_off(
        self, tmp_path: Path, tls_material, caplog, starts_with_tls: bool
    ) -> None:
        """Given a followed file serving with TLS (or without), when a version turns
        TLS off (or on), then it is refused: the listener cannot change."""
        # Arrange
        path = tmp_path / "web.yml"
        tls = tls_config(tmp_path, tls_material)
        path.write_text((tls if starts_with_tls else "") + users("alice"))
        live = LiveWebConfig.load(str(path))
        first = live.current
        # Act
        path.write_text(("" if starts_with_tls else tls) + users("bob"))
        await settle(live)
        # Assert
        assert live.current is first
        assert warnings(caplog) == [
            f"keeping the web config loaded before: {path}: turning TLS on or off takes a restart"
        ]

    def test_load_refuses_a_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(WebConfigError, match="cannot read"):
            LiveWebConfig.load(str(tmp_path / "missing.yml"))

    async def test_a_config_without_a_file_is_not_followed(self) -> None:
        """Given a config of no file, then following it ends at once, and it stays."""
        # Arrange
        config = WebConfig(headers={"X-Frame-Options": "deny"})
        live = LiveWebConfig(config)
        # Act
        await live.follow()
        # Assert
        assert not live.followed
        assert live.current is config
        assert live.server_context() is None

    async def test_symlink_swap_is_followed(self, tmp_path: Path) -> None:
        """Given a file reached through a symlink (a Kubernetes Secret volume swaps its
        ``..data`` link atomically), when the link is swapped to a new version, then
        that version is in force."""
        # Arrange
        for version, name in (("v1", "alice"), ("v2", "bob")):
            (tmp_path / version).mkdir()
            (tmp_path / version / "web.yml").write_text(users(name))
        (tmp_path / "..data").symlink_to("v1")
        path = tmp_path / "web.yml"
        path.symlink_to("..data/web.yml")
        live = LiveWebConfig.load(str(path))
        # Act
        (tmp_path / "..data_tmp").symlink_to("v2")
        (tmp_path / "..data_tmp").replace(tmp_path / "..data")
        await settle(live)
        # Assert
        assert set(live.current.users) == {"bob"}

    async def test_follow_outlives_an_unexpected_failure(
        self, tmp_path: Path, monkeypatch, caplog
    ) -> None:
        """Given a look at the file that fails in an unforeseen way, when following goes
        on, then the failure is logged and the next good version is still put in force."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path), interval=0.01)
        real = live.recheck
        calls = 0

        async def failing_once() -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("unforeseen")
            await real()

        monkeypatch.setattr(live, "recheck", failing_once)
        path.write_text(users("bob"))
        # Act
        following = asyncio.ensure_future(live.follow())
        for _ in range(500):
            if "bob" in live.current.users:
                break
            await asyncio.sleep(0.01)
        following.cancel()
        # Assert
        assert set(live.current.users) == {"bob"}
        logged = [r.exc_info[1] for r in caplog.records if r.exc_info and r.exc_info[1]]
        assert [str(error) for error in logged] == ["unforeseen"]


TLS_FILES = "cert_file: server.crt, key_file: server.key"
REQUIRED = f"{TLS_FILES}, client_auth_type: RequireAndVerifyClientCert, client_ca_file: ca.crt"
HSTS = "http_server_config: {headers: {Strict-Transport-Security: max-age=31536000}}\n"
GCM128 = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
CBC = "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"


class TestWeakerVersions:
    """A version that would let in what the config in force keeps out is refused: a
    writer that stops half way must not open the endpoints."""

    @pytest.mark.parametrize(
        ("before", "after", "reason"),
        [
            (users("alice"), "", "turning basic auth off"),
            (users("alice"), "basic_auth_users:\n", "turning basic auth off"),
            (
                f"tls_server_config: {{{REQUIRED}}}\n",
                f"tls_server_config: {{{TLS_FILES}}}\n",
                "asking less of client certificates (client_auth_type)",
            ),
            (
                f"tls_server_config: {{{REQUIRED}}}\n",
                f"tls_server_config: {{{TLS_FILES}, client_auth_type: VerifyClientCertIfGiven,"
                " client_ca_file: ca.crt}\n",
                "asking less of client certificates (client_auth_type)",
            ),
            (
                f"tls_server_config: {{{REQUIRED}}}\n",
                f"tls_server_config: {{{TLS_FILES},"
                " client_auth_type: RequireAndVerifyClientCert}\n",
                "trusting the system's CAs for client certificates instead of client_ca_file",
            ),
            (
                f"tls_server_config: {{{TLS_FILES}, min_version: TLS13}}\n",
                f"tls_server_config: {{{TLS_FILES}}}\n",
                "a lower min_version",
            ),
            (
                HSTS + users("alice"),
                users("alice"),
                "removing a response header",
            ),
            (
                f"tls_server_config: {{{TLS_FILES}, cipher_suites: [{GCM128}]}}\n",
                f"tls_server_config: {{{TLS_FILES}}}\n",
                "allowing cipher suites that were not allowed",
            ),
            (
                f"tls_server_config: {{{TLS_FILES}, cipher_suites: [{GCM128}]}}\n",
                f"tls_server_config: {{{TLS_FILES}, cipher_suites: [{GCM128}, {CBC}]}}\n",
                "allowing cipher suites that were not allowed",
            ),
            (
                f"tls_server_config: {{{TLS_FILES}, curve_preferences: [X25519]}}\n",
                f"tls_server_config: {{{TLS_FILES}}}\n",
                "another key exchange than curve_preferences allowed",
            ),
            (
                f"tls_server_config: {{{TLS_FILES}}}\n",
                f"tls_server_config: {{{TLS_FILES}, cipher_suites: [{CBC}]}}\n",
                "allowing cipher suites that were not allowed",
            ),
            (
                HSTS,
                "http_server_config: {headers: {Strict-Transport-Security: }}\n",
                "removing a response header",
            ),
        ],
        ids=[
            "empty-file",
            "no-users",
            "no-client-auth",
            "optional",
            "system-cas",
            "tls12",
            "header",
            "default-ciphers",
            "more-ciphers",
            "default-curves",
            "beyond-the-defaults",
            "header-emptied",
        ],
    )
    async def test_weaker_version_is_refused(
        self, tmp_path: Path, tls_material, caplog, before: str, after: str, reason: str
    ) -> None:
        """Given a config in force, when the file settles on a weaker version (as a
        write cut short leaves it), then it is refused with the reason, however long
        it stays."""
        # Arrange
        copy_tls(tmp_path, tls_material)
        path = tmp_path / "web.yml"
        path.write_text(before)
        live = LiveWebConfig.load(str(path), retry=0.0)
        first = live.current
        # Act
        path.write_text(after)
        for _ in range(3):
            await settle(live)
        # Assert
        assert live.current is first
        assert warnings(caplog) == [
            f"keeping the web config loaded before: {path}: {reason} takes a restart"
        ]

    @pytest.mark.parametrize(
        ("before", "after"),
        [
            (users("alice", "bob"), users("bob")),
            (f"tls_server_config: {{{TLS_FILES}}}\n", f"tls_server_config: {{{REQUIRED}}}\n"),
            (
                f"tls_server_config: {{{TLS_FILES}}}\n",
                f"tls_server_config: {{{TLS_FILES}, min_version: TLS13}}\n",
            ),
            ("", users("alice")),
            (users("alice"), HSTS + users("alice")),
            (
                f"tls_server_config: {{{TLS_FILES}, cipher_suites: [{GCM128}, {CBC}]}}\n",
                f"tls_server_config: {{{TLS_FILES}, cipher_suites: [{GCM128}]}}\n",
            ),
            (
                f"tls_server_config: {{{TLS_FILES}, cipher_suites: [{GCM128}]}}\n",
                f"tls_server_config: {{{TLS_FILES}, cipher_suites: [TLS_AES_128_GCM_SHA256]}}\n",
            ),
        ],
        ids=[
            "fewer-users",
            "client-certificates",
            "tls13",
            "auth-on",
            "header",
            "fewer-ciphers",
            "tls13-suites-only",
        ],
    )
    async def test_stricter_version_is_put_in_force(
        self, tmp_path: Path, tls_material, before: str, after: str
    ) -> None:
        # Arrange
        copy_tls(tmp_path, tls_material)
        path = tmp_path / "web.yml"
        path.write_text(before)
        live = LiveWebConfig.load(str(path))
        first = live.current
        # Act
        path.write_text(after)
        await settle(live)
        # Assert
        assert live.current is not first


def copy_tls(directory: Path, tls_material) -> None:
    shutil.copy(tls_material.server.cert, directory / "server.crt")
    shutil.copy(tls_material.server.key, directory / "server.key")
    shutil.copy(tls_material.ca, directory / "ca.crt")


@pytest.mark.timeout(60)  # OpenSSL opening a FIFO would wait for a writer forever: fail
class TestHostileVersions:
    @pytest.mark.parametrize("key", ["cert_file", "client_ca_file"])
    async def test_fifo_named_by_a_new_version_is_refused(
        self, tmp_path: Path, tls_material, caplog, key: str
    ) -> None:
        """Given a new version naming a FIFO as a certificate file, then it is refused
        at once (OpenSSL never opens it), and a later good version is still followed."""
        # Arrange
        copy_tls(tmp_path, tls_material)
        os.mkfifo(tmp_path / "fifo")
        path = tmp_path / "web.yml"
        path.write_text(f"tls_server_config: {{{TLS_FILES}}}\n")
        live = LiveWebConfig.load(str(path))
        named = {"cert_file": "server.crt", "client_ca_file": "ca.crt", key: "fifo"}
        # Act
        path.write_text(
            f"tls_server_config: {{cert_file: {named['cert_file']}, key_file: server.key,"
            " client_auth_type: RequireAndVerifyClientCert,"
            f" client_ca_file: {named['client_ca_file']}}}\n"
        )
        await settle(live)
        refused = live.current
        path.write_text(f"tls_server_config: {{{REQUIRED}}}\n")
        await settle(live)
        # Assert
        assert refused.tls is not None and refused.tls.client_ca_file is None
        assert "a FIFO, not a regular file" in warnings(caplog)[0]
        assert live.current.tls is not None and live.current.tls.client_ca_file is not None

    async def test_nul_in_a_path_is_refused(self, tmp_path: Path, tls_material, caplog) -> None:
        """Given a new version with a NUL character in a file path, then it is refused
        with a reason, logged once."""
        # Arrange
        copy_tls(tmp_path, tls_material)
        path = tmp_path / "web.yml"
        path.write_text(f"tls_server_config: {{{TLS_FILES}}}\n")
        live = LiveWebConfig.load(str(path), retry=0.0)
        first = live.current
        # Act
        path.write_text('tls_server_config: {cert_file: "a\\0b", key_file: server.key}\n')
        for _ in range(3):
            await settle(live)
        # Assert
        assert live.current is first
        assert [w.rpartition(": ")[0].rpartition(": ")[2] for w in warnings(caplog)] == [
            "tls_server_config.cert_file"
        ]


class TestRetries:
    async def test_unreadable_look_keeps_the_retry_time_and_logs_nothing_twice(
        self, tmp_path: Path, monkeypatch, caplog
    ) -> None:
        """Given a refused version, when looks alternate between it and an unreadable
        file within the retry time, then it is parsed once, and each reason is logged
        once."""
        # Arrange
        clock = Clock()
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path), clock=clock)
        parsed = count_parses(monkeypatch)
        bad = "basic_auth_users: {alice: not-a-hash}\n"
        # Act
        for step in range(4):
            clock.now = float(step)
            path.write_text(bad)
            await settle(live)
            path.unlink()
            await live.recheck()
        # Assert
        assert parsed == [1]
        assert len(warnings(caplog)) == 2

    async def test_unforeseen_failure_of_a_version_waits_for_its_retry(
        self, tmp_path: Path, monkeypatch, caplog
    ) -> None:
        """Given a version whose loading fails in an unforeseen way, when it is looked
        at again within the retry time, then it is not loaded again, and the failure
        is logged once, with its traceback."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path), clock=Clock())
        calls = []

        def unforeseen(content: bytes, where: str) -> None:
            calls.append(where)
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

        monkeypatch.setattr(live_config, "web_config_of", unforeseen)
        path.write_text(users("bob"))
        # Act
        for _ in range(3):
            await settle(live)
        # Assert
        assert len(calls) == 1
        assert [r.exc_info is not None for r in caplog.records if r.levelno >= logging.WARNING] == [
            True
        ]


def count_parses(monkeypatch) -> list[int]:
    """Count the versions ``live_config`` parses (in the one item of the list)."""
    parsed = [0]
    real = live_config.web_config_of

    def counting(content: bytes, path: str) -> WebConfig:
        parsed[0] += 1
        return real(content, path)

    monkeypatch.setattr(live_config, "web_config_of", counting)
    return parsed

    async def test_weaker_version_is_not_tried_again(
        self, tmp_path: Path, monkeypatch, caplog
    ) -> None:
        """Given a version refused as weaker, when the retry time passes many times
        over, then it is not parsed again (it would be refused again), until the file
        changes."""
        # Arrange
        clock = Clock()
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path), clock=clock)
        parsed = count_parses(monkeypatch)
        path.write_text("")
        # Act
        for step in range(5):
            clock.now = step * FAILED_RETRY
            await settle(live)
        path.write_text(users("bob"))
        await settle(live)
        # Assert
        assert parsed == [2]
        assert set(live.current.users) == {"bob"}

    async def test_file_back_to_the_version_in_force_is_not_reloaded(
        self, tmp_path: Path, monkeypatch, caplog
    ) -> None:
        """Given a refused version, when the file is written back to the version in
        force, then it is not parsed again, the failure is over (logged as such), and
        the same refusal later is logged again."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path))
        first = live.current
        parsed = count_parses(monkeypatch)
        caplog.set_level(logging.INFO, logger="wool_idle.web.live_config")
        bad = "basic_auth_users: {alice: not-a-hash}\n"
        # Act
        path.write_text(bad)
        await settle(live)
        path.write_text(users("alice"))
        await settle(live)
        path.write_text(bad + "# again\n")
        await settle(live)
        # Assert
        messages = [r.getMessage().split(":")[0] for r in caplog.records]
        assert live.current is first
        assert parsed == [2]
        assert messages == [
            "keeping the web config loaded before",
            "web config back to the version in force",
            "keeping the web config loaded before",
        ]


class TestLiveWebConfigReload:
    async def test_reload_takes_a_version_seen_once(self, tmp_path: Path) -> None:
        """Given a followed file rewritten with bob, when reloaded (SIGHUP, POST
        /-/reload), then bob is in force at once, without a second look."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path))
        path.write_text(users("alice", "bob"))
        # Act
        failure = await live.reload()
        # Assert
        assert (failure, set(live.current.users)) == ("", {"alice", "bob"})

    async def test_reload_weaker_version_is_named_and_refused(self, tmp_path: Path) -> None:
        """Given a followed file with basic auth, when it is rewritten without it and
        reloaded, then the answer names the file and says it takes a restart, and the
        users stay in force."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(users("alice"))
        live = LiveWebConfig.load(str(path))
        path.write_text("http_server_config: {http2: false}\n")
        # Act
        failure = await live.reload()
        # Assert
        assert failure.startswith(f"web config {path}: ") and "takes a restart" in failure
        assert set(live.current.users) == {"alice"}

    async def test_reload_broken_tls_files_are_named(self, tmp_path: Path, tls_material) -> None:
        """Given a followed HTTPS config whose key file breaks, when reloaded, then the
        answer names the key file (the config itself loaded)."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(tls_config(tmp_path, tls_material))
        live = LiveWebConfig.load(str(path))
        (tmp_path / "server.key").write_text("not a key\n")
        # Act
        failure = await live.reload()
        # Assert
        assert str(tmp_path / "server.key") in failure

    async def test_reload_broken_file_still_reads_the_tls_files_in_force(
        self, tmp_path: Path, tls_material
    ) -> None:
        """Given a followed HTTPS config whose file and key file both break, when
        reloaded, then the answer names both: the TLS files of the config in force are
        read again though the file was refused (each file keeps its last good version,
        the others are taken)."""
        # Arrange
        path = tmp_path / "web.yml"
        path.write_text(tls_config(tmp_path, tls_material))
        live = LiveWebConfig.load(str(path))
        path.write_text("tls_server_config: [\n")
        (tmp_path / "server.key").write_text("not a key\n")
        # Act
        failure = await live.reload()
        # Assert
        assert failure.startswith(f"web config {path}: ")
        assert str(tmp_path / "server.key") in failure
