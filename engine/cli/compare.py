"""``slotwise compare``: paired significance tests between results files, and the
regression gate's verdict for CI pipelines: regressed (exit 1), held (exit 0) or can't
tell (exit 4, unless ``--allow-inconclusive``), each with its reason
(:mod:`engine.analysis.verdict`)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.analysis.defaults import (
    EXIT_CANT_TELL,
    FAMILY_MARGINS,
    MAX_JUDGED_GAP,
    MIN_JUDGED,
    MIN_PPI_LABELLED,
)
from engine.cli.common import (
    Handler,
    UsageError,
    configured_engine,
    emit,
    emit_tables,
    load_results,
    non_negative,
    non_negative_int,
    output_or_stdout,
    share,
    statistics_options,
)
from engine.errors import InputError, Problem

if TYPE_CHECKING:
    from engine.analysis.agreement import JudgeAgreement
    from engine.analysis.compare import Comparison
    from engine.analysis.verdict import Gate
    from engine.evaluation.api import Engine

__all__ = ["add"]

_MARGINS = ", ".join(f"{family} {margin:g}" for family, margin in FAMILY_MARGINS.items())


def add(commands: Any) -> dict[str, Handler]:
    comparing = commands.add_parser(
        "compare",
        help="paired significance tests between results files; a regression gate for CI",
        description="Compare results JSON files of the same dataset (from `slotwise run "
        "--format json`): every metric they share, every pair of systems (later files "
        "against earlier ones), with a paired test, Holm's correction over all of them, the "
        "mean difference with its 95% bootstrap CI and Cohen's d_z. Pairs where either "
        "score is NA are left out (n is reported). Each system's judged@k (the labelled "
        "share of its top-k documents) is shown. Under the table, the gate's verdict for each "
        "later file against the first: regressed, held or can't tell, and why. --dataset "
        "re-scores the results' kept outputs on newer labels (or scores outputs files) "
        "before pairing.",
    )
    comparing.add_argument(
        "results",
        type=Path,
        nargs="+",
        help="results JSON files (two or more; a directory is its files, a quoted glob its "
        "matches, sorted); with --dataset and --metrics, outputs files too",
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
    comparing.add_argument(
        "--output", type=output_or_stdout, help="write here instead of stdout (- : stdout)"
    )
    comparing.add_argument(
        "--movers",
        type=non_negative_int,
        default=3,
        help="samples that moved most, listed per metric in the table format (default 3; 0: none)",
    )
    comparing.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit with the verdict of each later system against the first (the baseline): "
        "1 regressed (significantly worse and not within --max-drop, or more failed samples), "
        f"0 held (the change's interval lies above -max-drop), {EXIT_CANT_TELL} can't tell "
        "(too few pairs, an interval wider than the margin, too few labels, ids matching no "
        "label), each with its reason; the verdict is printed either way",
    )
    comparing.add_argument(
        "--max-drop",
        action="append",
        default=[],
        metavar="[LABEL=]AMOUNT",
        help="the margin: how far a metric may fall and still have held (an absolute amount "
        "on its scale); LABEL=AMOUNT for one metric, repeatable or comma-separated; default "
        f"by the metric's family ({_MARGINS})",
    )
    comparing.add_argument(
        "--min-judged",
        type=share,
        default=MIN_JUDGED,
        help="the least judged@k (labelled share of the top-k documents) each system needs "
        f"for a verdict (default {MIN_JUDGED:g}); 0 for labels sparse by design",
    )
    comparing.add_argument(
        "--max-judged-gap",
        "--max-judged-drop",
        dest="max_judged_gap",
        type=non_negative,
        default=MAX_JUDGED_GAP,
        help="the most two systems' judged@k may differ by before their comparison can't tell "
        f"(default {MAX_JUDGED_GAP:g}): the less judged one's numbers read low",
    )
    comparing.add_argument(
        "--allow-unjudged",
        action="store_true",
        help="do not check judged@k (neither --min-judged nor --max-judged-gap)",
    )
    comparing.add_argument(
        "--allow-inconclusive",
        action="store_true",
        help=f"with --fail-on-regression: exit 0 rather than {EXIT_CANT_TELL} when the verdict is "
        "can't tell (it is still printed, with its reasons)",
    )
    comparing.add_argument(
        "--ppi",
        metavar="PREDICTIONS",
        help="with --human: the prediction-powered (PPI++) estimate and interval of each "
        "later system's difference from the first, from the human labels and an LLM's labels "
        "on every sample (PREDICTIONS, `slotwise annotate --runs` without --holes), on the "
        "results' kept outputs; the PPI interval then makes the verdict (at least "
        f"{MIN_PPI_LABELLED} human-labelled samples), the test on the judge's labels is shown "
        "as advisory, beside the judge's agreement with the human labels",
    )
    comparing.add_argument(
        "--human",
        metavar="DATASET",
        help="with --ppi: the human labels (its labelled samples are the gold subset, as "
        "`slotwise run DATASET --ppi`)",
    )
    comparing.add_argument(
        "--design",
        type=Path,
        metavar="SAMPLE.design.json",
        help="with --ppi: the design the human labels were drawn by (`slotwise sample`): "
        "stratified and active samples are weighted as drawn",
    )
    comparing.add_argument(
        "--allow-failures",
        action="store_true",
        help="do not count a later system failing on more samples than the baseline (error "
        "rows, or a metric failing) as regressed (failed samples are left out of the pairs)",
    )

    return {"compare": _compare}


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _margins(values: Sequence[str]) -> float | dict[str, float] | None:
    """``--max-drop``: one amount for every metric, or amounts per label."""
    amounts: dict[str, float] = {}
    every = None
    for part in _split(values):
        label, _, amount = part.rpartition("=")
        if not re.fullmatch(r"[0-9]+(\.[0-9]*)?|\.[0-9]+", amount.strip()):
            raise UsageError(f"--max-drop {part!r}: the amount must be a decimal number >= 0")
        value = float(amount)
        if label:
            amounts[label] = value
        else:
            every = value
    if every is not None and amounts:
        raise UsageError("--max-drop: give one amount, or LABEL=AMOUNT pairs, not both")
    return amounts or every


def _compare(args: argparse.Namespace) -> int:
    from engine.analysis.compare import compare
    from engine.analysis.verdict import gate
    from engine.cli.many import expand_runs

    args.results = [Path(path) for path in expand_runs([str(path) for path in args.results])]
    if len(args.results) < 2:
        raise InputError(
            [Problem("compare needs two or more results files")], summary="nothing to compare"
        )
    if (args.ppi is None) != (args.human is None):
        raise UsageError("--ppi PREDICTIONS and --human DATASET go together")
    if args.design is not None and args.ppi is None:
        raise UsageError("--design goes with --ppi PREDICTIONS and --human DATASET")
    margins = _margins(args.max_drop)
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
    reports, agreement = _ppi(engine, args, comparison, results) if args.ppi else ({}, None)
    unjudged = args.allow_unjudged
    verdict = gate(
        comparison,
        max_drop=margins,
        allow_failures=args.allow_failures,
        min_judged=None if unjudged else args.min_judged,
        max_judged_gap=None if unjudged else args.max_judged_gap,
        ppi=reports,
        agreement=agreement,
    )
    _emit(
        comparison,
        verdict,
        args.format,
        args.output,
        args.movers,
        list(reports.values()),
        agreement,
    )
    if not args.fail_on_regression:
        return 0
    code = verdict.exit_code(args.allow_inconclusive)
    allowed = " (--allow-inconclusive)" if code == 0 and verdict.outcome != "held" else ""
    print(f"regression gate: exit {code}{allowed}", file=sys.stderr)
    print("\n".join(verdict.lines(held=False)), file=sys.stderr)
    return code


def _ppi(
    engine: Engine, args: argparse.Namespace, comparison: Comparison, results: Sequence[Any]
) -> tuple[dict[str, Any], JudgeAgreement]:
    """Per later system, the paired PPI report of its difference from the first system;
    and the judge's agreement with the human labels, with the systems' order under each."""
    from engine.analysis.agreement import judge_agreement
    from engine.analysis.sampling import read_sample, recorded_sample

    labels = list(dict.fromkeys(row.label for row in comparison.rows))
    human = engine.dataset(args.human)
    evaluation = human.with_metrics(labels)
    predictions = engine.dataset(args.ppi)
    design = read_sample(args.design) if args.design is not None else recorded_sample(human)
    first = results[0]
    found = {}
    for name, later in zip(comparison.systems[1:], results[1:], strict=True):
        if later.outputs is None or first.outputs is None:
            raise InputError(
                [Problem("--ppi scores the results' kept outputs: score with --keep-outputs")],
                summary="cannot estimate by PPI",
            )
        found[name] = evaluation.ppi(later, predictions, baseline=first, design=design)
    systems = {
        name: result.outputs for name, result in zip(comparison.systems, results, strict=True)
    }
    return found, judge_agreement(human, predictions, systems, labels)


def _emit(
    comparison: Comparison,
    verdict: Gate,
    fmt: str,
    output: Path | None,
    movers: int,
    ppi: Sequence[Any] = (),
    agreement: JudgeAgreement | None = None,
) -> None:
    """The comparison, the PPI reports, the verdict and (--ppi) the judge's graded
    agreement with the human labels, in ``fmt``."""
    if fmt == "table":
        tables = [comparison.table(), *(report.table() for report in ppi)]
        graded = agreement.lines()[1:] if agreement is not None else []  # [0]: the verdict's
        emit_tables(tables, [*comparison.notes(movers), *verdict.lines(), *graded], output)
    elif fmt == "json":
        document = comparison.to_dict()
        if ppi:
            document["ppi"] = [report.to_dict()["ppi"] for report in ppi]
        document["verdict"] = verdict.to_dict()
        if agreement is not None:
            document["agreement"] = agreement.to_dict()
        emit(json.dumps(document, indent=2, ensure_ascii=False) + "\n", output)
    elif fmt == "markdown":
        lines = "".join(f"- {line.strip()}\n" for line in verdict.lines())
        section = "\n" + agreement.to_markdown() if agreement is not None else ""
        emit(comparison.to_markdown() + "\n" + lines + section, output)
    else:
        emit(comparison.to_latex(), output)
