"""``slotwise compare``: paired significance tests between results files, with a
regression gate for CI pipelines (exit 1 when a metric regressed, when a system's
judged@k fell, or when a PPI interval of a difference lies below 0)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.analysis.defaults import MAX_JUDGED_DROP
from engine.cli.common import (
    Handler,
    UsageError,
    configured_engine,
    emit,
    emit_tables,
    load_results,
    non_negative,
    statistics_options,
)
from engine.errors import InputError, Problem

if TYPE_CHECKING:
    from engine.analysis.compare import Comparison, Regression
    from engine.evaluation.api import Engine

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
        "score is NA are left out (n is reported). Each system's judged@k (the labelled "
        "share of its top-k documents) is shown and gated. --dataset re-scores the results' "
        "kept outputs on newer labels (or scores outputs files) before pairing.",
    )
    comparing.add_argument(
        "results",
        type=Path,
        nargs="+",
        help="results JSON files (two or more); with --dataset and --metrics, outputs files too",
    )
    comparing.add_argument(
        "--dataset",
        help="score every system on this dataset (a file, or a name declared in slotwise.yaml) "
        "before pairing: the kept outputs of results files scored on other labels (e.g. "
        "before `slotwise annotate --holes` added some) are re-scored, and outputs files are "
        "scored with --metrics",
    )
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
        "--max-judged-drop",
        type=non_negative,
        default=MAX_JUDGED_DROP,
        help="with --fail-on-regression: fail when a later system's judged@k is lower than "
        f"the baseline's by more than this share (default {MAX_JUDGED_DROP:g}): its unjudged "
        "documents count as non-relevant",
    )
    comparing.add_argument(
        "--allow-unjudged",
        action="store_true",
        help="with --fail-on-regression: do not gate on judged@k",
    )
    comparing.add_argument(
        "--ppi",
        metavar="PREDICTIONS",
        help="with --human: the prediction-powered (PPI++) estimate and interval of each "
        "later system's difference from the first, from the human labels and an LLM's labels "
        "on every sample (PREDICTIONS, `slotwise annotate --runs` without --holes), on the "
        "results' kept outputs; with --fail-on-regression, an interval wholly on the worse "
        "side of 0 (or an estimated drop > --max-drop) is a regression",
    )
    comparing.add_argument(
        "--human",
        metavar="DATASET",
        help="with --ppi: the human labels (its labelled samples are the gold subset, as "
        "`slotwise run DATASET --ppi`)",
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
    from engine.analysis.compare import compare, gate_rule

    if len(args.results) < 2:
        raise InputError(
            [Problem("compare needs two or more results files")], summary="nothing to compare"
        )
    if (args.ppi is None) != (args.human is None):
        raise UsageError("--ppi PREDICTIONS and --human DATASET go together")
    engine = configured_engine(getattr(args, "config", None))
    dataset = engine.dataset(args.dataset) if args.dataset is not None else None
    results, names = load_results(
        args.results, args.names, dataset=dataset, metrics=_split(args.metrics)
    )
    comparison = compare(
        results,
        test=args.test,
        names=names,
        metrics=_split(args.metrics) or None,
        alpha=args.alpha,
        resamples=args.resamples,
        seed=args.seed,
        movers=max(args.movers, 5),
        dataset=dataset,
    )
    ppi_found = _ppi(engine, args, comparison, results) if args.ppi is not None else []
    _emit(comparison, args.format, args.output, args.movers, [r for r, _ in ppi_found])
    if not args.fail_on_regression:
        return 0
    judged_drop = None if args.allow_unjudged else args.max_judged_drop
    found = comparison.regressions(
        max_drop=args.max_drop, allow_failures=args.allow_failures, max_judged_drop=judged_drop
    )
    found += [regression for _, regressions in ppi_found for regression in regressions]
    rule = gate_rule(args.alpha, args.max_drop, args.allow_failures, judged_drop)
    rule += ", or a PPI interval of a difference below 0" if ppi_found else ""
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


def _ppi(
    engine: Engine, args: argparse.Namespace, comparison: Comparison, results: Sequence[Any]
) -> list[tuple[Any, list[Regression]]]:
    """Per later system: the paired PPI report of its difference from the first system,
    and the regressions it shows."""
    from engine.analysis.compare import ppi_regressions

    labels = sorted(
        {row.label for row in comparison.rows}, key=[r.label for r in comparison.rows].index
    )
    evaluation = engine.dataset(args.human).with_metrics(labels)
    predictions = engine.dataset(args.ppi)
    direction = {row.label: row.higher_is_better for row in comparison.rows}
    baseline, first = comparison.systems[0], results[0]
    found = []
    for name, later in zip(comparison.systems[1:], results[1:], strict=True):
        if later.outputs is None or first.outputs is None:
            raise InputError(
                [Problem("--ppi scores the results' kept outputs: score with --keep-outputs")],
                summary="cannot estimate by PPI",
            )
        report = evaluation.ppi(later, predictions, baseline=first)
        found.append((report, ppi_regressions(report, name, baseline, direction, args.max_drop)))
    return found


def _emit(
    comparison: Comparison, fmt: str, output: Path | None, movers: int, ppi: Sequence[Any] = ()
) -> None:
    if fmt == "table":
        tables = [comparison.table(), *(report.table() for report in ppi)]
        emit_tables(tables, comparison.notes(movers), output)
    elif fmt == "json":
        document = comparison.to_dict()
        if ppi:
            document["ppi"] = [report.to_dict()["ppi"] for report in ppi]
        emit(json.dumps(document, indent=2, ensure_ascii=False) + "\n", output)
    else:
        emit(comparison.to_markdown() if fmt == "markdown" else comparison.to_latex(), output)
