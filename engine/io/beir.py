"""A BEIR folder as a dataset: ``beir:PATH`` (``beir:PATH#dev``), or a folder with
BEIR's layout wherever a dataset is named.

BEIR's layout (``beir.datasets.data_loader.GenericDataLoader``):

- ``corpus.jsonl``: ``{"_id", "title", "text"}`` per document (not read: a run names its
  documents by id);
- ``queries.jsonl``: ``{"_id", "text"}`` per query: each sample's ``input``;
- ``qrels/<split>.tsv``: a header ``query-id	corpus-id	score``, then one judgement per
  line; the split is ``test`` unless asked otherwise.

A sample per query the split's qrels judge, with those labels (graded, negative ones
kept), as :func:`engine.io.sources.read_qrels` reads the same rows in TREC text.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, Problem
from engine.io import tables_in
from engine.io.columns import Columns
from engine.io.frames import Where, labels_from_table

__all__ = ["DEFAULT_SPLIT", "is_beir", "query_texts", "read", "reference", "with_inputs"]

DEFAULT_SPLIT = "test"
_SPLIT = re.compile(r"(?P<path>.*?)(?:#(?P<split>[^#/]+))?")


def reference(rest: str) -> tuple[Path, str | None]:
    """The folder and split of ``PATH`` or ``PATH#SPLIT`` (None: none asked)."""
    found = _SPLIT.fullmatch(rest)
    assert found is not None  # the pattern matches any text
    return Path(found["path"]), found["split"]


def _file(folder: Path, stem: str) -> Path | None:
    """``folder/stem`` as it is or compressed (``queries.jsonl.gz``), or None."""
    for suffix in ("", ".gz", ".bz2", ".xz", ".zst"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    return None


def is_beir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder in BEIR's layout: a ``qrels`` folder, and
    ``queries.jsonl`` or ``corpus.jsonl`` beside it."""
    folder = Path(path)
    return (
        folder.is_dir()
        and (folder / "qrels").is_dir()
        and (_file(folder, "queries.jsonl") or _file(folder, "corpus.jsonl")) is not None
    )


def read(path: str | os.PathLike[str], split: str | None = None) -> Columns:
    """The samples of a BEIR folder's ``split`` (``test`` unless one is asked; see the
    module docstring)."""
    folder = Path(path)
    split = split or DEFAULT_SPLIT
    if not folder.is_dir():
        raise InputError(
            [Problem("no such folder", source=str(folder))], summary="not a BEIR folder"
        )
    qrels = _file(folder / "qrels", f"{split}.tsv")
    if qrels is None:
        splits = sorted(p.name.split(".")[0] for p in (folder / "qrels").glob("*.tsv*"))
        message = f"no qrels/{split}.tsv (splits: {', '.join(splits) or 'none'})"
        raise InputError([Problem(message, source=str(folder))], summary="no such split")
    table, lines = tables_in.read(qrels, "qrels")
    samples = labels_from_table(table, Where(str(qrels), lines=lines))
    if not len(samples):
        raise InputError([Problem("no judgement", source=str(qrels))], summary="empty qrels")
    queries = _file(folder, "queries.jsonl")
    if queries is None:
        return samples
    found, _ = tables_in.table_of(queries)
    return with_inputs(samples, query_texts(found, str(queries)))


def query_texts(table: pa.Table, source: str) -> pa.Table:
    """A queries table's ids and texts (``_id`` or ``id`` or ``query_id``, and ``text``
    or ``query``) as ``id`` and ``text`` columns of strings."""
    ids = next((n for n in ("_id", "id", "query_id", "query-id") if n in table.column_names), None)
    text = next((n for n in ("text", "query") if n in table.column_names), None)
    if ids is None or text is None:
        message = (
            "queries need an id column (_id, id or query_id) and a text column (text or "
            f"query); found {', '.join(table.column_names)}"
        )
        raise InputError([Problem(message, source=source)], summary="unreadable queries")
    return pa.table(
        {"id": table.column(ids).cast(pa.string()), "text": table.column(text).cast(pa.string())}
    )


def with_inputs(samples: Columns, queries: pa.Table) -> Columns:
    """Each sample's ``input``: its query's text (``queries``: ``id`` and ``text``), null
    for a query the table lacks."""
    at = pc.index_in(samples.ids, value_set=queries.column("id").combine_chunks())
    texts = queries.column("text").combine_chunks().take(at).to_pylist()
    inputs = pa.array(
        [None if text is None else orjson.dumps(text).decode() for text in texts], pa.string()
    )
    table = samples.table
    if "input" in table.column_names:
        table = table.set_column(table.column_names.index("input"), "input", inputs)
    else:
        table = table.append_column("input", inputs)
    return Columns(table, samples.docs)
