"""Printing tables and lines for the command line: a metric label is never wrapped or cut,
in a terminal or in a pipe."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO, Any

__all__ = ["print_blocks"]


def print_blocks(
    tables: Sequence[Any], lines: Sequence[str] = (), *, file: IO[str] | None = None
) -> str:
    """Print rich tables, then plain lines, to ``file`` (default stdout); returns the text.

    The console is as wide as the widest table needs (at least the terminal's width, or 80
    in a pipe), so no cell is ever wrapped or cut: every table column is ``no_wrap``.
    """
    from rich.console import Console
    from rich.measure import Measurement

    target = file or sys.stdout
    probe = Console(file=target)
    unbounded = probe.options.update(width=10_000)
    width = max([probe.width, *(Measurement.get(probe, unbounded, t).maximum for t in tables)])
    console = Console(file=target, width=width, record=True)
    for table in tables:
        for column in getattr(table, "columns", ()):
            column.no_wrap = True
        console.print(table)
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    return console.export_text()
