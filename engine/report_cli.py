"""The comparison and report commands of the ``slotwise`` program: ``compare`` (paired
significance tests between results files, with a regression gate) and ``report`` (a
self-contained HTML report). :func:`add_commands` adds them to the program's subparsers
and returns their handlers; a handler returns the exit code and raises
:class:`~engine.SlotwiseError` subclasses for bad input."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.argtypes import non_negative, positive_int, probability
from engine.breakdown import by, curve_labels, curve_table
from engine.compare import Comparison, compare, read_results
from engine.console import print_blocks
from engine.errors import InputError, Problem
from engine.fileio import atomic_write
from engine.results import Results
from engine.stats import DEFAULT_SEED, DEFAULT_TEST_RESAMPLES, TESTS

__all__ = ["EXIT_REGRESSION", "add_commands", "parse_cutoffs", "run_tables"]

Handler = Callable[[argparse.Namespace], int]

EXIT_REGRESSION = 1


def parse_cutoffs(text: str) -> list[int]:
    """``--k`` values: one positive integer, or several separated by commas (a curve)."""
    cutoffs = []
    for part in text.split(","):
        try:
            value = int(part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a positive integer or a comma-separated list of them, got {text!r}"
            ) from None
        if value <= 0:
            raise argparse.ArgumentTypeError(
                f"must be a positive integer or a comma-separated list of them, got {text!r}"
            )
        cutoffs.append(value)
    return list(dict.fromkeys(cutoffs))


def run_tables(results: Results, by_key: str | None = None) -> list[Any]:
    """The console tables of ``slotwise run``: the Metric@K curves (one column per K) when
    there are any, the summary of the other metrics, and the per-stratum breakdown."""
    tables = []
    in_curves = curve_labels(results)
    if in_curves:
        tables.append(curve_table(results))
    if set(results.labels) - in_curves:
        tables.append(_summary_table(results, exclude=in_curves))
    if by_key is not None:
        tables.append(by(results, by_key).table())
    return tables


def _summary_table(results: Results, exclude: set[str]) -> Any:
    table = results.table()
    if not exclude:
        return table
    from rich.table import Table

    rest = Table(title=table.title, title_justify="left")
    for column in table.columns:
        rest.add_column(column.header, justify=column.justify)
    for stats_label, stats in results.summary().items():
        if stats_label in exclude:
            continue
        mean = "NA" if stats["mean"] is None else f"{stats['mean']:.4f}"
        ci = "-" if stats["ci"] is None else f"[{stats['ci'][0]:.4f}, {stats['ci'][1]:.4f}]"
        rest.add_row(stats_label, mean, ci, str(stats["n"]), str(stats["na"]))
    return rest


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")]


def _statistics(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--test",
        choices=TESTS,
        default="randomization",
        help="paired test: randomization (Fisher sign-flip, exact for n <= 13), bootstrap, "
        "or t (paired t-test); default randomization",
    )
    parser.add_argument(
        "--alpha",
        type=probability,
        default=0.05,
        help="significance level after Holm's correction (default 0.05)",
    )
    parser.add_argument(
        "--resamples",
        type=positive_int,
        default=DEFAULT_TEST_RESAMPLES,
        help=f"resamples of the randomization/bootstrap test (default {DEFAULT_TEST_RESAMPLES})",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--names",
        type=_names,
        help="comma-separated system names (default: the file names without .json)",
    )


def add_commands(commands: Any) -> dict[str, Handler]:
    """Add ``compare`` and ``report`` to ``commands`` (the result of
    ``parser.add_subparsers``); returns command name -> handler."""
    comparing = commands.add_parser(
        "compare",
        help="paired significance tests between results files; a regression gate for CI",
        description="Compare results JSON files of the same dataset (from `slotwise run "
        "--format json`): every metric they share, every pair of systems (later files "
        "against earlier ones), with a paired test, Holm's correction over all of them, the "
        "mean difference with its 95%% bootstrap CI and Cohen's d_z. Pairs where either "
        "score is NA are left out (n is reported).",
    )
    comparing.add_argument("results", type=Path, nargs="+", help="results JSON files (two or more)")
    _statistics(comparing)
    comparing.add_argument(
        "--metrics",
        action="append",
        default=[],
        help="comma-separated metric labels to compare (default: every shared label)",
    )
    comparing.add_argument(
        "--format", choices=("table", "json", "markdown", "latex"), default="table"
    )
    comparing.add_argument("--output", type=Path, help="write here instead of stdout")
    comparing.add_argument(
        "--movers",
        type=int,
        default=3,
        help="samples that moved most, listed per metric in the table format (default 3; 0: none)",
    )
    comparing.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a later system is worse than the first (the baseline) on a metric: "
        "significantly after Holm's correction, or by more than --max-drop",
    )
    comparing.add_argument(
        "--max-drop",
        type=non_negative,
        help="with --fail-on-regression: also fail when a metric drops by more than this "
        "absolute amount, significant or not",
    )

    reporting = commands.add_parser(
        "report",
        help="write a self-contained HTML report of one or more results files",
        description="One HTML file that opens offline: summary with confidence intervals, "
        "Metric@K curves, per-stratum table, PROC vs %%PROC diagnosis, comparison with "
        "significance marks (two or more files) and a sortable, filterable per-sample table.",
    )
    reporting.add_argument("results", type=Path, nargs="+", help="results JSON files")
    reporting.add_argument("--output", type=Path, required=True, help="the HTML file to write")
    reporting.add_argument(
        "--by",
        help="metadata key for the per-stratum table (default: stratum, when samples have it)",
    )
    reporting.add_argument("--title", help="page title (default: from the dataset name)")
    _statistics(reporting)
    return {"compare": _compare, "report": _report}


def _load(paths: Sequence[Path], names: list[str] | None) -> tuple[list[Results], list[str]]:
    results = [read_results(path) for path in paths]
    if names is None:
        names = [path.stem for path in paths]
        if len(set(names)) != len(names):
            names = [str(path) for path in paths]
    if len(names) != len(paths) or len(set(names)) != len(names) or not all(names):
        raise InputError(
            [Problem(f"--names needs {len(paths)} distinct names, got {','.join(names)}")],
            summary="bad --names",
        )
    return results, names


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _compare(args: argparse.Namespace) -> int:
    if len(args.results) < 2:
        raise InputError(
            [Problem("compare needs two or more results files")], summary="nothing to compare"
        )
    results, names = _load(args.results, args.names)
    comparison = compare(
        results,
        test=args.test,
        names=names,
        metrics=_split(args.metrics) or None,
        alpha=args.alpha,
        resamples=args.resamples,
        seed=args.seed,
        movers=max(args.movers, 5),
    )
    _emit(comparison, args.format, args.output, args.movers)
    if not args.fail_on_regression:
        return 0
    found = comparison.regressions(max_drop=args.max_drop)
    rule = f"significant drop after Holm at alpha={args.alpha:g}" + (
        f", or any drop > {args.max_drop:g}" if args.max_drop is not None else ""
    )
    if found:
        print(f"regression gate FAILED ({rule}):", file=sys.stderr)
        for regression in found:
            print(f"  {regression}", file=sys.stderr)
        return EXIT_REGRESSION
    print(
        f"regression gate passed: no metric regressed against {names[0]} ({rule})",
        file=sys.stderr,
    )
    return 0


def _emit(comparison: Comparison, fmt: str, output: Path | None, movers: int) -> None:
    if fmt == "table":
        lines = []
        if comparison.skipped:
            lines.append(f"not in every file, not compared: {', '.join(comparison.skipped)}")
        dropped = {(r.label, r.a, r.b): r.dropped for r in comparison.rows if r.dropped}
        for (label, a, b), count in dropped.items():
            pair = f" ({a} → {b})" if len(comparison.systems) > 2 else ""
            lines.append(f"{label}{pair}: {count} sample(s) left out (NA or missing on one side)")
        moved = comparison.mover_lines(movers) if movers > 0 else []
        if moved:
            lines += ["moved most (b - a):", *(f"  {line}" for line in moved)]
        if output is None:
            print_blocks([comparison.table()], lines)
        else:
            atomic_write(output, print_blocks([comparison.table()], lines, file=io.StringIO()))
        return
    if fmt == "json":
        text = json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False) + "\n"
    elif fmt == "markdown":
        text = comparison.to_markdown()
    else:
        text = comparison.to_latex()
    if output is None:
        sys.stdout.write(text)
    else:
        atomic_write(output, text)
        print(f"wrote {output}", file=sys.stderr)


def _report(args: argparse.Namespace) -> int:
    from engine.report import write_report

    results, names = _load(args.results, args.names)
    write_report(
        results,
        args.output,
        names=names,
        by_key=args.by,
        title=args.title,
        test=args.test,
        alpha=args.alpha,
        resamples=args.resamples,
        seed=args.seed,
    )
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
