"""``slotwise metrics``: the installed metrics, broken plugins listed with the reason."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.cli.common import Handler, configured_engine
from engine.cli.console import print_blocks

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    listing = commands.add_parser(
        "metrics",
        help="list installed metrics",
        description="List installed metrics (alias, family, distribution, description); "
        "broken plugins are listed with the reason. Not on a terminal: one metric per "
        "line, tab-separated.",
    )
    listing.add_argument("--format", choices=("table", "json"), default="table")
    return {"metrics": _metrics}


def _metrics(args: argparse.Namespace) -> int:
    infos = configured_engine(args.config).metrics()
    if args.format == "json":
        import attrs

        print(json.dumps([attrs.asdict(i) for i in infos], indent=2))
        return 0
    rows = []
    for info in infos:
        dist = f"{info.distribution or '?'} {info.version or ''}".strip()
        text = f"BROKEN: {info.error}" if info.error else info.description or ""
        rows.append((info.alias, info.family or "", dist, text))
    if not sys.stdout.isatty():  # one metric per line, for grep, cut and awk
        for row in rows:
            print("\t".join(" ".join(cell.split()) for cell in row))
        return 0
    from rich.table import Table

    table = Table(title="installed metrics", title_justify="left")
    for column in ("alias", "family", "distribution"):
        table.add_column(column, no_wrap=True)
    table.add_column("description", overflow="fold")  # wraps to fit the terminal
    for alias, family, dist, text in rows:
        table.add_row(alias, family, dist, text, style="red" if text.startswith("BROKEN") else None)
    print_blocks([table], fit=True)
    return 0
