"""file_sd documents through our loader and through Prometheus's own (promtool)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from support.prometheus import PrometheusServer

from wool_idle.exporter.file_sd import FileSdError, Syntax, parse_groups, syntax_of
from wool_idle.exporter.targets import TargetsFileError, parse_targets_document

# Prometheus reads a file_sd file in a /probe scrape config like the README's: its
# relabelling moves each target into a parameter, so any target string passes and
# only the document itself is judged (our own address rule is tested elsewhere).
PROBE_CONFIG = """
scrape_configs:
  - job_name: wool-idle-probe
    metrics_path: /probe
    file_sd_configs:
      - files: ["{path}"]
    relabel_configs:
      - source_labels: [__address__]
        target_label: __param_target
      - target_label: __address__
        replacement: 127.0.0.1:9478
"""

G = "- targets: ['a:1']\n"
"""A YAML group with one target, to which a case appends its labels line."""

YAML_CASES = [
    # Labels Prometheus drops after relabelling, and values written as numbers etc.
    ("meta_labels", G + "  labels: {__meta_x: y, __metrics_path__: /m, __name__: n}\n", True),
    ("number_value", G + "  labels: {pool: 3}\n", True),
    (
        "scalars_as_written",
        G + "  labels: {a: 3.0, b: 0x1F, c: yes, d: ~, e: 1e3, f: 2001-12-14}\n",
        True,
    ),
    ("binary_value", G + "  labels: {pool: !!binary aGVsbG8=}\n", True),
    ("binary_not_utf8", G + "  labels: {pool: !!binary /w==}\n", False),
    ("tagged_values", G + "  labels: {a: !!int 3, b: !custom x, c: !!float 1}\n", True),
    ("null_tag_with_text", G + "  labels: {pool: !!null x}\n", False),
    ("list_value", G + "  labels: {pool: [x]}\n", False),
    ("mapping_value", G + "  labels: {pool: {x: 1}}\n", False),
    ("number_name", G + "  labels: {3: x}\n", False),
    ("dash_name", G + "  labels: {'bad-name': x}\n", False),
    ("newline_after_name", G + '  labels: {"pool\\n": x}\n', False),
    ("empty_name", G + "  labels: {'': x}\n", False),
    ("null_name", G + "  labels: {~: x, pool: y}\n", True),
    ("reserved_looking_names", G + "  labels: {worker: x, instance: y, job: z}\n", True),
    ("labels_null", G + "  labels: ~\n", True),
    ("labels_list", G + "  labels: []\n", False),
    ("labels_scalar", G + "  labels: x\n", False),
    ("targets_null", "- targets: ~\n", True),
    ("targets_empty", "- targets: []\n", True),
    ("targets_scalar", "- targets: 'a:1'\n", False),
    ("targets_nested", "- targets: [[a]]\n", False),
    ("empty_group", "- {}\n", True),
    ("null_group", "- ~\n", False),
    ("number_group", "- 1\n", False),
    ("list_group", "- []\n", False),
    ("empty_document", "", True),
    ("null_document", "~\n", True),
    ("empty_list", "[]\n", True),
    ("mapping_document", "{targets: [a:1]}\n", False),
    ("scalar_document", "x\n", False),
    ("capitalised_field", G + "  Targets: ['b:2']\n", False),
    ("field_twice", G + "  targets: ['b:2']\n", False),
    ("label_twice", G + "  labels: {p: x, p: y}\n", False),
    ("unknown_field", G + "  extra: 1\n", False),
    ("anchor_and_alias", "- &g {targets: ['a:1']}\n- *g\n", True),
    ("unknown_alias", G + "  labels: {p: *x}\n", False),
    ("second_document_ignored", G + "---\n- targets: [\n", True),
    ("merge_labels", G + "  labels: {<<: {p: x}, q: y}\n", True),
    ("merge_then_same_key", G + "  labels: {<<: {p: x}, p: y}\n", False),
    ("two_merges_same_key", G + "  labels: {<<: [{p: x}, {p: z}]}\n", False),
    ("key_then_merge_same_key", G + "  labels: {p: x}\n  <<: {labels: {q: y}}\n", True),
    ("byte_order_mark", "\ufeff" + G, True),
    ("tab_indent", G + "\t\n", False),
]

JSON_CASES = [
    ("meta_labels", '[{"targets": ["a:1"], "labels": {"__meta_x": "y"}}]', True),
    ("number_value", '[{"targets": ["a:1"], "labels": {"pool": 3}}]', False),
    ("bool_value", '[{"targets": ["a:1"], "labels": {"pool": true}}]', False),
    ("null_value", '[{"targets": ["a:1"], "labels": {"pool": null}}]', True),
    ("nan_value", '[{"targets": ["a:1"], "labels": {"pool": NaN}}]', False),
    ("labels_null", '[{"targets": ["a:1"], "labels": null}]', True),
    ("labels_list", '[{"targets": ["a:1"], "labels": []}]', False),
    ("targets_null", '[{"targets": null}]', True),
    ("targets_number", '[{"targets": [1]}]', False),
    ("null_group", "[null]", False),
    ("number_group", '[{"targets": ["a:1"]}, 1]', False),
    ("null_document", "null", True),
    ("empty_document", "", False),
    ("empty_list", "[]", True),
    ("empty_group", "[{}]", True),
    ("mapping_document", '{"targets": ["a:1"]}', False),
    ("capitalised_fields", '[{"TARGETS": ["a:1"], "Labels": {"p": "x"}}]', True),
    ("folded_field", '[{"target\u017f": ["a:1"]}]', True),
    ("unknown_field", '[{"targets": ["a:1"], "extra": 1}]', False),
    ("field_twice", '[{"targets": ["a:1"], "targets": ["b:2"]}]', True),
    ("labels_twice", '[{"targets": ["a:1"], "labels": {"p": "x"}, "labels": {"q": "y"}}]', True),
    ("labels_then_null", '[{"targets": ["a:1"], "labels": {"p": "x"}, "labels": null}]', True),
    ("label_twice", '[{"targets": ["a:1"], "labels": {"p": "x", "p": "y"}}]', True),
    ("dash_name", '[{"targets": ["a:1"], "labels": {"bad-name": "x"}}]', False),
    ("newline_after_name", '[{"targets": ["a:1"], "labels": {"pool\\n": "x"}}]', False),
    ("lone_surrogate", '[{"targets": ["a:1"], "labels": {"p": "\\ud800"}}]', True),
    ("nul_character", '[{"targets": ["a:1"], "labels": {"p": "\\u0000"}}]', True),
    ("byte_order_mark", '\ufeff[{"targets": ["a:1"]}]', False),
    ("yaml_in_json_file", "- targets: [a:1]\n", False),
    ("trailing_garbage", '[{"targets": ["a:1"]}] x', False),
]

BYTES_CASES = [
    ("yaml", "utf16_yaml", b"\xff\xfe-\x00 \x00{\x00}\x00\n\x00", True),
    ("yaml", "invalid_utf8_yaml", b"- targets: ['a:1']\n  labels: {p: '\xff'}\n", False),
    ("json", "invalid_utf8_json_value", b'[{"targets": ["a:1"], "labels": {"p": "\xff"}}]', True),
    ("json", "invalid_utf8_json_name", b'[{"targets": ["a:1"], "labels": {"p\xff": "x"}}]', False),
]

CASES = [
    *(pytest.param("yaml", text.encode(), ok, id=f"yaml-{name}") for name, text, ok in YAML_CASES),
    *(
        pytest.param("json", text.encode("utf-8", "surrogatepass"), ok, id=f"json-{name}")
        for name, text, ok in JSON_CASES
    ),
    *(pytest.param(syntax, data, ok, id=name) for syntax, name, data, ok in BYTES_CASES),
]


def promtool_accepts(directory: Path, syntax: Syntax, data: bytes) -> tuple[bool, str]:
    """Whether ``promtool check config`` accepts a /probe job reading ``data`` as a
    file_sd file, and what it printed."""
    binary = shutil.which("promtool")
    assert binary, "Debian's prometheus package is required (scripts/ensure-prometheus)"
    path = directory / ("targets.json" if syntax == "json" else "targets.yml")
    path.write_bytes(data)
    config = directory / "prometheus.yml"
    config.write_text(PROBE_CONFIG.format(path=path))
    done = subprocess.run(
        [binary, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    return done.returncode == 0, done.stdout + done.stderr


def ours_accepts(syntax: Syntax, data: bytes) -> bool:
    try:
        parse_targets_document(data, syntax=syntax)
    except TargetsFileError:
        return False
    return True


class TestParseGroups:
    @pytest.mark.parametrize(("syntax", "data", "accepted"), CASES)
    def test_parse_agrees_with_promtool(
        self, tmp_path: Path, syntax: Syntax, data: bytes, accepted: bool
    ) -> None:
        """Given a file_sd document, when our loader and promtool's read it, then both
        accept it or both reject it (and the table says which)."""
        # Act
        ours = ours_accepts(syntax, data)
        prometheus, output = promtool_accepts(tmp_path, syntax, data)
        # Assert
        assert (ours, prometheus) == (accepted, accepted), output

    def test_promtool_judges_the_file_content(self, tmp_path: Path) -> None:
        """Given a config whose file_sd file has an unknown field, when promtool checks
        the config, then it fails naming that file: the harness above really has
        Prometheus read the document."""
        # Act
        accepted, output = promtool_accepts(tmp_path, "yaml", (G + "  extra: 1\n").encode())
        # Assert
        assert not accepted
        assert f'checking SD file "{tmp_path / "targets.yml"}"' in output

    def test_parse_yaml_values_as_prometheus_has_them(self) -> None:
        """Given YAML label values written as numbers, booleans, dates, null and
        binary, when parsed, then each value is the text as written (null is empty,
        binary decoded), as Prometheus 2.42 shows them in /api/v1/targets."""
        # Arrange
        data = (
            G + "  labels: {a: 3.0, b: 0x1F, c: yes, d: ~, e: 1e3, f: 010,"
            " g: !!int 3, h: 1_000, i: .inf, j: true, k: 2001-12-14, l: '',"
            " m: !!binary aGVsbG8=}\n"
        ).encode()
        # Act
        ((targets, labels),) = parse_groups(data, syntax="yaml")
        # Assert
        assert targets == ["a:1"]
        assert labels == {
            "a": "3.0",
            "b": "0x1F",
            "c": "yes",
            "d": "",
            "e": "1e3",
            "f": "010",
            "g": "3",
            "h": "1_000",
            "i": ".inf",
            "j": "true",
            "k": "2001-12-14",
            "l": "",
            "m": "hello",
        }

    def test_parse_json_fields_as_go_decodes_them(self) -> None:
        """Given JSON with capitalised field names, fields given twice and a lone
        surrogate, when parsed, then fields match case-insensitively, the last one
        given counts and the surrogate is U+FFFD, as Go's decoder has them."""
        # Arrange
        data = (
            b'[{"Targets": ["a:1"], "labels": {"p": "x"}, "LABELS": {"q": "\\ud800"}},'
            b' {"targets": ["b:2"], "targets": ["c:3"]}]'
        )
        # Act
        groups = parse_groups(data, syntax="json")
        # Assert
        assert groups == [(["a:1"], {"q": "\ufffd"}), (["c:3"], {})]

    def test_parse_error_names_the_group(self) -> None:
        """Given a document whose second group is bad, when parsed, then the error
        names that group and the problem."""
        # Act / Assert
        with pytest.raises(FileSdError, match="group 1: 'bad-name' is not a valid label name"):
            parse_groups(b"- targets: []\n- labels: {bad-name: x}\n", syntax="yaml")

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            (
                b'- targets: ["a:1"]\n  labels: {pool: a\n',
                r"^line 3: not valid YAML: .*expected ',' or '}'",
            ),
            (
                b'- targets: ["a:1"]\n  labels: {pool: a, pool: b}\n',
                "^line 2: .*'pool' already set",
            ),
        ],
    )
    def test_parse_yaml_error_names_the_line(self, data: bytes, message: str) -> None:
        """Given a YAML document cut inside a mapping, or with a key given twice, when
        parsed, then the error names the line and the problem (the parser's first line
        of text, "while parsing a flow mapping", says neither), so a long file can be
        fixed."""
        # Act / Assert
        with pytest.raises(FileSdError, match=message):
            parse_groups(data, syntax="yaml")


class TestSyntaxOf:
    @pytest.mark.parametrize(
        ("path", "syntax"),
        [
            ("t.json", "json"),
            ("T.JSON", "json"),
            ("t.yml", "yaml"),
            ("t.yaml", "yaml"),
            ("t", "yaml"),
        ],
    )
    def test_syntax_of_extension(self, path: str, syntax: Syntax) -> None:
        """Given a file name, then .json is read as JSON and anything else as YAML."""
        assert syntax_of(path) == syntax


class TestParseGroupsAgainstPrometheus:
    @pytest.mark.e2e
    def test_labels_match_a_running_prometheus(self, tmp_path: Path) -> None:
        """Given a YAML and a JSON file_sd file with labels written as numbers, dates,
        binary, null, merged, capitalised and escaped, when a real Prometheus server
        discovers them, then every target has exactly the series labels our loader
        gives it (Prometheus's own, minus job and instance)."""
        # Arrange
        yaml_file, json_file = tmp_path / "workers.yml", tmp_path / "workers.json"
        yaml_file.write_text(
            "- targets: ['a:1', 'b:2']\n"
            "  labels: {a: 3.0, b: 0x1F, c: yes, d: ~, e: 1e3, f: 010, g: !!int 3,"
            " h: 1_000, i: .inf, j: true, k: 2001-12-14, l: '', m: !!binary aGVsbG8=,"
            " n: !custom x, __meta_x: y}\n"
            "- targets: ['c:3']\n"
            "  <<: {labels: {merged: 'yes'}}\n"
        )
        json_file.write_text(
            '[{"Targets": ["d:4"], "labels": {"p": "x"},'
            ' "LABELS": {"q": "\\u00e9\\ud800", "r": null}}, {"targets": ["e:5"]},'
            ' {"targets": ["f:6"], "labels": {"p": "x"}, "labels": null}]'
        )
        config = {
            "global": {"scrape_interval": "1h"},
            "scrape_configs": [
                {
                    "job_name": "wool-idle-probe",
                    "metrics_path": "/probe",
                    "file_sd_configs": [
                        {"files": [str(yaml_file), str(json_file)], "refresh_interval": "1s"}
                    ],
                    "relabel_configs": [
                        {"source_labels": ["__address__"], "target_label": "__param_target"},
                        {"target_label": "__address__", "replacement": "127.0.0.1:9"},
                    ],
                }
            ],
        }
        ours = {
            target.address: dict(target.labels)
            for path, syntax in ((yaml_file, "yaml"), (json_file, "json"))
            for target in parse_targets_document(path.read_bytes(), syntax=syntax)
        }
        server = PrometheusServer(tmp_path, config, {})
        server.start()
        # Act
        try:
            discovered: dict[str, dict[str, str]] = {}
            deadline = time.monotonic() + 60  # a hang detector, not a timing assertion
            while set(discovered) != set(ours) and time.monotonic() < deadline:
                time.sleep(0.2)
                active = server.api("targets", state="active")["data"]["activeTargets"]
                discovered = {
                    parse_qs(urlsplit(t["scrapeUrl"]).query)["target"][0]: {
                        k: v for k, v in t["labels"].items() if k not in ("job", "instance")
                    }
                    for t in active
                }
        finally:
            server.stop()
        # Assert
        assert discovered == ours
        assert ours["a:1"]["a"] == "3.0" and ours["d:4"] == {"q": "\u00e9\ufffd"}
