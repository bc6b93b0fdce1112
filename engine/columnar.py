"""Columnar I/O: labels, runs and per-sample results as long-format pandas DataFrames and
Parquet/Arrow files (the optional extra ``columnar``: ``pip install 'slotwise[columnar]'``).

Long format, one row per (query, document):

- labels: ``query_id``, ``doc_id`` and ``relevance`` (graded label) and/or ``utility``
  (u in [-1, 1]); a missing value (NaN) means "no such label for this document";
- runs: ``query_id``, ``doc_id`` and ``rank`` (1 first) or ``score`` (ranked as trec_eval
  ranks: score descending, ties by doc id descending);
- results: ``query_id`` plus one column per metric label (NaN = NA).

Labels become raw samples and runs become bare ranked lists, which then go through the
same validation as every other source.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import InputError, MissingDependencyError, Problem
from engine.records import Output, Sample
from engine.trec import rank_by_score

if TYPE_CHECKING:
    import pandas as pd

    from engine.results import Results

__all__ = [
    "COLUMNAR_SUFFIXES",
    "labels_to_samples",
    "outputs_to_frame",
    "read_frame",
    "results_to_frame",
    "run_to_outputs",
    "samples_to_frame",
    "write_frame",
]

COLUMNAR_SUFFIXES = (".parquet", ".arrow", ".feather")


def _pandas() -> Any:
    try:
        import pandas
        import pyarrow  # noqa: F401  (pandas needs it for Parquet/Arrow)
    except ImportError as error:
        raise MissingDependencyError(
            "columnar formats (pandas, pyarrow)", "columnar", error
        ) from error
    return pandas


def read_frame(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A DataFrame from a ``.parquet`` or ``.arrow``/``.feather`` file."""
    pandas = _pandas()
    path = Path(path)
    try:
        if path.suffix.lower() == ".parquet":
            return pandas.read_parquet(path)
        return pandas.read_feather(path)
    except (OSError, ValueError) as error:
        raise InputError(
            [Problem(f"cannot read columnar file: {error}", source=str(path))]
        ) from None


def write_frame(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a DataFrame as ``.parquet`` or ``.arrow``/``.feather``, atomically."""
    _pandas()
    path = Path(path)
    if path.suffix.lower() not in COLUMNAR_SUFFIXES:
        raise InputError([Problem(f"use one of {', '.join(COLUMNAR_SUFFIXES)}", source=str(path))])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        if path.suffix.lower() == ".parquet":
            frame.to_parquet(partial, index=False)
        else:
            frame.reset_index(drop=True).to_feather(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str, source: str | None) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            [
                Problem(
                    f"{what} need columns {', '.join(columns)}; missing {', '.join(missing)} "
                    f"(found {', '.join(map(str, frame.columns))})",
                    source=source,
                )
            ]
        )


def labels_to_samples(frame: pd.DataFrame, source: str | None = None) -> list[dict[str, Any]]:
    """Raw samples from a labels frame: ``{"id", "expected_output": {doc: label}}`` for
    relevance alone, the long form ``{relevance?, utility}`` when a ``utility`` column is
    present (and for queries judging a document named like a long-form key)."""
    from engine.trec import qrels_to_samples

    kinds = [c for c in ("relevance", "utility") if c in frame.columns]
    _require(frame, ("query_id", "doc_id", *(kinds or ["relevance"])), "labels", source)
    labels: dict[str, dict[str, dict[str, float]]] = {kind: {} for kind in kinds}
    problems = []
    columns = [frame["query_id"].tolist(), frame["doc_id"].tolist()]
    columns += [frame[kind].tolist() for kind in kinds]
    for index, (qid, doc, *values) in enumerate(zip(*columns, strict=True)):
        for kind, value in zip(kinds, values, strict=True):
            if value != value:  # NaN: this document has no label of this kind
                continue
            judged = labels[kind].setdefault(str(qid), {})
            if str(doc) in judged:
                message = f"row {index}: document {doc!r} has two {kind} labels"
                problems.append(Problem(message, sample_id=str(qid), source=source))
            judged[str(doc)] = value
    if problems:
        raise InputError(problems, summary=f"invalid labels{f' {source}' if source else ''}")
    if "utility" not in labels:
        return qrels_to_samples(labels["relevance"])
    queries = dict.fromkeys([*labels.get("relevance", {}), *labels["utility"]])
    return [
        {
            "id": qid,
            "expected_output": {kind: labels[kind][qid] for kind in kinds if qid in labels[kind]},
        }
        for qid in queries
    ]


def samples_to_frame(samples: Iterable[Sample | Mapping[str, Any]]) -> pd.DataFrame:
    """A labels frame (``query_id``, ``doc_id``, ``relevance``, ``utility``; NaN where a
    document has no label of that kind) from samples or raw sample dicts."""
    pandas = _pandas()
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for item in samples:
        sample = item if isinstance(item, Sample) else Sample.from_raw(item)
        for kind in ("relevance", "utility"):
            for doc, value in (getattr(sample, kind) or {}).items():
                rows.setdefault((sample.id, doc), {})[kind] = value
    return pandas.DataFrame(
        {
            "query_id": [q for q, _ in rows],
            "doc_id": [d for _, d in rows],
            "relevance": [r.get("relevance", math.nan) for r in rows.values()],
            "utility": [r.get("utility", math.nan) for r in rows.values()],
        }
    )


def outputs_to_frame(outputs: Mapping[str, Any]) -> pd.DataFrame:
    """A run frame (``query_id``, ``doc_id``, ``rank``) from raw outputs or :class:`Output`
    objects, ranks as given (1 first)."""
    pandas = _pandas()
    query: list[str] = []
    doc: list[str] = []
    rank: list[int] = []
    for sample_id, actual in outputs.items():
        if actual is None:
            continue
        ranked = (actual if isinstance(actual, Output) else Output.from_raw(actual)).retrieved
        query += [str(sample_id)] * len(ranked)
        doc += list(ranked)
        rank += range(1, len(ranked) + 1)
    return pandas.DataFrame({"query_id": query, "doc_id": doc, "rank": rank})


def run_to_outputs(frame: pd.DataFrame, source: str | None = None) -> dict[str, list[str]]:
    """Ranked lists ``{query_id: [doc_id, ...]}`` from a run frame with ``rank`` or ``score``."""
    order = "rank" if "rank" in frame.columns else "score"
    _require(frame, ("query_id", "doc_id", order), "runs", source)
    outputs: dict[str, list[Any]] = {}
    rows = zip(
        frame["query_id"].tolist(), frame["doc_id"].tolist(), frame[order].tolist(), strict=True
    )
    for qid, doc, key in rows:
        outputs.setdefault(str(qid), []).append((str(doc), key))
    if order == "rank":
        return {
            q: [d for d, _ in sorted(pairs, key=lambda p: p[1])] for q, pairs in outputs.items()
        }
    return {q: rank_by_score(pairs) for q, pairs in outputs.items()}


def results_to_frame(results: Results) -> pd.DataFrame:
    """Per-sample scores: ``query_id`` and one float column per metric label (NaN = NA)."""
    pandas = _pandas()
    columns: dict[str, Any] = {"query_id": list(results.sample_ids)}
    columns.update({label: results.scores[label] for label in results.labels})
    return pandas.DataFrame(columns)
