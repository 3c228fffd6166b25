"""The ``wool_idle`` package: what it exports."""

from __future__ import annotations

import inspect

import wool_idle
from wool_idle import exceptions


class TestPackageExports:
    def test_getattr_every_error_of_the_tree(self) -> None:
        """Given the error tree of wool_idle.exceptions, when each error is looked up on
        wool_idle, then it is there and listed in __all__ (MalformedReply, TaskAborted,
        OutcomeTooLarge and TaskOutcomeLost, which a caller of dispatch catches, were
        an AttributeError)."""
        # Arrange
        errors = {
            name
            for name, value in vars(exceptions).items()
            if inspect.isclass(value) and issubclass(value, exceptions.WoolError)
        }
        # Act
        found = {name: getattr(wool_idle, name, None) for name in errors}
        # Assert
        assert found == {name: getattr(exceptions, name) for name in errors}
        assert errors <= set(wool_idle.__all__)
