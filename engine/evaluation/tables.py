"""Tables of results as notebooks show them: a small, self-contained HTML ``<table>``
(escaped, no scripts, no external styles), used by ``_repr_html_``."""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["html_table"]


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
