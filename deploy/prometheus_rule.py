"""Generate the prometheus-operator ``PrometheusRule`` from the Prometheus rules file.

    python -m deploy.prometheus_rule             # writes deploy/kubernetes/prometheusrule.yaml
    python -m deploy.prometheus_rule --output -  # to stdout
    python -m deploy.prometheus_rule --rules FILE  # from another rules file

(run from the repository root). ``dashboards/prometheus/alerts.yml`` is the one
source of the alert rules; the ``PrometheusRule`` carries its groups unchanged
(every value as written, as Prometheus reads it: ``for: 30s`` stays ``"30s"``).
The file is read strictly, as Prometheus's rule loader reads it: a key given
twice, an unknown key, a missing ``expr``, a rule that is both or neither
``alert`` and ``record`` is an error. A file that cannot be read or is malformed
exits 2 with one line naming the file and the key
(``alerts.yml: groups[0].rules[1]: missing key 'expr'``) and writes nothing.
PromQL itself is checked by ``promtool`` in ``tests/deploy``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from wool_idle.exporter.strict_yaml import load_yaml

ROOT: Final = Path(__file__).resolve().parents[1]
RULES: Final = ROOT / "dashboards" / "prometheus" / "alerts.yml"
OUTPUT: Final = ROOT / "deploy" / "kubernetes" / "prometheusrule.yaml"
NAME: Final = "wool-idle"
EXIT_MALFORMED: Final = 2


class MalformedRules(ValueError):
    """The rules file is not a valid Prometheus rules file; the text names the key."""


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise MalformedRules(f"{where}: must be non-empty text")
    return value


def _whole_number(value: Any, where: str) -> int:
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise MalformedRules(f"{where}: must be a whole number >= 0")
    return int(value)


def _labels(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise MalformedRules(f"{where}: must be a mapping of names to text")
    return {
        _text(name, f"{where}: a name"): _text(text, f"{where}.{name}") if text is not None else ""
        for name, text in value.items()
    }


Field = Callable[[Any, str], Any]
GROUP_FIELDS: Final[dict[str, Field]] = {
    "name": _text,
    "interval": _text,
    "query_offset": _text,
    "limit": _whole_number,
    "labels": _labels,
    "rules": lambda value, where: value,  # checked rule by rule below
}
RULE_FIELDS: Final[dict[str, Field]] = {
    "alert": _text,
    "record": _text,
    "expr": _text,
    "for": _text,
    "keep_firing_for": _text,
    "labels": _labels,
    "annotations": _labels,
}
ALERT_ONLY: Final = ("for", "keep_firing_for", "annotations")


def _mapping(value: Any, where: str, fields: dict[str, Field]) -> dict[str, Any]:
    """The keys of ``value`` that are set (null ones left out), each checked."""
    if not isinstance(value, dict):
        raise MalformedRules(f"{where}: must be a mapping")
    unknown = [key for key in value if key not in fields]
    if unknown:
        raise MalformedRules(f"{where}: unknown key {unknown[0]!r}")
    return {
        key: fields[key](item, f"{where}.{key}") for key, item in value.items() if item is not None
    }


def _rule(value: Any, where: str) -> dict[str, Any]:
    rule = _mapping(value, where, RULE_FIELDS)
    kinds = [key for key in ("alert", "record") if key in rule]
    if len(kinds) != 1:
        raise MalformedRules(f"{where}: needs exactly one of the keys 'alert' and 'record'")
    if "expr" not in rule:
        raise MalformedRules(f"{where}: missing key 'expr'")
    misplaced = [key for key in ALERT_ONLY if "record" in rule and key in rule]
    if misplaced:
        raise MalformedRules(f"{where}.{misplaced[0]}: only an alerting rule may set it")
    return rule


def groups_from(document: Any) -> list[dict[str, Any]]:
    """The checked groups of a parsed rules file; ``MalformedRules`` names the key."""
    top = _mapping(document, "top level", {"groups": lambda value, where: value})
    groups = top.get("groups")
    if not isinstance(groups, list):
        raise MalformedRules("groups: must be a list of rule groups")
    checked = []
    for index, value in enumerate(groups):
        where = f"groups[{index}]"
        group = _mapping(value, where, GROUP_FIELDS)
        if "name" not in group:
            raise MalformedRules(f"{where}: missing key 'name'")
        rules = group.get("rules", [])
        if not isinstance(rules, list):
            raise MalformedRules(f"{where}.rules: must be a list of rules")
        group["rules"] = [_rule(rule, f"{where}.rules[{i}]") for i, rule in enumerate(rules)]
        checked.append(group)
    names = [group["name"] for group in checked]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise MalformedRules(f"groups[{index}].name: group {name!r} given twice")
    return checked


def read_groups(path: Path) -> list[dict[str, Any]]:
    """The groups of the rules file at ``path``; ``MalformedRules`` if it does not load."""
    try:
        document = load_yaml(path.read_bytes())
    except OSError as error:
        raise MalformedRules(f"cannot read: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise MalformedRules(f"{line}{problem}") from None
    return groups_from(document)


class _Dumper(yaml.SafeDumper):
    """Block YAML, multi-line text as literal blocks (an expression stays readable)."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_text)


def render(groups: list[dict[str, Any]], source: str) -> str:
    """The ``PrometheusRule`` manifest for ``groups``, with a header naming ``source``."""
    manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": NAME, "labels": {"app.kubernetes.io/name": NAME}},
        "spec": {"groups": groups},
    }
    header = (
        f"# Generated by `python -m deploy.prometheus_rule` from {source}:\n"
        "# edit that file and rerun the generator, never this one (tests/deploy fail on drift).\n"
    )
    body = yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096)
    return header + body


def _shown(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the ``PrometheusRule``; exit 2 naming the file and the key if the rules are bad."""
    parser = argparse.ArgumentParser(
        prog="python -m deploy.prometheus_rule",
        description="Generate the PrometheusRule manifest from the Prometheus rules file.",
    )
    parser.add_argument("--rules", type=Path, default=RULES, help=f"default: {_shown(RULES)}")
    parser.add_argument(
        "--output", default=str(OUTPUT), help=f"a path, or - for stdout (default: {_shown(OUTPUT)})"
    )
    args = parser.parse_args(argv)
    try:
        groups = read_groups(args.rules)
    except MalformedRules as error:
        print(f"{parser.prog}: {args.rules}: {error}", file=sys.stderr)
        return EXIT_MALFORMED
    text = render(groups, _shown(args.rules))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
