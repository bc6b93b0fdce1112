"""Columnar I/O: labels, runs and per-sample results as long-format pandas DataFrames and
Parquet/Arrow files (the optional extra ``columnar``: ``pip install 'slotwise[columnar]'``).

Long format, one row per (query, document):

- labels: ``query_id``, ``doc_id``, ``relevance`` (graded label);
- runs: ``query_id``, ``doc_id`` and ``rank`` (1 first) or ``score`` (ranked as trec_eval
  ranks: score descending, ties by doc id descending);
- results: ``query_id`` plus one column per metric label (NaN = NA).

Labels become raw samples and runs become bare ranked lists, which then go through the
same validation as every other source.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import InputError, Problem
from engine.trec import rank_by_score

if TYPE_CHECKING:
    import pandas as pd

    from engine.results import Results

__all__ = [
    "COLUMNAR_SUFFIXES",
    "labels_to_samples",
    "read_frame",
    "results_to_frame",
    "run_to_outputs",
    "write_frame",
]

COLUMNAR_SUFFIXES = (".parquet", ".arrow", ".feather")
_INSTALL = "pip install 'slotwise[columnar]'"


def _pandas() -> Any:
    try:
        import pandas
        import pyarrow  # noqa: F401  (pandas needs it for Parquet/Arrow)
    except ImportError as error:
        raise ImportError(
            f"columnar formats need pandas and pyarrow ({error.name} is missing): {_INSTALL}"
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
    """Write a DataFrame as ``.parquet`` or ``.arrow``/``.feather``."""
    _pandas()
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.reset_index(drop=True).to_feather(path)


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
    """Raw samples ``{"id", "expected_output": {doc: label}}`` from a labels frame; a query
    whose documents include a long-form key gets the long form."""
    from engine.trec import qrels_to_samples

    _require(frame, ("query_id", "doc_id", "relevance"), "labels", source)
    qrels: dict[str, dict[str, float]] = {}
    problems = []
    rows = zip(
        frame["query_id"].tolist(),
        frame["doc_id"].tolist(),
        frame["relevance"].tolist(),
        strict=True,
    )
    for index, (qid, doc, label) in enumerate(rows):
        judged = qrels.setdefault(str(qid), {})
        if str(doc) in judged:
            problems.append(
                Problem(
                    f"row {index}: document {doc!r} judged twice", sample_id=str(qid), source=source
                )
            )
        judged[str(doc)] = label
    if problems:
        raise InputError(problems, summary=f"invalid labels{f' {source}' if source else ''}")
    return qrels_to_samples(qrels)


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
