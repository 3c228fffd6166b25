"""``python -m wool_idle`` runs the ``wool-idle`` command."""

from wool_idle.cli import run

run()
