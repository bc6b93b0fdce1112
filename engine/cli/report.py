"""``slotwise report``: one self-contained HTML report of one or more results files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.cli.common import (
    Handler,
    configured_engine,
    explain_inputs,
    load_results,
    output_file,
    split_specs,
    statistics_options,
)
from engine.errors import InputError

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    reporting = commands.add_parser(
        "report",
        help="write a self-contained HTML report of one or more results files",
        description="One HTML file that opens offline: summary with confidence intervals, "
        "Metric@K curves, per-stratum table, PROC vs %%PROC diagnosis, comparison with "
        "significance marks (two or more files) and a sortable, filterable per-sample table; "
        "with the outputs each file scored (kept, or --outputs) and the dataset, a click on a "
        "sample shows each system's slots, misses and diagnosis.",
    )
    reporting.add_argument(
        "results",
        type=Path,
        nargs="+",
        help="results JSON files; with --dataset and --metrics, outputs files too (scored on it)",
    )
    reporting.add_argument(
        "--output", type=output_file, required=True, help="the HTML file to write"
    )
    reporting.add_argument(
        "--by",
        help="metadata key for the per-stratum table (default: stratum, when samples have it)",
    )
    reporting.add_argument("--title", help="page title (default: from the dataset name)")
    reporting.add_argument(
        "--metrics",
        action="append",
        default=[],
        help="comma-separated metric labels to compare, as for `slotwise compare` (the Holm "
        "family; default: every shared label); the first is the per-sample table's first metric",
    )
    statistics_options(reporting)
    explain_inputs(reporting)
    return {"report": _report}


def _report(args: argparse.Namespace) -> int:
    from engine.analysis.compare import rescore
    from engine.analysis.explain import explain
    from engine.analysis.report import write_report

    engine = configured_engine(args.config)
    dataset = engine.dataset(args.dataset) if args.dataset is not None else None
    metrics = split_specs(args.metrics)
    results, names = load_results(args.results, args.names, dataset=dataset, metrics=metrics)
    if dataset is not None:  # results scored on other labels: their kept outputs, on these
        results = [rescore(r, dataset, name) for r, name in zip(results, names, strict=True)]
    asked = bool(args.outputs or args.dataset)
    explanations = None
    if asked or all(r.outputs is not None for r in results):
        try:
            explanations = explain(
                results, names=names, dataset=args.dataset, outputs=args.outputs, engine=engine
            )
        except InputError as error:  # kept outputs, but no dataset: a report without the view
            if asked:
                raise
            _no_sample_view(error.problems[-1].message)
    else:
        _no_sample_view(
            "the results kept no outputs: score with `slotwise run ... --keep-outputs`, "
            "or pass --outputs FILE once per results file"
        )
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
        explanations=explanations,
        metrics=metrics or None,
    )
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _no_sample_view(reason: str) -> None:
    """Say on stderr that the report has no per-sample drill-down, and why."""
    print(f"slotwise: warning: the report has no per-sample drill-down: {reason}", file=sys.stderr)
