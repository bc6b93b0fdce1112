"""``slotwise metrics``: the installed metrics, broken plugins listed with the reason; with
``--dialect``, a peer's metric names and the slotwise spec each gives."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.cli.common import Handler, configured_engine
from engine.cli.console import print_blocks

__all__ = ["add"]

DIALECTS = ("ranx", "trec_eval", "ir_measures")


def add(commands: Any) -> dict[str, Handler]:
    listing = commands.add_parser(
        "metrics",
        help="list installed metrics, or a peer's metric names",
        description="List installed metrics (alias, family, description; the distribution "
        "where they come from more than one); broken plugins are listed with the reason. "
        "With --dialect, the metric names of ranx, trec_eval or ir_measures that --metrics "
        "and with_metrics([...]) accept, each with the slotwise spec it gives. Not on a "
        "terminal: one row per line, tab-separated. Tables fit the terminal's width.",
    )
    listing.add_argument("--format", choices=("table", "json"), default="table")
    listing.add_argument(
        "--dialect",
        choices=DIALECTS,
        help="list this peer's metric names (and how a name two dialects share is read)",
    )
    return {"metrics": _metrics}


def _metrics(args: argparse.Namespace) -> int:
    if args.dialect:
        return _dialect(args.dialect, args.format)
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

    distributions = sorted({dist for _, _, dist, _ in rows})
    one = len(distributions) == 1  # the usual case: the distribution goes in the title
    title = f"installed metrics (all from {distributions[0]})" if one else "installed metrics"
    table = Table(title=title, title_justify="left")
    columns = ("alias", "family") if one else ("alias", "family", "distribution")
    for column in columns:
        table.add_column(column, no_wrap=True)
    table.add_column("description", overflow="fold", ratio=1)  # wraps to fit the terminal
    for alias, family, dist, text in rows:
        cells = (alias, family, text) if one else (alias, family, dist, text)
        table.add_row(*cells, style="red" if text.startswith("BROKEN") else None)
    print_blocks([table], fit=True)
    return 0


def _dialect(dialect: str, fmt: str) -> int:
    """A peer's names with their slotwise specs, then the rule for shared names."""
    from engine.evaluation.metric_names import RULE, names

    rows = names(dialect)
    if fmt == "json":
        print(json.dumps([{"name": n, "spec": s} for n, s in rows], indent=2))
        return 0
    if not sys.stdout.isatty():
        for name, spec in rows:
            print(f"{name}\t{spec}")
        return 0
    from rich.table import Table

    title = f"{dialect} names (K: a cutoff)"
    table = Table(title=title, title_justify="left", caption=RULE, caption_justify="left")
    table.add_column(f"{dialect} name", no_wrap=True)
    table.add_column("slotwise spec", overflow="fold", ratio=1)
    for name, spec in rows:
        table.add_row(name, spec, style="red" if spec.startswith("refused") else None)
    print_blocks([table], fit=True)
    return 0
