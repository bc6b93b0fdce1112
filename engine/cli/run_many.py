"""``slotwise run DATASET|--qrels Q --runs RUN…``: several runs (files, directories, quoted
globs: engine/cli/many.py) each scored as its own system on the same dataset and metrics,
one row per run: the table of each metric's mean, ``--format csv`` the same as CSV,
``--format json`` every run's summary (means, CIs, n, NA)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from engine.cli.common import UsageError, emit, emit_tables
from engine.errors import InputError

if TYPE_CHECKING:
    from engine.evaluation.api import Evaluation
    from engine.evaluation.results import Results

__all__ = ["score_runs"]

FORMATS = ("table", "csv", "json")


def score_runs(evaluation: Evaluation, args: argparse.Namespace) -> int:
    """Each run of ``args.runs`` scored by ``evaluation`` (read as ``--run`` reads one),
    written as ``args.format`` says; exit 3 when a run failed somewhere (as ``run`` for
    one), its failures printed naming the run."""
    from engine.cli.many import expand_runs
    from engine.evaluation.tables import printable
    from engine.io import sources

    if args.format not in FORMATS:
        raise UsageError(f"--runs writes {', '.join(FORMATS)}: one row per run, not {args.format}")
    names = expand_runs(args.runs)
    found = []
    for name in names:
        try:
            run = sources.read_run(name)
            results = evaluation.evaluate(run, strict=args.strict, missing=args.missing)
        except InputError as error:  # which run of the many
            raise InputError(error.problems, f"{name}: {error.summary}") from None
        for label, reason in results.diagnostics.metric_errors.items():
            print(f"slotwise: {name}: metric {label} FAILED: {reason}", file=sys.stderr)
        found.append(results)
    labels = list(found[0].labels)
    if args.format == "json":
        document = {
            "dataset": found[0].dataset_name,
            "runs": [{"run": n, "summary": r.summary()} for n, r in zip(names, found, strict=True)],
        }
        emit(json.dumps(document, indent=2, ensure_ascii=False) + "\n", args.output)
    elif args.format == "csv":
        rows = [",".join(["run", *labels])]
        rows += [
            ",".join([_csv(n), *(_mean(r, label) for label in labels)])
            for n, r in zip(names, found, strict=True)
        ]
        emit("\n".join(rows) + "\n", args.output)
    else:
        emit_tables([_table(names, found, labels, printable)], _notes(names, found), args.output)
    return 3 if any(r.failed for r in found) else 0


def _mean(results: Results, label: str) -> str:
    value = results.aggregates[label]
    return "" if value != value else f"{value:.4f}"  # NaN: NA, an empty cell


def _csv(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n') else text


def _table(names: list[str], found: list[Results], labels: list[str], printable: Any) -> Any:
    from rich.table import Table

    samples = len(found[0].ids)
    table = Table(
        title=f"{printable(found[0].dataset_name or 'dataset')} ({samples} samples): "
        f"{len(names)} runs, each metric's mean",
        title_justify="left",
    )
    table.add_column("run")
    for label in labels:
        table.add_column(label, justify="right")
    for name, results in zip(names, found, strict=True):
        table.add_row(printable(name), *(_mean(results, label) or "NA" for label in labels))
    return table


def _notes(names: list[str], found: list[Results]) -> list[str]:
    """Each run's notes (as ``run`` prints under its table), named."""
    return [
        f"{name}: {note}"
        for name, results in zip(names, found, strict=True)
        for note in results.notes()
    ]
