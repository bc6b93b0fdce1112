"""``slotwise sample``: draw the queries (or query-document pairs) people should label,
uniformly, stratified or actively, seeded, of a size or within a budget, never re-drawing
what is already labelled; writes SAMPLE.jsonl and SAMPLE.design.json beside it
(:mod:`engine.analysis.sampling`)."""

from __future__ import annotations

import argparse
import json
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
from engine.errors import InputError, Problem

if TYPE_CHECKING:
    import numpy as np

    from engine.evaluation.api import Dataset, Engine

__all__ = ["add"]

DEFAULT_METRIC = "retrieval-ndcg-at-k@10"
LABEL_KINDS = ("relevance", "utility", "grades")


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


def _fail(message: str, source: str | None = None) -> InputError:
    return InputError([Problem(message, source=source)], summary="cannot draw the sample")


def _labelled_queries(dataset: Dataset) -> set[str]:
    import numpy as np

    columns = dataset.columns
    has = np.zeros(len(columns), dtype=np.bool_)
    for kind in LABEL_KINDS:
        has |= columns.column(kind).is_valid().to_numpy(zero_copy_only=False)
    return {sample_id for sample_id, labelled in zip(dataset.ids, has, strict=True) if labelled}


def _labelled_pairs(dataset: Dataset) -> set[tuple[str, str]]:
    return {(s.id, doc) for s in dataset.samples for doc in (s.relevance or {})}


def _population(args: argparse.Namespace, dataset: Dataset) -> tuple[list[str], list[str] | None,
                                                                     dict[str, int]]:  # fmt: skip
    """The units' query ids (and doc ids), and each query's number of pooled pairs."""
    import numpy as np

    ids = dataset.ids
    if args.runs:
        from engine.annotate.holes import pool
        from engine.io.sources import read_outputs

        pooled = pool(dataset.columns, [read_outputs(path) for path in args.runs], args.depth)
        queries = [ids[row] for row in pooled.rows.tolist()]
        docs = pooled.docs.to_pylist()
        counts = dict(zip(*np.unique(np.asarray(queries, dtype=object), return_counts=True),
                          strict=True)) if queries else {}  # fmt: skip
        pairs = {q: int(counts.get(q, 0)) for q in ids}
    else:
        labelled = [(s.id, doc) for s in dataset.samples for doc in (s.relevance or {})]
        queries, docs = [q for q, _ in labelled], [d for _, d in labelled]
        pairs = {}
    if args.unit == "query":
        return list(ids), None, pairs
    if not queries:
        raise _fail("no pairs: give --runs to pool, or a dataset with relevance labels")
    return queries, docs, pairs


def _disagreement(args: argparse.Namespace, engine: Engine, labels: Dataset) -> dict[str, float]:
    """Per query, |the --metric of the first run - of the second| under ``labels``."""
    import numpy as np

    if not args.runs or len(args.runs) < 2:
        raise UsageError("the systems' disagreement needs two --runs")
    evaluation = labels.with_metrics([args.metric])
    first, second = (evaluation.evaluate(path) for path in args.runs[:2])
    label = first.labels[0]
    gap = np.abs(first.values(label) - second.values(label))
    missing = [q for q, v in zip(labels.ids, gap, strict=True) if np.isnan(v)]
    if missing:
        raise InputError(
            [Problem(f"{label} is NA for a run", q) for q in missing],
            summary="cannot compute the systems' disagreement",
        )
    return dict(zip(labels.ids, gap.tolist(), strict=True))


def _bands(values: np.ndarray, bins: int) -> list[str]:
    """'|Δ|=0', then quantile bands of the positive values named by their upper edges."""
    import numpy as np

    positive = values[values > 0]
    if not positive.size:
        return ["|Δ|=0"] * values.size
    edges = np.unique(np.quantile(positive, np.linspace(0, 1, bins + 1)[1:]))
    at = np.minimum(np.searchsorted(edges, values, side="left"), edges.size - 1)
    return ["|Δ|=0" if v == 0 else f"|Δ|<={edges[i]:.3g}" for v, i in zip(values, at, strict=True)]


def _strata(
    args: argparse.Namespace, engine: Engine, dataset: Dataset, queries: list[str],
    docs: list[str] | None, judge: Dataset,
) -> list[str]:  # fmt: skip
    import numpy as np

    kind = args.stratify
    if kind.startswith("metadata."):
        field = kind[len("metadata.") :]
        metadata = {s.id: s.metadata or {} for s in dataset.samples}
        if not any(field in m for m in metadata.values()):
            raise _fail(f"no sample has the metadata field {field!r} to stratify by")
        lacking = sorted({q for q in queries if field not in metadata[q]})
        if lacking:
            raise InputError([Problem(f"no metadata field {field!r}", q, f"/metadata/{field}")
                              for q in lacking], summary="cannot stratify")  # fmt: skip
        return [str(metadata[q][field]) for q in queries]
    if kind == "grade":
        if docs is None:
            raise UsageError("--stratify grade stratifies pairs: add --unit pair")
        grades = {s.id: s.relevance or {} for s in judge.samples}
        return [
            f"grade={grades.get(q, {})[d]:g}" if d in grades.get(q, {}) else "unjudged"
            for q, d in zip(queries, docs, strict=True)
        ]
    if kind == "disagreement":
        gap = _disagreement(args, engine, judge)
        return _bands(np.asarray([gap[q] for q in queries]), args.bins)
    raise UsageError(f"--stratify {kind!r}: give metadata.FIELD, grade or disagreement")


def _uncertainty(
    args: argparse.Namespace, engine: Engine, queries: list[str], docs: list[str] | None,
    judge: Dataset,
) -> np.ndarray:  # fmt: skip
    import numpy as np

    if args.uncertainty is None:
        gap = _disagreement(args, engine, judge)
        return np.asarray([gap[q] for q in queries])
    found: dict[tuple[str, str | None], float] = {}
    problems = []
    source = str(args.uncertainty)
    try:
        lines = args.uncertainty.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise _fail(f"cannot read: {error.strerror}", source) from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = (str(row["query_id"]), None if docs is None else str(row["doc_id"]))
            value = float(row["uncertainty"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            problems.append(Problem(f"not an uncertainty row: {error!r}", source=source,
                                    line=number))  # fmt: skip
            continue
        if not (np.isfinite(value) and value >= 0):
            problems.append(Problem(f"uncertainty {value} is not a number >= 0", key[0],
                                    "/uncertainty", source, number))  # fmt: skip
        found[key] = value
    doc_of: list[str | None] = list(docs) if docs is not None else [None] * len(queries)
    keys = list(zip(queries, doc_of, strict=True))
    known = set(keys)
    problems += [Problem("no such unit in the population", q, source=source)
                 for q, _ in found.keys() - known]  # fmt: skip
    problems += [Problem(f"no uncertainty for this unit{'' if d is None else f' (doc {d})'}",
                         q, source=source) for q, d in keys if (q, d) not in found]  # fmt: skip
    if problems:
        raise InputError(problems, summary="invalid --uncertainty")
    return np.asarray([found[key] for key in keys])


def _sample(args: argparse.Namespace) -> int:
    import numpy as np

    from engine.analysis import sampling

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
    queries, docs, pairs = _population(args, dataset)
    exclude: set[Any] = set()
    if args.exclude is not None:
        human = engine.dataset(args.exclude)
        exclude = _labelled_queries(human) if docs is None else _labelled_pairs(human)
    per_unit = 1.0
    if docs is None and (args.budget is not None or args.budget_money is not None):
        if not args.runs:
            raise UsageError("a budget in labels pays for each query's pooled pairs: give --runs")
        left = [pairs[q] for q in queries if q not in exclude]
        per_unit = float(np.mean(left)) if left and np.mean(left) > 0 else 1.0
    strata = _strata(args, engine, dataset, queries, docs, judge) if args.stratify else None
    uncertainty = _uncertainty(args, engine, queries, docs, judge) if args.active else None
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
        raise _fail(str(error)) from None
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
