"""ir_datasets as a source: ``engine.dataset("irds:<dataset-id>")`` and ``slotwise run
irds:<dataset-id> --run RUN`` read the dataset's qrels through ``ir_datasets`` (graded
labels kept, negative ones too) and each query's text as its sample's ``input``.

Registered in the ``slotwise.sources`` entry-point group as ``irds``; needs
``pip install 'slotwise[irds]'``. ir_datasets downloads what it has not cached yet; a
dataset registered locally (``ir_datasets.registry.register``) reads its own files.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine.errors import InputError, MissingDependencyError, Problem
from engine.evaluation.source_plugins import Loaded
from engine.io.columns import Columns
from engine.io.documents import canonical_json
from engine.io.frames import labels_from_table

__all__ = ["load"]


def load(dataset_id: str) -> Loaded:
    """The qrels of an ir_datasets dataset as samples, one per judged query."""
    dataset = _dataset(dataset_id)
    if not dataset.has_qrels():
        raise InputError(
            [Problem(f"ir_datasets dataset {dataset_id!r} has no qrels")],
            summary="nothing to evaluate against",
        )
    queries, docs, labels = [], [], []
    for qrel in dataset.qrels_iter():
        queries.append(qrel.query_id)
        docs.append(qrel.doc_id)
        labels.append(qrel.relevance)
    table = pa.table(
        {
            "query_id": pa.array(queries, pa.string()),
            "doc_id": pa.array(docs, pa.string()),
            "relevance": pa.array(np.asarray(labels, dtype=np.float64)),
        }
    )
    columns = labels_from_table(table)
    if dataset.has_queries():
        columns = _with_inputs(columns, {q.query_id: _text(q) for q in dataset.queries_iter()})
    return Loaded(samples=columns, name=dataset_id)


def _dataset(dataset_id: str) -> Any:
    try:
        import ir_datasets
    except ImportError as error:
        raise MissingDependencyError("reading irds: datasets", "irds", error) from error
    try:
        return ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(
            [Problem(f"ir_datasets knows no dataset {dataset_id!r}")],
            summary="unknown ir_datasets dataset (see https://ir-datasets.com for the ids)",
        ) from None


def _text(query: Any) -> str:
    """The query's text as ir_datasets would search with it."""
    default = getattr(query, "default_text", None)
    return str(default() if callable(default) else query.text)


def _with_inputs(columns: Columns, texts: dict[str, str]) -> Columns:
    """Each sample's ``input``: its query text (null for a query ir_datasets lacks)."""
    inputs = [
        None if (text := texts.get(i)) is None else canonical_json(text)
        for i in columns.ids.to_pylist()
    ]
    table = columns.table
    array = pa.array(inputs, pa.string())
    if "input" in table.column_names:
        table = table.set_column(table.column_names.index("input"), "input", array)
    else:
        table = table.append_column("input", array)
    return Columns(table, columns.docs)
