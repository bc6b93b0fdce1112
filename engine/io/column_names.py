"""The column names the peers give qrels and runs, and the names slotwise reads.

A long table of labels or of a ranking may name its columns as any of these do:

- slotwise and ir_measures: ``query_id``, ``doc_id``, ``relevance`` (qrels) or ``score``
  (runs), ``iteration`` (ignored);
- ranx (``Qrels.from_df``, ``Run.from_df``, ``from_parquet``): ``q_id``, ``doc_id``,
  ``score`` (the label of qrels, the score of runs);
- BEIR's ``qrels/*.tsv`` and its Hugging Face copies: ``query-id``, ``corpus-id``,
  ``score`` (the label);
- trec_eval's own words: ``qid``, ``docno`` (``docid``), ``rel``, ``sim``, ``rank``,
  ``run_id`` (``tag``), ``iter`` and ``Q0`` (ignored).

:func:`canonical` renames them to slotwise's; two columns that mean the same (``qid`` and
``query_id``) are refused, naming both, rather than one of them chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from engine.errors import InputError, Problem

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ALIASES", "IDS", "NAMES", "canonical", "is_header"]

_QUERY = ("query_id", "q_id", "qid", "query-id")
_DOC = ("doc_id", "docid", "docno", "corpus-id")
_TAG = ("tag", "run_id", "runid")
#: Per kind of table ("labels" or "run"), each slotwise column and the names it goes by,
#: slotwise's own first. A labels table's ``score`` is its label where it has no other.
ALIASES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "labels": {
        "query_id": _QUERY,
        "doc_id": _DOC,
        "relevance": ("relevance", "rel", "label", "score"),
    },
    "run": {
        "query_id": _QUERY,
        "doc_id": _DOC,
        "score": ("score", "sim"),
        "rank": ("rank",),
        "tag": _TAG,
    },
}
#: Every name of a query or document id column, and of a number column (read as text).
NAMES = frozenset(name for kinds in ALIASES.values() for names in kinds.values() for name in names)
#: The names of the id and tag columns among them (text, always).
IDS = frozenset((*_QUERY, *_DOC, *_TAG))


def canonical(
    table: pa.Table, kind: str, source: str | None = None, names: Mapping[str, str] | None = None
) -> pa.Table:
    """``table`` with its columns renamed to slotwise's (``kind``: "labels" or "run"):
    ``names`` first (``{"q_id": "query_id"}``, ranx's ``q_id_col=`` and the like), then the
    peers' names above. A table already in slotwise's names is returned as it is."""
    kind = "labels" if kind in ("labels", "qrels") else "run"
    twice = sorted({name for name in table.column_names if table.column_names.count(name) > 1})
    if twice:
        message = f"the column {twice[0]!r} is named twice in the header; keep one"
        raise InputError([Problem(message, source=source)], summary="ambiguous columns")
    renamed = dict(names or {})
    given = set(table.column_names)
    missing = sorted(set(renamed) - given)
    if missing:
        message = (
            f"no column {', '.join(map(repr, missing))} (found {', '.join(table.column_names)})"
        )
        raise InputError([Problem(message, source=source)], summary="a column named is not there")
    taken = set(renamed.values())
    for target, aliases in ALIASES[kind].items():
        if target in taken or (kind == "labels" and target == "relevance" and _labelled(given)):
            continue
        found = [name for name in aliases if name in given and name not in renamed]
        if len(found) > 1:
            message = f"columns {' and '.join(map(repr, found))} both name the {target}; keep one"
            raise InputError([Problem(message, source=source)], summary="ambiguous columns")
        if found and found[0] != target:
            renamed[found[0]] = target
    table = _no_views(table)
    if not renamed:
        return table
    clash = sorted(set(renamed.values()) & (given - set(renamed)))
    if clash:
        message = f"column {clash[0]!r} is there and another column would be renamed to it"
        raise InputError([Problem(message, source=source)], summary="ambiguous columns")
    return table.rename_columns([renamed.get(name, name) for name in table.column_names])


def _no_views(table: pa.Table) -> pa.Table:
    """``table`` with its string views (polars writes them) as plain strings, which
    every reader takes."""
    import pyarrow as pa

    for index, field in enumerate(table.schema):
        if pa.types.is_string_view(field.type):
            table = table.set_column(index, field.name, table.column(index).cast(pa.string()))
    return table


def _labelled(given: set[str]) -> bool:
    """Whether a labels table has a label of slotwise's own kinds (``score`` is then not
    one: ``utility`` or ``grades`` labels, say, with a system's score beside them)."""
    return bool({"relevance", "utility", "grades"} & given)


def is_header(fields: list[str]) -> bool:
    """Whether a text file's first line names columns: one of a query id's names and one
    of a document id's (``query-id corpus-id score``, ``q_id,doc_id,score``)."""
    found = {field.strip().strip('"').lower() for field in fields}
    return bool(found & set(_QUERY)) and bool(found & set(_DOC))
