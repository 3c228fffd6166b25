"""The command-line mechanism every subcommand uses.

- ``Parser``: an error is one line on stderr and exit 2; every parser answers
  ``--version``; flags are added in titled sections and their defaults are
  read from the settings dataclasses the subcommand names, so a default is
  written once (``settings_from`` builds those dataclasses back from the flags).
- Environment variables (``flag.Flag.variable``) are read only by the
  subcommand in use, after its command line, through the flag's own value
  type: a bad one exits 2 naming the flag and the variable, even when the
  command line sets the flag (fail closed: a bad value is never overlooked);
  otherwise the command line wins over the environment.
- A ``WOOL_IDLE_*`` variable (any case) that no subcommand reads exits 2
  naming it (see ``environment``): a misspelt safety switch never goes unseen;
  so does one that 0.1.0 read for a flag this version takes elsewhere, unless
  the flag is given (``flag.Flag.former_variable``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import typing
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn, TypeVar

from wool_idle import __version__
from wool_idle.cli.environment import unread_variables
from wool_idle.cli.flag import REQUIRED, Flag, environment_variable, unrecognized
from wool_idle.cli.values import Value

if typing.TYPE_CHECKING:
    from _typeshed import DataclassInstance

    S = TypeVar("S", bound=DataclassInstance)

USAGE_ERROR: Final = 2
FROM_SETTINGS: Final[Any] = object()
"""Read the default from the settings dataclass field of the flag's name."""
_UNSET: Final = object()


def help_from_docstring(docstring: str | None) -> str:
    """A docstring as ``--help`` text: without reStructuredText literals."""
    return (docstring or "").replace("``", "")


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` with one-line errors, ``--version``, sections and
    environment variables (see the module docstring)."""

    def __init__(self, *, settings: Sequence[type[Any]] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = tuple(settings)
        self.flags: list[Flag] = []
        self.subcommands: dict[str, Parser] = {}
        self._commands: Any = None
        self._exclusive: list[tuple[str, ...]] = []
        self.add_argument(
            "--version",
            action="version",
            version=f"wool-idle {__version__}",
            help="print the version and exit",
        )

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(USAGE_ERROR)

    def add_subcommand(
        self, name: str, *, help: str, description: str, settings: Sequence[type[Any]] = ()
    ) -> Parser:
        """Add subcommand ``name``; its flag defaults come from ``settings`` dataclasses."""
        if self._commands is None:
            self._commands = self.add_subparsers(
                dest="command", required=True, parser_class=Parser, metavar="COMMAND"
            )
        parser: Parser = self._commands.add_parser(
            name, help=help, description=description, settings=settings
        )
        self.subcommands[name] = parser
        return parser

    def section(
        self, title: str, description: str | None = None, *, settings: Sequence[type[Any]] = ()
    ) -> Section:
        """A titled group of flags in ``--help``; ``settings`` give defaults before the parser's."""
        return Section(self, title, description, (*settings, *self.settings))

    def add_positional(self, name: str, value: Value[Any], help: str) -> None:
        """Add positional argument ``name`` (command line only) taking ``value``."""
        self.add_argument(name, type=_command_line_type(value.parse, name), help=help)

    def mutually_exclusive(self, *names: str) -> None:
        """At most one of the flags ``names`` may be set (command line or environment)."""
        self._exclusive.append(names)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse the command line, then fill what it left out from the environment
        and the defaults. Subcommands run this for themselves only."""
        parsed, rest = super().parse_known_args(args, namespace)
        if rest and not self.subcommands:  # a subcommand: its prog, the flag likely meant
            self.error(unrecognized(rest, self._option_string_actions))
        if self.subcommands:
            self._refuse_unread_variables()
        waived = any(f.waives_required and hasattr(parsed, f.dest) for f in self.flags)
        explicit = set()
        for flag in self.flags:
            from_environment = self._read_environment(flag)
            if hasattr(parsed, flag.dest):
                explicit.add(flag.name)
            elif from_environment is not _UNSET:
                setattr(parsed, flag.dest, from_environment)
                explicit.add(flag.name)
            elif flag.default is REQUIRED and not waived:
                self.error(f"the following arguments are required: {flag.label}")
            elif refused := flag.former_variable_error(os.environ):
                self.error(refused)
            else:
                setattr(parsed, flag.dest, flag.default)
        for names in self._exclusive:
            given = [f for f in self.flags if f.name in names and f.name in explicit]
            if len(given) > 1:
                self.error(f"argument {given[1].label}: not allowed with argument {given[0].label}")
        return parsed, rest

    def add_flag(self, flag: Flag, container: Any) -> None:
        """Add ``flag`` to ``container`` (this parser or one of its groups). A
        required flag is not argparse's ``required``: ``parse_known_args`` checks it
        after the environment, unless a flag that waives it was given."""
        kwargs: dict[str, Any] = {
            "dest": flag.dest,
            "default": argparse.SUPPRESS,
            "help": flag.describe(),
        }
        if flag.value is None:
            kwargs["action"] = "store_true"
        else:
            kwargs.update(
                type=_command_line_type(flag.parse, flag.dest), metavar=flag.value.metavar
            )
            if flag.repeatable:
                kwargs["action"] = "extend"
        container.add_argument(flag.name, *flag.aliases, **kwargs)
        self.flags.append(flag)

    def _refuse_unread_variables(self) -> None:
        """Exit 2 naming any ``WOOL_IDLE_*`` variable no subcommand reads."""
        flags = [flag for parser in self.subcommands.values() for flag in parser.flags]
        known = {flag.variable for flag in flags if flag.variable}
        command_line_only = {
            environment_variable(name): f"{name} is read from the command line only"
            for name in ("--version", "--help", *(f.name for f in flags if not f.variable))
        }
        message = unread_variables(os.environ, known, command_line_only)
        if message:
            self.error(message)

    def _read_environment(self, flag: Flag) -> Any:
        if flag.variable is None or flag.variable not in os.environ:
            return _UNSET
        try:
            return flag.parse(os.environ[flag.variable])
        except ValueError as error:
            self.error(f"argument {flag.label} (from {flag.variable}): {error}")


class Section:
    """Flags shown together under a title in ``--help``."""

    def __init__(
        self, parser: Parser, title: str, description: str | None, settings: Sequence[type[Any]]
    ) -> None:
        self.parser = parser
        self.settings = tuple(settings)
        self._group = parser.add_argument_group(title, description)

    def add(
        self,
        name: str,
        value: Value[Any] | None,
        help: str,
        *,
        default: Any = FROM_SETTINGS,
        aliases: tuple[str, ...] = (),
        repeatable: bool = False,
        environment: bool = True,
        waives_required: bool = False,
        former_variable: str | None = None,
    ) -> None:
        """Add flag ``name`` taking ``value`` (None: a switch) with ``help``.

        The default, unless given, is the settings field of the flag's name;
        a field without default makes the flag required (see ``Flag`` for the rest).
        """
        flag = Flag(
            name=name,
            help=help,
            value=value,
            default=default,
            aliases=aliases,
            repeatable=repeatable,
            environment=environment,
            waives_required=waives_required,
            former_variable=former_variable,
        )
        if default is FROM_SETTINGS:
            flag = dataclasses.replace(flag, default=self._settings_default(flag))
        self.parser.add_flag(flag, self._group)

    def _settings_default(self, flag: Flag) -> Any:
        for settings in self.settings:
            for field in dataclasses.fields(settings):
                if field.name != flag.dest:
                    continue
                if field.default_factory is not dataclasses.MISSING:
                    return field.default_factory()
                return field.default
        raise TypeError(f"{flag.name}: no settings field {flag.dest!r} and no default given")


def settings_from(args: argparse.Namespace, cls: type[S], **given: Any) -> S:
    """The settings dataclass ``cls`` with each field from the flag of its name
    (lists as tuples), and ``given`` for the fields no flag fills."""
    values = {
        field.name: tuple(value) if isinstance(value, list) else value
        for field in dataclasses.fields(cls)
        if field.init
        and field.name not in given
        and (value := getattr(args, field.name, _UNSET)) is not _UNSET
    }
    return cls(**values, **given)


def _command_line_type(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """``parse`` with its ``ValueError`` as argparse's one-line error."""

    def checked(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    checked.__name__ = name
    return checked
