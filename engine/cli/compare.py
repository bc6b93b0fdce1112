"""``slotwise compare``: paired significance tests between results files, with a
regression gate for CI pipelines (exit 1 when a metric regressed)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.analysis.compare import Comparison, compare, gate_rule
from engine.cli.common import (
    Handler,
    emit,
    emit_tables,
    load_results,
    non_negative,
    statistics_options,
)
from engine.errors import InputError, Problem

__all__ = ["EXIT_REGRESSION", "add"]

EXIT_REGRESSION = 1


def add(commands: Any) -> dict[str, Handler]:
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
    statistics_options(comparing)
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
    comparing.add_argument(
        "--allow-failures",
        action="store_true",
        help="with --fail-on-regression: do not fail when a later system failed on more "
        "samples than the baseline (error rows, or a metric failing; by default a rise in "
        "failures is a regression, as failed samples are left out of the pairs)",
    )

    return {"compare": _compare}


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _compare(args: argparse.Namespace) -> int:
    if len(args.results) < 2:
        raise InputError(
            [Problem("compare needs two or more results files")], summary="nothing to compare"
        )
    results, names = load_results(args.results, args.names)
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
    found = comparison.regressions(max_drop=args.max_drop, allow_failures=args.allow_failures)
    rule = gate_rule(args.alpha, args.max_drop, args.allow_failures)
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
        lines += comparison.dropped_lines()
        moved = comparison.mover_lines(movers) if movers > 0 else []
        if moved:
            lines += ["moved most (b - a):", *(f"  {line}" for line in moved)]
        emit_tables([comparison.table()], lines, output)
    elif fmt == "json":
        emit(json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False) + "\n", output)
    else:
        emit(comparison.to_markdown() if fmt == "markdown" else comparison.to_latex(), output)
