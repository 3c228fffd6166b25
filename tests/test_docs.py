"""What the documentation names exists, and what an operator needs is documented.

The docs an operator reads (README.md, docs/*.md but the benchmark figures),
the deploy files and the dashboards are checked against the code as it is: every
flag they name is a flag (of the subcommand a command line names), every
``WOOL_IDLE_*`` variable is one a subcommand reads, every ``wool_*`` series is
one the code defines (a counter only with ``_total``), every link and anchor
resolves, every repository path and every test named exists, and
docs/architecture.md names every module. The other way round, every flag and
every series is in the README or docs/operations.md. Each subcommand's --help
names none of the code's own constants.
"""

from __future__ import annotations

import ast
import collections
import re
import subprocess
from pathlib import Path

import pytest
from support.worker_shutdown import worker_shutdown_at_most

from wool_idle import contract
from wool_idle.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "wool_idle"
OPERATOR_DOCS = ("README.md", "docs/operations.md")
"""Where an operator looks for a flag or a series."""
FOREIGN_FLAGS = {"--web.enable-remote-write-receiver"}
"""Other programs' flags the docs name in code spans of their own (Prometheus's)."""
EXAMPLE_VARIABLES = {"WOOL_IDLE_DRYRUN"}
"""Misspelt names the docs show on purpose (what the unknown-variable check says)."""
SERVICE_LINK = re.compile(r"WOOL_IDLE_(SERVICE_HOST|PORT(_[*…])?)\Z")
"""Kubernetes service-link variables, named where the docs say why links are off."""
SERIES = re.compile(
    r"(?<![\w.])wool_(?:worker|exporter|autoscaler)_[a-z_]*[a-z]|wool_idle_build_\w+"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE_ANCHOR = re.compile(r"([\w./-]*\.md)#([\w-]+)")
FOREIGN_PATHS = {"deploy/wool-idle-autoscaler"}
"""Look-alikes of repository paths: kubectl's ``deploy/NAME`` (a Deployment)."""
REPO_PATH = re.compile(
    r"(?<![\w/.:-])((?:deploy|dashboards|docs|wool_idle|tests|scripts|bench)/[\w./@-]*)"
)


def tracked(*paths: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [ROOT / name for name in listed.stdout.split()]


def documents() -> list[Path]:
    """The docs an operator reads, with the deploy files and dashboards."""
    docs = [ROOT / "README.md"]
    docs += [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "benchmarks.md"]
    return docs + tracked("deploy", "dashboards")


def where(path: Path, text: str, index: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, index) + 1}"


def flags_by_command() -> dict[str, set[str]]:
    return {
        name: {o for flag in parser.flags for o in (flag.name, *flag.aliases)}
        | {"--help", "--version"}
        for name, parser in build_parser().subcommands.items()
    }


def variables() -> set[str]:
    return {
        flag.variable
        for parser in build_parser().subcommands.values()
        for flag in parser.flags
        if flag.variable
    }


def variable_named(name: str, known: set[str]) -> bool:
    """Whether ``name`` is a known variable, a pattern of some (``WOOL_IDLE_TLS_*``),
    the prefix itself, or a service link."""
    if name == "WOOL_IDLE_" or SERVICE_LINK.match(name):
        return True
    if name.endswith(("*", "…")):
        return any(variable.startswith(name[:-1]) for variable in known)
    return name in known


def series() -> set[str]:
    """Every series the code defines: each series name written in the package, a
    counter's (the first argument of ``Counter`` or ``CounterMetricFamily``) with
    ``_total`` (and, for a ``Counter``, the ``_created`` prometheus-client adds)."""
    names: set[str] = set()
    counters: dict[str, tuple[str, ...]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names |= {node.value} if SERIES.fullmatch(node.value) else set()
            elif isinstance(node, ast.Call) and node.args:
                kind = getattr(node.func, "id", getattr(node.func, "attr", ""))
                first = node.args[0]
                if isinstance(first, ast.Name):  # a contract constant
                    first = ast.Constant(getattr(contract, first.id, None))
                named = isinstance(first, ast.Constant) and SERIES.fullmatch(str(first.value))
                if named and kind in ("Counter", "CounterMetricFamily"):
                    suffixes = ("_total", "_created") if kind == "Counter" else ("_total",)
                    counters[str(first.value)] = suffixes
    return (names - set(counters)) | {c + s for c, suffixes in counters.items() for s in suffixes}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, blanks to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: collections.Counter[str] = collections.Counter()
    fenced = False
    for line in path.read_text().splitlines():
        fenced ^= line.startswith("```")
        heading = re.match(r"#+ (.*)", line)
        if heading and not fenced:
            name = slug(heading.group(1))
            found.add(f"{name}-{seen[name]}" if seen[name] else name)
            seen[name] += 1
    return found


def module_names() -> set[str]:
    return {
        p.stem
        for p in PACKAGE.rglob("*.py")
        if p.stem not in ("__init__", "__main__") and not p.stem.endswith("_pb2")
    }


class TestNamesInDocs:
    def test_every_flag_named_exists(self) -> None:
        """Given every doc, then each flag in a code span of its own is a flag of some
        subcommand, and each flag on a `wool-idle SUBCOMMAND ...` line is one of that
        subcommand."""
        # Arrange
        by_command = flags_by_command()
        every = set().union(*by_command.values()) | FOREIGN_FLAGS
        command = re.compile(r"wool-idle (" + "|".join(by_command) + r")\b((?:\\\n|[^`|\n#])*)")
        wrong = []
        # Act
        for path in documents():
            text = path.read_text()
            for span in re.finditer(r"`(--[a-z][\w.-]*)", text):
                if span.group(1) not in every:
                    wrong.append(f"{where(path, text, span.start())}: {span.group(1)}")
            for line in command.finditer(text):
                for flag in re.findall(r"(?<![\w-])--[a-z][\w.-]*[a-z0-9]", line.group(2)):
                    if flag not in by_command[line.group(1)]:
                        wrong.append(f"{where(path, text, line.start())}: {line.group(1)} {flag}")
        # Assert
        assert wrong == []

    def test_every_variable_named_is_read(self) -> None:
        """Given every doc, then each WOOL_IDLE_* name in it is the variable of a flag,
        and each pattern (WOOL_IDLE_TLS_*) the start of one (but a misspelling shown on
        purpose, a service link)."""
        # Arrange
        known = variables() | EXAMPLE_VARIABLES
        # Act
        wrong = [
            f"{where(path, text, m.start())}: {m.group(0)}"
            for path in documents()
            for text in [path.read_text()]
            for m in re.finditer(r"WOOL_IDLE_[A-Z0-9_]*[*…]?", text)
            if not variable_named(m.group(0), known)
        ]
        # Assert
        assert wrong == []

    def test_every_series_named_exists(self) -> None:
        """Given every doc, dashboard and rule, then each wool_* series name in it is
        one the code defines (a counter with its _total)."""
        # Arrange
        defined = series()
        # Act
        wrong = [
            f"{where(path, text, m.start())}: {m.group(0)}"
            for path in documents()
            for text in [path.read_text()]
            for m in SERIES.finditer(text)
            if m.group(0) not in defined
        ]
        # Assert
        assert wrong == []

    def test_every_link_and_anchor_resolves(self) -> None:
        """Given every Markdown file and every file naming a doc, then each relative
        link leads to a file, and each #anchor (linked, or written as
        docs/x.md#anchor) to a heading of that file."""
        # Arrange
        files = [ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")]
        wrong = []
        # Act
        for path in files + tracked("deploy", "dashboards"):
            text = path.read_text()
            targets = [(m.start(), *m.group(1).partition("#")[::2]) for m in LINK.finditer(text)]
            targets += [(m.start(), m.group(1), m.group(2)) for m in BARE_ANCHOR.finditer(text)]
            for index, name, anchor in targets:
                if name.startswith(("http://", "https://", "mailto:")):
                    continue
                candidates = [path.parent / name, ROOT / name, ROOT / "docs" / name]
                target = path if not name else next((c for c in candidates if c.exists()), None)
                if target is None or (
                    anchor and target.suffix == ".md" and anchor not in anchors(target)
                ):
                    wrong.append(f"{where(path, text, index)}: {name}#{anchor}")
        # Assert
        assert wrong == []

    def test_every_repository_path_named_exists(self) -> None:
        """Given every doc, then each path into the repository it names exists."""
        # Act
        wrong = [
            f"{where(path, text, m.start())}: {m.group(1)}"
            for path in documents()
            for text in [path.read_text()]
            for m in REPO_PATH.finditer(text)
            if not (ROOT / m.group(1).rstrip(".,")).exists() and m.group(1) not in FOREIGN_PATHS
        ]
        # Assert
        assert wrong == []

    def test_every_test_named_exists(self) -> None:
        """Given every doc, then each test or test class it names as holding a promise
        (`test_...`, `Test...`) is defined under tests/."""
        # Arrange
        defined = {
            node.name
            for path in (ROOT / "tests").rglob("test_*.py")
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        # Act
        wrong = [
            f"{where(path, text, m.start())}: {m.group(1)}"
            for path in documents()
            for text in [path.read_text()]
            for m in re.finditer(r"`(test_\w+|Test[A-Z]\w+)`", text)
            if m.group(1) not in defined
        ]
        # Assert
        assert wrong == []

    def test_wool_release_before_idle_is_named_alike(self) -> None:
        """Given every doc, rule and module (the package's and the tests' helpers), then
        each release it names as the first wool without the idle RPC (`wool < X`, `a
        wool worker older than X`) is the same, the one wool.md's release table says
        first has it (0.14)."""
        # Arrange
        before = re.compile(r"wool\s+(?:worker\s+)?(?:<|older\s+than)\s+(\d+\.\d+)")
        helpers = sorted((ROOT / "tests" / "support").glob("*.py"))
        files = documents() + sorted(PACKAGE.rglob("*.py")) + helpers
        # Act
        named = {
            f"{where(path, text, m.start())}: {m.group(1)}"
            for path in files
            for text in [path.read_text()]
            for m in before.finditer(text)
            if m.group(1) != "0.14"
        }
        # Assert
        assert named == set()


class TestShutdownInDocs:
    def test_worker_stop_timeout_names_the_whole_shutdown(self) -> None:
        """Given every paragraph of the docs that names the worker's stop timeout
        (`TimeoutStopSec=60s`, `terminationGracePeriodSeconds: 60`), then it names the
        worker's longest shutdown at the default grace, which that timeout must cover."""
        # Arrange
        worst = f"{worker_shutdown_at_most(contract.DEFAULT_GRACE):g} s at worst"
        timeout = re.compile(r"TimeoutStopSec=60s|terminationGracePeriodSeconds: 60\b")
        # Act
        wrong = [
            f"{path.relative_to(ROOT)}: {paragraph[:60]!r}"
            for path in documents()
            if path.suffix == ".md"
            for paragraph in re.split(r"\n\s*\n", path.read_text())
            if timeout.search(paragraph) and worst not in " ".join(paragraph.split())
        ]
        # Assert
        assert wrong == []


class TestOperatorDocsComplete:
    @pytest.mark.parametrize(
        ("command", "flag"),
        [
            (command, flag.name)
            for command, parser in build_parser().subcommands.items()
            for flag in parser.flags
        ],
    )
    def test_every_flag_is_documented(self, command: str, flag: str) -> None:
        """Given a subcommand's flag, then the README or docs/operations.md names it."""
        text = "".join((ROOT / name).read_text() for name in OPERATOR_DOCS)
        assert re.search(re.escape(flag) + r"(?![\w.-])", text)

    def test_every_series_is_documented(self) -> None:
        """Given every series the code defines (but the _created prometheus-client adds),
        then the README or docs/operations.md names it."""
        # Arrange
        text = "".join((ROOT / name).read_text() for name in OPERATOR_DOCS)
        # Act
        missing = sorted(
            name
            for name in series()
            if not name.endswith("_created") and not re.search(rf"\b{name}\b", text)
        )
        # Assert
        assert missing == []

    def test_architecture_names_every_module(self) -> None:
        """Given docs/architecture.md, then it names every module of the package (but
        the generated protocol module), and each module or path it names exists."""
        # Arrange
        text = re.sub(r"```.*?```", "", (ROOT / "docs" / "architecture.md").read_text(), flags=re.S)
        spans = set(re.findall(r"`([^`\n]+)`", text))
        named = spans | {span.split(".")[0] for span in spans}  # connection.WorkerConnection
        # Act
        unnamed = sorted(name for name in module_names() if not {name, f"{name}.py"} & named)
        bases = [ROOT, PACKAGE, *PACKAGE.iterdir(), *(ROOT / "tests").iterdir()]
        paths = {s for s in spans if re.fullmatch(r"[\w/]+(\.py|/)", s)}
        absent = sorted(s for s in paths if not any(base.joinpath(s).exists() for base in bases))
        # Assert
        assert (unnamed, absent) == ([], [])


def constant_names() -> set[str]:
    """The package's module-level UPPER_CASE names with an underscore (its constants;
    not one-word metavariables such as DURATION)."""
    return {
        target.id
        for path in PACKAGE.rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+", target.id)
    }


class TestHelp:
    @pytest.mark.parametrize("command", sorted(build_parser().subcommands))
    def test_help_names_nothing_internal(self, command: str) -> None:
        """Given a subcommand's --help, then it names none of the package's constants
        and no attribute of the parsed arguments: an operator reads it, not the code."""
        # Act
        text = build_parser().subcommands[command].format_help()
        # Assert
        internal = sorted(n for n in constant_names() if re.search(rf"\b{n}\b", text))
        assert (internal, re.findall(r"\bargs\.\w+", text)) == ([], [])
