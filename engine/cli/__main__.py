"""``python -m engine.cli``: the ``slotwise`` program."""

from engine.cli import program

program()
