"""Tables of results as notebooks show them: a small, self-contained HTML ``<table>``
(escaped, no scripts, no external styles), used by ``_repr_html_``; and as a plain script
or the REPL shows them: a rich Table whose ``str()`` and ``repr()`` are its text, printed
by a console that shows the user's text as written (no markup, control characters
escaped)."""

from __future__ import annotations

import functools
import html
import io
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["html_table", "plain_console", "printable", "render_text", "text_table"]


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its terminal control characters escaped (ESC as ``\\x1b``, a tab as
    ``\\t``): a terminal shows them rather than runs them."""
    return _CONTROLS.sub(lambda found: repr(found.group())[1:-1], text)


def plain_console(**options: Any) -> Any:
    """A rich ``Console(**options)`` that prints the text of a cell, a title or a line as
    written: never read as markup (``[/]``, ``[bold]``) or emoji codes (``:x:``), its
    control characters escaped (:func:`printable`), for ids, metadata values, labels and
    file names are the user's."""
    return _plain_console_class()(markup=False, emoji=False, **options)


@functools.cache
def _plain_console_class() -> type[Any]:
    from rich.console import Console

    class PlainConsole(Console):
        def render_str(self, text: str, **options: Any) -> Any:
            return super().render_str(printable(text), **options)

    return PlainConsole


def render_text(renderable: Any) -> str:
    """A rich renderable as plain text, as wide as it needs (no colour, nothing cut)."""
    from rich.measure import Measurement

    probe = plain_console(file=io.StringIO(), width=10_000)
    width = Measurement.get(probe, probe.options, renderable).maximum
    console = plain_console(file=io.StringIO(), width=max(width, 20), color_system=None)
    console.print(renderable)
    return console.file.getvalue().rstrip("\n")  # type: ignore[no-any-return]


@functools.cache
def _text_table_class() -> type[Any]:
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    class TextTable(Table):
        """A rich Table that prints as its text: ``print(table)`` in a script, the table
        itself at the REPL's prompt; a rich console renders it as any Table. ``notes``
        are lines printed under it, never wrapped."""

        notes: Sequence[str] = ()

        def __rich_console__(self, console: Any, options: Any) -> Any:
            yield from super().__rich_console__(console, options)
            for note in self.notes:
                yield Text(printable(note), no_wrap=True, overflow="ignore")

        def __rich_measure__(self, console: Any, options: Any) -> Any:
            found = super().__rich_measure__(console, options)
            widest = max((len(printable(note)) for note in self.notes), default=0)
            return Measurement(found.minimum, max(found.maximum, widest))

        def __str__(self) -> str:
            return render_text(self)

        __repr__ = __str__

    return TextTable


def text_table(notes: Sequence[str] = (), **options: Any) -> Any:
    """A new rich ``Table(**options)`` that prints as its text (``str``, ``repr``), with
    ``notes`` under it."""
    table = _text_table_class()(**options)
    table.notes = tuple(notes)
    return table


def html_table(
    caption: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    row_colors: Sequence[str | None] | None = None,
) -> str:
    """An HTML table: first column left-aligned, the others right-aligned; each row
    optionally coloured (a CSS colour, or None)."""

    def cell(tag: str, index: int, text: str) -> str:
        align = "left" if index == 0 else "right"
        return f'<{tag} style="text-align: {align}">{html.escape(text)}</{tag}>'

    head = "".join(cell("th", i, c) for i, c in enumerate(columns))
    body = []
    for position, row in enumerate(rows):
        color = row_colors[position] if row_colors is not None else None
        style = f' style="color: {color}"' if color else ""
        body.append(f"<tr{style}>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>")
    return (
        f'<table class="slotwise"><caption style="text-align: left">{html.escape(caption)}'
        f"</caption><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
