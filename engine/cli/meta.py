"""The meta-evaluation commands: ``correlate``, ``fit``, ``calibrate`` and
``import-udcg-reference``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.common import (
    Handler,
    configured_engine,
    emit,
    emit_tables,
    non_negative_int,
    output_file,
    output_or_stdout,
    positive_float,
    positive_int,
    split_specs,
)
from engine.errors import InputError, Problem
from engine.io.config import CONFIG_FILENAME
from engine.io.writer import atomic_write

if TYPE_CHECKING:
    from engine.evaluation.api import Dataset

__all__ = ["add"]

_DATASET_HELP = (
    f"a dataset declared in {CONFIG_FILENAME} or a dataset file whose samples carry "
    "metadata.question and metadata.outcome (with --outputs), or a contexts file (without)"
)


def add(commands: Any) -> dict[str, Handler]:
    correlate = commands.add_parser(
        "correlate",
        help="rank metrics by how well they predict end-to-end outcomes",
        description="For each question, the Spearman correlation between a metric's scores "
        "of its contexts and their outcomes (correct > abstained > wrong); metrics ranked by "
        "the mean over questions, with a bootstrap CI and Kendall's tau.",
    )
    _inputs(correlate)
    correlate.add_argument(
        "--metrics",
        action="append",
        default=[],
        required=True,
        help="comma-separated metric specs, e.g. udcg,udcg(gamma=0),retrieval-ndcg-at-k",
    )
    _statistics(correlate)
    correlate.add_argument("--format", choices=("table", "json"), default="table")
    correlate.add_argument(
        "--output", type=output_or_stdout, help="write here instead of stdout (- : stdout)"
    )

    fit = commands.add_parser(
        "fit",
        help="fit UDCG_theta's position weights",
        description="Fit udcg-theta's weights with a linear ranking SVM on within-question "
        "pairs of contexts, and write the parameter file that udcg-theta(params_file=...) loads. "
        "Needs scikit-learn: pip install 'slotwise[meta]'.",
    )
    fit.add_argument("metric", choices=("udcg-theta",), help="the metric to fit")
    _inputs(fit)
    fit.add_argument("--k", type=positive_int, required=True, help="context size to fit for")
    fit.add_argument("--c", type=positive_float, default=1.0, help="SVM C (default 1.0)")
    fit.add_argument(
        "--output", type=output_file, required=True, help="the parameter file to write"
    )

    calibrate = commands.add_parser(
        "calibrate",
        help="grid-search a metric parameter (UDCG's gamma) on training questions",
        description="Pick the parameter value with the best mean Spearman correlation on a "
        "seeded training split of the questions and report it on the held-out questions.",
    )
    calibrate.add_argument("metric", help="metric alias, e.g. udcg")
    _inputs(calibrate)
    calibrate.add_argument("--param", default="gamma", help="parameter to search (default gamma)")
    calibrate.add_argument(
        "--grid",
        type=_grid,
        help="comma-separated values (default for gamma: 0, 0.05, ..., 1)",
    )
    calibrate.add_argument("--test-fraction", type=float, default=0.3)
    _statistics(calibrate)
    calibrate.add_argument("--format", choices=("table", "json"), default="table")
    calibrate.add_argument(
        "--output", type=output_or_stdout, help="write here instead of stdout (- : stdout)"
    )

    reference = commands.add_parser(
        "import-udcg-reference",
        help="convert a UDCG reference data file to a slotwise dataset and outputs",
        description="Convert the UDCG reference implementation's JSON (questions with "
        "passages, is_relevant and models_info[model].no_res_prob) into a slotwise dataset "
        "with utility labels and an outputs file.",
    )
    reference.add_argument("path", type=Path, help="the reference JSON file")
    reference.add_argument("--model", help="which model's no_res_prob (default: the first)")
    reference.add_argument(
        "--dataset-output",
        type=output_file,
        required=True,
        help="dataset file to write (.json/.jsonl)",
    )
    reference.add_argument(
        "--outputs-output", type=output_file, required=True, help="outputs file to write (.json)"
    )
    return {
        "correlate": _correlate,
        "fit": _fit,
        "calibrate": _calibrate,
        "import-udcg-reference": _import_reference,
    }


def _inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help=_DATASET_HELP)
    parser.add_argument(
        "--outputs", type=Path, help="the contexts: {sample_id: actual_output} (JSON or JSONL)"
    )


def _statistics(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="bootstrap (and split) seed"
    )
    parser.add_argument("--resamples", type=positive_int, default=1000, help="bootstrap resamples")
    parser.add_argument("--confidence", type=float, default=0.95, help="CI level (default 0.95)")


def _grid(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("the grid has no values")
    return values


def _load(args: argparse.Namespace) -> tuple[Dataset, Any]:
    """The dataset and its outputs: declared, a dataset file with --outputs, or a contexts file."""
    from engine.analysis.meta import read_contexts

    engine = configured_engine(getattr(args, "config", None))
    declared = engine.config.datasets.get(args.dataset)
    if args.outputs is not None or (declared is not None and declared.outputs is not None):
        dataset = engine.dataset(args.dataset)
        return dataset, args.outputs or dataset.outputs
    if declared is not None:
        raise InputError(
            [Problem(f"dataset {args.dataset!r} declares no outputs: pass --outputs FILE")]
        )
    return read_contexts(args.dataset, engine)


def _correlate(args: argparse.Namespace) -> int:
    from engine.analysis.meta import correlate

    dataset, outputs = _load(args)
    report = correlate(
        dataset,
        outputs,
        split_specs(args.metrics),
        confidence=args.confidence,
        resamples=args.resamples,
        seed=args.seed,
    )
    if args.format == "json":
        emit(report.to_json(), args.output)
    else:
        notes = ["na: questions with one context, or constant scores or outcomes (not in the mean)"]
        emit_tables([report.table()], notes, args.output)
    return 0


def _fit(args: argparse.Namespace) -> int:
    from engine.analysis.meta import fit_udcg_theta, write_theta

    dataset, outputs = _load(args)
    params = fit_udcg_theta(dataset, outputs, args.k, c=args.c)
    write_theta(params, args.output)
    provenance = params.provenance
    print(
        f"fitted udcg-theta for k={params.k} on {provenance['questions']} questions "
        f"({provenance['pairs']} context pairs); wrote {args.output}"
    )
    print("alpha (u+ by rank): " + ", ".join(f"{v:.3f}" for v in params.alpha))
    print("beta  (u- by rank): " + ", ".join(f"{v:.3f}" for v in params.beta))
    if not provenance["converged"]:
        print("warning: the SVM did not converge; try a smaller --c", file=sys.stderr)
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from engine.analysis.meta import GAMMA_GRID, calibrate

    if args.grid is None and args.param != "gamma":
        raise InputError([Problem(f"pass --grid: there is no default grid for {args.param!r}")])
    dataset, outputs = _load(args)
    result = calibrate(
        dataset,
        outputs,
        args.metric,
        args.param,
        grid=args.grid or GAMMA_GRID,
        test_fraction=args.test_fraction,
        seed=args.seed,
        confidence=args.confidence,
        resamples=args.resamples,
    )
    if args.format == "json":
        emit(result.to_json(), args.output)
        return 0
    from rich.table import Table

    table = Table(
        title=f"{args.metric}: mean Spearman on {len(result.train_questions)} training questions",
        title_justify="left",
    )
    table.add_column(args.param, justify="right")
    table.add_column("train spearman", justify="right")
    for value, spearman in zip(result.grid, result.train_spearman, strict=True):
        mark = " *" if value == result.best else ""
        table.add_row(f"{value:g}", ("NA" if spearman != spearman else f"{spearman:.3f}") + mark)
    lines = [
        f"best {args.param} = {result.best:g}; held out ({len(result.test_questions)} questions, "
        f"seed {result.seed}): {_line(result.test)}",
        f"default {result.default.label}: held out {_line(result.default)}",
    ]
    emit_tables([table], lines, args.output)
    return 0


def _line(row: Any) -> str:
    def fixed(value: float) -> str:
        return "NA" if value != value else f"{value:.3f}"

    return (
        f"spearman {fixed(row.spearman)} [{fixed(row.ci[0])}, {fixed(row.ci[1])}], "
        f"kendall {fixed(row.kendall)}, n {row.n}, na {row.na}"
    )


def _import_reference(args: argparse.Namespace) -> int:
    from engine.io.udcg_reference import read_reference

    data = read_reference(args.path, args.model)
    if args.dataset_output.suffix.lower() == ".jsonl":
        text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in data.samples)
    else:
        document = {"name": args.path.stem, "samples": data.samples}
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    atomic_write(args.dataset_output, text)
    atomic_write(args.outputs_output, json.dumps(data.outputs, indent=2, ensure_ascii=False) + "\n")
    print(
        f"model {data.model}: {len(data.samples)} samples -> {args.dataset_output}, "
        f"outputs -> {args.outputs_output}"
    )
    if data.unlabeled:
        print(
            f"{len(data.unlabeled)} passage(s) had no no_res_prob for the model and are "
            "unlabeled (u = 0, still counted in m)",
            file=sys.stderr,
        )
    return 0
