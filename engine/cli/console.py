"""Printing tables and lines for the command line: a metric label is never wrapped or cut,
in a terminal or in a pipe."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO, Any

from engine.evaluation.tables import plain_console

__all__ = ["print_blocks"]


def print_blocks(
    tables: Sequence[Any],
    lines: Sequence[str] = (),
    *,
    file: IO[str] | None = None,
    fit: bool = False,
) -> str:
    """Print rich tables, then plain lines, to ``file`` (default stdout); returns the text.

    The console is as wide as the widest table needs (at least the terminal's width, or 80
    in a pipe), so no cell is ever wrapped or cut: every table column is ``no_wrap``.
    With ``fit``, the console is the terminal's width and the tables' columns keep their
    own wrapping (for prose columns such as descriptions). A closed pipe (``| head``)
    raises :class:`BrokenPipeError`, which the CLI turns into exit 141.
    """
    from rich.measure import Measurement

    target = file or sys.stdout
    probe = plain_console(file=target)
    unbounded = probe.options.update(width=10_000)
    width = probe.width
    if not fit:
        width = max([width, *(Measurement.get(probe, unbounded, t).maximum for t in tables)])
    console = plain_console(file=target, width=width, record=True)
    try:
        for table in tables:
            for column in getattr(table, "columns", ()):
                column.no_wrap = column.no_wrap or not fit
            console.print(table)
        for line in lines:
            console.print(line, soft_wrap=True)
    except SystemExit:
        if console.quiet:  # rich's answer to a closed pipe: quiet, then exit 1
            raise BrokenPipeError from None
        raise
    return console.export_text()
