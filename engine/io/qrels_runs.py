"""Qrels and runs from whatever a peer's user holds, as ranx's ``Qrels``/``Run`` take
them (``from_df``, ``from_dict``, ``from_parquet``, ``from_file``):
``engine.qrels(source)`` and ``engine.run(source)``.

``source`` is a pandas or polars DataFrame or an Arrow table (columns named as slotwise,
ranx, ir_measures, BEIR or trec_eval name them, :mod:`engine.io.column_names`, or as
``q_id_col``, ``doc_id_col`` and ``score_col`` say, as ranx's ``from_df`` takes them), a
dict ``{q_id: {doc_id: score}}`` (ranx's ``from_dict``, pytrec_eval's), a ranx
``Qrels``/``Run``, ir_measures' ``Qrel``/``ScoredDoc`` tuples, or a file or sharded input
(TREC text, Parquet, Arrow, CSV, TSV, JSONL, told by content). The result is columns that
``engine.dataset``, ``Evaluation.evaluate`` and ``Engine.evaluate_trec`` take.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from engine.errors import InputError
from engine.io import column_names, frames, sniff, sources, tables_in
from engine.io.columns import Columns
from engine.io.frames import Coded, Where
from engine.io.shards import is_sharded

__all__ = ["qrels", "run"]


def qrels(
    source: Any,
    *,
    q_id_col: str | None = None,
    doc_id_col: str | None = None,
    score_col: str | None = None,
) -> Columns:
    """Samples of qrels (see the module docstring); ``score_col`` names the label."""
    names = _names(q_id_col, doc_id_col, score_col, "relevance")
    table = _table(source, "qrels", names)
    if table is not None:
        return frames.labels_from_table(*table)
    if isinstance(source, str | os.PathLike) or is_sharded(source):
        return sources.read_qrels(source)
    return sources.dataset_columns(source)


def run(
    source: Any,
    *,
    q_id_col: str | None = None,
    doc_id_col: str | None = None,
    score_col: str | None = None,
) -> Columns:
    """Outputs of a run (see the module docstring), ranked as trec_eval ranks them."""
    names = _names(q_id_col, doc_id_col, score_col, "score")
    table = _table(source, "run", names)
    if table is not None:
        return _ranked(*table)
    if isinstance(source, str | os.PathLike) or is_sharded(source):
        return sources.read_run(source)
    return sources.read_outputs(source)


def _ranked(table: pa.Table, where: Where) -> Columns:
    """A run table ranked as its TREC text would be: by score (its ``rank``, if any, left
    out; a table of ranks alone is ranked by them), a document retrieved twice for a
    query refused, naming both rows."""
    names = table.column_names
    if "score" in names and "rank" in names:
        table = table.drop_columns(["rank"])
    if {"query_id", "doc_id"} <= set(names):
        queries, docs = Coded.of(table.column("query_id")), Coded.of(table.column("doc_id"))
        problems = frames.retrieved_twice(queries, docs, where)
        if problems:
            raise InputError(problems, summary="a document retrieved twice")
    return frames.run_from_table(table, where)


def _names(query: str | None, doc: str | None, value: str | None, to: str) -> dict[str, str]:
    given = {query: "query_id", doc: "doc_id", value: to}
    return {name: target for name, target in given.items() if name is not None}


def _table(source: Any, kind: str, names: dict[str, str]) -> tuple[pa.Table, Where] | None:
    """A frame, or one table file whose columns ``names`` renames, as a long table in
    slotwise's names, and where its rows come from; None for any other source (a file
    is then read as ``--qrels``/``--run`` read it). Column names for a source that has no
    columns (a dict, TREC text, shards) are refused."""
    table = frames.as_table(source)
    if table is not None:
        return column_names.canonical(table, kind, None, names), Where()
    single = isinstance(source, str | os.PathLike) and not is_sharded(source)
    if single and names and tables_in.format_of(source) != sniff.TREC:
        found, lines = tables_in.read(source, kind, names=names)
        return found, Where(os.fspath(source), lines=lines)
    if names:
        raise TypeError(
            "q_id_col, doc_id_col and score_col name the columns of a frame or of one table "
            f"file, not of a {type(source).__name__} (TREC text, a dict, shards)"
        )
    return None
