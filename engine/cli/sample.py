"""``slotwise sample``: draw the queries (or query-document pairs) people should label,
uniformly, stratified or actively, seeded, of a size or within a budget, never re-drawing
what is already labelled; writes SAMPLE.jsonl and SAMPLE.design.json beside it
(the frame drawn from: :mod:`engine.analysis.sampling_frame`; the draw:
:mod:`engine.analysis.sampling`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.common import (
    Handler,
    UsageError,
    configured_engine,
    output_file,
    positive_float,
    positive_int,
)

if TYPE_CHECKING:
    import numpy as np

    from engine.analysis.sampling_frame import Pooled, Population
    from engine.evaluation.api import Dataset

__all__ = ["add"]

DEFAULT_METRIC = "retrieval-ndcg-at-k@10"


def add(commands: Any) -> dict[str, Handler]:
    sample = commands.add_parser(
        "sample",
        help="draw the queries or query-document pairs people should label (docs/ppi.md)",
        description="Draw the units people should label from DATASET: its queries (the unit "
        "of PPI: people label the query's pairs) or, with --unit pair, query-document pairs "
        "(the top --depth of --runs pooled, else the pairs DATASET labels). Uniform, "
        "--stratify'd or --active; seeded; of --size units or within a --budget; never "
        "re-drawing the units --exclude's human labels cover. Writes --output SAMPLE.jsonl "
        "(query_id, doc_id for pairs, stratum, probability = the unit's inclusion "
        "probability) and SAMPLE.design.json beside it (the design `compare --ppi --design` "
        "and `run --ppi --design` weigh the labels by).",
    )
    sample.add_argument("dataset", help="the dataset (a file, or a name slotwise.yaml declares)")
    sample.add_argument("--output", type=output_file, required=True, help="SAMPLE.jsonl to write")
    sample.add_argument("--unit", choices=("query", "pair"), default="query")
    size = sample.add_mutually_exclusive_group(required=True)
    size.add_argument("--size", type=positive_int, help="how many units to draw")
    size.add_argument(
        "--budget",
        type=positive_int,
        metavar="LABELS",
        help="how many labels to spend: a pair costs one, a query its pooled pairs "
        "(the mean over the population's queries; needs --runs)",
    )
    size.add_argument(
        "--budget-money", type=positive_float, metavar="AMOUNT", help="money to spend (--price)"
    )
    sample.add_argument("--price", type=positive_float, help="the price of one label")
    sample.add_argument("--seed", type=int, default=0, help="the random seed (default 0)")
    sample.add_argument(
        "--stratify",
        metavar="metadata.FIELD|grade|disagreement",
        help="draw in each stratum: a metadata field's value; the judge's grade of the pair "
        "(--unit pair; --judge, else DATASET's labels); or the systems' disagreement, "
        "|difference of --metric| between the first two --runs, in --bins bands",
    )
    sample.add_argument(
        "--allocation",
        choices=("proportional", "equal"),
        default="proportional",
        help="how the size is shared by the strata (at least 2 each)",
    )
    sample.add_argument(
        "--bins",
        type=positive_int,
        default=2,
        help="--stratify disagreement: bands of the positive differences, by quantile, "
        "beside the band of 0 (default 2)",
    )
    sample.add_argument(
        "--active",
        action="store_true",
        help="active sampling (Zrnic and Candès 2024): each unit drawn independently with "
        "probability proportional to its uncertainty (--uncertainty, else the systems' "
        "disagreement), mixed with --mix uniform; the size is then the expected size",
    )
    sample.add_argument(
        "--uncertainty",
        type=Path,
        metavar="FILE",
        help="with --active: JSON Lines {query_id, doc_id (pairs), uncertainty} for every "
        "unit (the judge's expected error as a standard deviation: several judges' "
        "disagreement, the spread of the judge's grade probabilities)",
    )
    sample.add_argument(
        "--mix",
        type=float,
        default=0.2,
        help="with --active: the uniform share of each probability (0 < mix <= 1, default "
        "0.2): no weight 1/π exceeds N/(mix·size)",
    )
    sample.add_argument(
        "--runs", type=Path, nargs="+", metavar="OUTPUTS", help="the systems' outputs files"
    )
    sample.add_argument("--depth", type=positive_int, default=10, help="pool depth (default 10)")
    sample.add_argument(
        "--metric",
        default=DEFAULT_METRIC,
        help=f"the metric whose per-query difference is the disagreement (default {DEFAULT_METRIC})",
    )
    sample.add_argument(
        "--judge", help="the judge's labels (a dataset): grades and the metric's values"
    )
    sample.add_argument(
        "--exclude",
        metavar="HUMAN_LABELS",
        help="a dataset of human labels: its labelled queries (or labelled pairs) are not drawn",
    )
    return {"sample": _sample}


def _pooled(args: argparse.Namespace, dataset: Dataset) -> Pooled | None:
    """The pairs --runs' top --depth pool (None without --runs)."""
    if not args.runs:
        return None
    from engine.annotate.holes import pool
    from engine.io.sources import read_outputs

    return pool(dataset.columns, [read_outputs(path) for path in args.runs], args.depth)


def _disagreement(args: argparse.Namespace, labels: Dataset, queries: list[str]) -> np.ndarray:
    """Each unit's systems' disagreement: its query's |--metric of the first run - of
    the second| under ``labels``."""
    import numpy as np

    from engine.analysis.sampling_frame import disagreement

    if not args.runs or len(args.runs) < 2:
        raise UsageError("the systems' disagreement needs two --runs")
    gap = disagreement(labels, args.runs[0], args.runs[1], args.metric)
    return np.asarray([gap[q] for q in queries])


def _strata(
    args: argparse.Namespace, dataset: Dataset, units: Population, judge: Dataset
) -> list[str]:
    """Each unit's stratum by --stratify."""
    from engine.analysis.sampling_frame import bands, grade_strata, metadata_strata

    kind = args.stratify
    if kind.startswith("metadata."):
        return metadata_strata(dataset, kind[len("metadata.") :], units.queries)
    if kind == "grade":
        if units.docs is None:
            raise UsageError("--stratify grade stratifies pairs: add --unit pair")
        return grade_strata(judge, units.queries, units.docs)
    if kind == "disagreement":
        return bands(_disagreement(args, judge, units.queries), args.bins)
    raise UsageError(f"--stratify {kind!r}: give metadata.FIELD, grade or disagreement")


def _uncertainty(args: argparse.Namespace, units: Population, judge: Dataset) -> np.ndarray:
    """Each unit's uncertainty: --uncertainty's, else the systems' disagreement."""
    from engine.io.uncertainty import read_uncertainty

    if args.uncertainty is None:
        return _disagreement(args, judge, units.queries)
    return read_uncertainty(args.uncertainty, units.queries, units.docs)


def _sample(args: argparse.Namespace) -> int:
    from engine.analysis import sampling
    from engine.analysis.sampling_frame import (
        cannot_draw,
        labelled_pairs,
        labelled_queries,
        population,
    )

    if (args.budget_money is None) != (args.price is None):
        raise UsageError("--budget-money AMOUNT and --price go together")
    if args.active and args.stratify:
        raise UsageError("draw --active or --stratify, not both")
    if args.uncertainty is not None and not args.active:
        raise UsageError("--uncertainty goes with --active")
    if args.active and not 0 < args.mix <= 1:
        raise UsageError(f"--mix must be in (0, 1], got {args.mix:g}")
    engine = configured_engine(getattr(args, "config", None))
    dataset = engine.dataset(args.dataset)
    judge = engine.dataset(args.judge) if args.judge is not None else dataset
    units = population(dataset, args.unit, _pooled(args, dataset))
    queries, docs = units.queries, units.docs
    exclude: set[Any] = set()
    if args.exclude is not None:
        human = engine.dataset(args.exclude)
        exclude = labelled_queries(human) if docs is None else set(labelled_pairs(human))
    per_unit = 1.0
    if docs is None and (args.budget is not None or args.budget_money is not None):
        if not args.runs:
            raise UsageError("a budget in labels pays for each query's pooled pairs: give --runs")
        per_unit = units.labels_per_query(exclude)
    strata = _strata(args, dataset, units, judge) if args.stratify else None
    uncertainty = _uncertainty(args, units, judge) if args.active else None
    try:
        size, budget = sampling.size_for(
            size=args.size, labels=args.budget, money=args.budget_money, price=args.price,
            labels_per_unit=per_unit,
        )  # fmt: skip
        drawn = sampling.draw(
            queries, size, doc_ids=docs, strata=strata, uncertainty=uncertainty,
            exclude=exclude, seed=args.seed, allocation=args.allocation, mix=args.mix,
            budget=budget, dataset=f"{dataset.source or args.dataset} {dataset.hash}",
        )  # fmt: skip
    except ValueError as error:
        raise cannot_draw(str(error)) from None
    design_file = sampling.write_sample(drawn, args.output)
    design = drawn.design
    what = "queries" if docs is None else "pairs"
    strata_text = ", ".join(f"{k} {v['drawn']}/{v['population']}" for k, v in design.strata.items())
    print(
        f"drew {len(drawn.units)} of {design.population} {what} ({design.method}"
        f"{'' if design.method != 'active' else f', expected {size}'}; {design.excluded} "
        f"excluded as labelled; {strata_text}) -> {args.output}, design {design_file}",
        file=sys.stderr,
    )
    return 0
