"""Long-format tables: one row per (query, document), as TREC files, Parquet/Arrow files,
pandas and polars frames, pytrec_eval-shaped dicts and ranx objects hold them.

- labels: ``query_id``, ``doc_id`` and one or more of ``relevance`` (graded label),
  ``utility`` (u in [-1, 1]) and ``grades`` (the set-based scale 1..5); a null means "no
  label of this kind for this document";
- runs: ``query_id``, ``doc_id`` and ``rank`` (1 first) or ``score`` (ranked as trec_eval
  ranks: score descending, ties by doc id descending);
- results: ``query_id`` plus one column per metric label (NaN = NA).

Each becomes :class:`~engine.io.columns.Columns`, grouped and ranked with numpy and
validated vectorised (missing columns, empty ids, labels and scores that are not finite
numbers, a document labelled twice), every problem naming its row or line.
"""

from __future__ import annotations

import itertools
import marshal
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.cores import on_cores
from engine.errors import InputError, Problem
from engine.io import column_names, fingerprints, grammar, tables_in
from engine.io.columns import (
    LABEL_KINDS,
    OUTPUT_COLUMNS,
    SAMPLE_COLUMNS,
    Columns,
    grouped,
    label_lists,
    lengths,
    list_array,
    offsets_of,
    row_ids,
    string_bytes,
    table_of,
)
from engine.io.files import arrow_input, format_suffix
from engine.io.shards import Shard
from engine.io.writer import AtomicFile

__all__ = [
    "SHARD_SHIFT",
    "TABLE_SUFFIXES",
    "Coded",
    "Spread",
    "Where",
    "as_table",
    "flat",
    "flat_strings",
    "labels_columns",
    "labels_from_dicts",
    "labels_from_table",
    "labels_table",
    "read_table",
    "run_columns",
    "run_from_dicts",
    "run_from_table",
    "run_table",
    "shard_table",
    "write_table",
]

TABLE_SUFFIXES = (".parquet", ".arrow", ".feather", ".csv")
#: A CSV table's columns read as text: ids as written ("007" stays "007"), numbers then
#: read by the grammar (pyarrow's own reading takes "0x1F" for 31).
_TEXT_COLUMNS = dict.fromkeys(("query_id", "doc_id", *LABEL_KINDS, "rank", "score"), pa.string())

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_WORDED = 50  # problems worded per kind; the rest are counted
_CHECK_BLOCK = 1 << 16  # rows looked at for repeats at a time (whole queries)
_PADDING = 4  # the most padded cells per key of a table of a block's keys
_NO_ROWS = np.zeros(0, dtype=np.int64)


def flat(chunks: list[pa.Array], dtype: Any) -> npt.NDArray[Any]:
    """A numeric column's chunks (no nulls) as one writable numpy array, filled chunk by
    chunk; ``chunks`` is emptied as it goes, so a chunk no one else holds is freed once
    copied (no moment with two whole copies)."""
    out = np.empty(sum(len(chunk) for chunk in chunks), dtype=dtype)
    start = 0
    for chunk in _taken(chunks):
        out[start : start + len(chunk)] = chunk.to_numpy(zero_copy_only=False)
        start += len(chunk)
    return out


def _taken(chunks: list[Any]) -> Iterator[Any]:
    """``chunks`` in order, each removed from the list as it is given."""
    chunks.reverse()
    while chunks:
        yield chunks.pop()


def flat_strings(chunks: list[pa.Array]) -> pa.Array:
    """A string column's chunks (no nulls) as one string array, filled chunk by chunk as
    :func:`flat` fills numbers (``chunks`` is emptied); ``combine_chunks`` when the bytes
    would not fit 32-bit offsets."""
    sizes = [len(string_bytes(chunk)) for chunk in chunks]
    if sum(sizes) >= 1 << 31:
        return pa.chunked_array(chunks, pa.string()).combine_chunks()
    count = sum(len(chunk) for chunk in chunks)
    offsets, data = np.empty(count + 1, dtype=np.int32), np.empty(sum(sizes), dtype=np.uint8)
    row = at = offsets[0] = 0
    for chunk in _taken(chunks):
        own = np.frombuffer(chunk.buffers()[1], np.int32, len(chunk) + 1, chunk.offset * 4)
        data[at : at + own[-1] - own[0]] = np.frombuffer(string_bytes(chunk), np.uint8)
        offsets[row + 1 : row + len(chunk) + 1] = own[1:] + np.int32(at - own[0])
        row, at = row + len(chunk), at + int(own[-1] - own[0])
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data))


@attrs.frozen
class Coded:
    """An id column dictionary-encoded: int32 ``codes`` into ``ids`` (a string array).

    Made by :meth:`of` and :meth:`of_strings`, ``ids`` holds each id once. Made by
    :meth:`rows`, each row has a code of its own (no hashing): for ids known to differ
    within each query, as a dict's keys do, or once the repeats were refused.
    """

    codes: npt.NDArray[np.int32] = attrs.field(converter=lambda c: np.asarray(c, dtype=np.int32))
    ids: pa.Array

    @classmethod
    def of(cls, column: pa.Array | pa.ChunkedArray) -> Coded:
        """Encode a string (or dictionary, or integer) column, in C; a null is the empty
        id (which the readers refuse)."""
        if column.null_count:
            column = column.cast(pa.string()).fill_null("")
        if isinstance(column, pa.ChunkedArray) and pa.types.is_dictionary(column.type):
            return cls.of_blocks(column.chunks)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if not pa.types.is_dictionary(column.type):
            column = pc.dictionary_encode(column.cast(pa.string()))
        return cls(
            column.indices.to_numpy(zero_copy_only=False), column.dictionary.cast(pa.string())
        )

    @classmethod
    def of_blocks(cls, chunks: list[pa.DictionaryArray]) -> Coded:
        """Encode the chunks of a column dictionary-encoded chunk by chunk (as pyarrow's
        CSV reader gives them): one dictionary of every chunk's ids, in order of first
        appearance, and each chunk's codes mapped into it; ``chunks`` is emptied as it
        goes, so a chunk no one else holds is freed once coded."""
        ids = pc.dictionary_encode(
            pa.concat_arrays([chunk.dictionary.cast(pa.string()) for chunk in chunks])
            if chunks
            else pa.array([], pa.string())
        )
        into = ids.indices.to_numpy(zero_copy_only=False)
        codes = np.empty(sum(len(chunk) for chunk in chunks), dtype=np.int32)
        row = first = 0
        for chunk in _taken(chunks):
            own = chunk.indices.to_numpy(zero_copy_only=False)
            codes[row : row + own.size] = into[first + own]
            row, first = row + own.size, first + len(chunk.dictionary)
        return cls(codes, ids.dictionary)

    @classmethod
    def rows(cls, ids: pa.Array) -> Coded:
        """Each row its own code (no hashing): for ids known to be distinct within each
        query, such as the keys of one query's dict."""
        return cls(np.arange(len(ids), dtype=np.int32), ids)

    @classmethod
    def of_strings(cls, ids: Iterable[str], count: int) -> Coded:
        """Codes of ``count`` Python strings, in order of first appearance, in one C-level
        pass (a dict lookup per id, no Python step)."""
        vocabulary: dict[str, int] = {}
        first = np.fromiter(
            map(vocabulary.setdefault, ids, itertools.count()), dtype=np.int64, count=count
        )
        dense = np.zeros(max(count, 1), dtype=np.int64)
        dense[np.fromiter(vocabulary.values(), dtype=np.int64, count=len(vocabulary))] = np.arange(
            len(vocabulary)
        )
        return cls(dense[first] if count else first, pa.array(list(vocabulary), pa.string()))

    def id_of(self, row: int) -> str:
        return str(self.ids[int(self.codes[row])].as_py())


@attrs.frozen
class Where:
    """Where rows come from, to word problems: a file (``source``) and, for text files,
    the line number of each row (``lines``); else rows are counted from ``first_row``."""

    source: str | None = None
    lines: IntArray | None = None
    first_row: int = 0

    def place(self, row: int) -> str:
        return (
            f"line {self.lines[row]}" if self.lines is not None else f"row {self.first_row + row}"
        )

    def problem(self, row: int, message: str, sample_id: str | None = None) -> Problem:
        if self.lines is not None:
            return Problem(
                message, sample_id=sample_id, source=self.source, line=int(self.lines[row])
            )
        return Problem(
            f"row {self.first_row + row}: {message}", sample_id=sample_id, source=self.source
        )

    def rows(self, rows: IntArray, message: str, queries: Coded | None = None) -> list[Problem]:
        """A problem per offending row (the first few worded, the rest counted)."""
        found = [
            self.problem(row, message, queries.id_of(row) if queries is not None else None)
            for row in rows[:_WORDED].tolist()
        ]
        if rows.size > _WORDED:
            found.append(
                Problem(f"... and {rows.size - _WORDED} more: {message}", source=self.source)
            )
        return found


#: A row of a sharded input is numbered ``shard << SHARD_SHIFT | row in the shard``.
SHARD_SHIFT = 40


@attrs.frozen
class Spread(Where):
    """Where rows come from when they come from several files (the shards of an input):
    ``at`` numbers each row (see :data:`SHARD_SHIFT`), ``names`` names the shards, and
    ``lines(shard)`` gives the line of each of a shard's rows, or None where its rows are
    counted (tables); it is asked only for the shards a problem names."""

    names: tuple[str, ...] = ()
    at: IntArray = attrs.field(factory=lambda: _NO_ROWS)
    lines_of: Callable[[int], IntArray | None] = attrs.field(default=lambda shard: None)
    _lines: dict[int, IntArray | None] = attrs.field(init=False, factory=dict, eq=False)

    def _located(self, row: int) -> tuple[str, int | None, int]:
        """The shard's name, the line (None: a table) and the row within the shard."""
        key = int(self.at[row])
        shard, index = key >> SHARD_SHIFT, key & ((1 << SHARD_SHIFT) - 1)
        if shard not in self._lines:
            self._lines[shard] = self.lines_of(shard)
        lines = self._lines[shard]
        return self.names[shard], None if lines is None else int(lines[index]), index

    def place(self, row: int) -> str:
        name, line, index = self._located(row)
        return f"{name} line {line}" if line is not None else f"{name} row {index}"

    def problem(self, row: int, message: str, sample_id: str | None = None) -> Problem:
        name, line, index = self._located(row)
        if line is not None:
            return Problem(message, sample_id=sample_id, source=name, line=line)
        return Problem(f"row {index}: {message}", sample_id=sample_id, source=name)


def _empty_ids(
    coded: Coded, what: str, where: Where, queries: Coded | None = None
) -> list[Problem]:
    """Rows whose id is empty or null."""
    empty = np.flatnonzero(pc.equal(coded.ids, "").fill_null(True).to_numpy(zero_copy_only=False))
    rows = np.flatnonzero(np.isin(coded.codes, empty)) if empty.size else np.zeros(0, np.int64)
    return where.rows(rows, f"empty {what}", queries)


def _numbers(
    column: pa.Array | pa.ChunkedArray, what: str, queries: Coded, where: Where, *, optional: bool
) -> tuple[FloatArray, list[Problem]]:
    """A numeric column as float64, NaN where null (allowed when ``optional``), and a
    problem per row that is not a finite number (or null when required)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    integer = pa.types.is_integer(column.type)
    if not (integer or pa.types.is_floating(column.type) or pa.types.is_null(column.type)):
        text = pc.utf8_trim_whitespace(column.cast(pa.string()))
        number = pc.match_substring_regex(text, rf"^(?:{grammar.NUMBER.pattern})$")
        bad = np.flatnonzero(~number.fill_null(True).to_numpy(zero_copy_only=False))
        if bad.size:
            return np.zeros(0), where.rows(bad, f"{what} is not a number", queries)
        column = text
    null = column.is_null().to_numpy(zero_copy_only=False)
    if integer:  # beyond 2**53 a float64 is not the integer written
        big = pc.greater(pc.abs_checked(column.cast(pa.float64(), safe=False)), 2.0**53)
        inexact = np.flatnonzero(big.fill_null(False).to_numpy(zero_copy_only=False))
        if inexact.size:
            return np.zeros(0), where.rows(inexact, f"{what} is beyond 2**53", queries)
    values = column.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    values = values.astype(np.float64, copy=True)
    problems = where.rows(
        np.flatnonzero(~np.isfinite(values) & ~null), f"{what} is not a finite number", queries
    )
    if not optional:
        problems += where.rows(np.flatnonzero(null), f"{what} is missing", queries)
    values[null] = np.nan
    return values, problems


# -- labels --------------------------------------------------------------------------------


def labels_columns(
    queries: Coded,
    docs: Coded,
    values: Mapping[str, FloatArray],
    where: Where = Where(),
    *,
    distinct: bool = False,
) -> Columns:
    """Samples from long-format labels: one per query id, in order of first appearance,
    with one list per label kind (NaN: no label of that kind for this document; a query
    with none has a null list). A document labelled twice by one kind is an error, looked
    for unless the caller knows each query's documents are ``distinct`` (a dict's keys)."""
    order, offsets = grouped(queries.codes, len(queries.ids))
    query_codes = queries.codes if order is None else queries.codes[order]
    doc_codes = docs.codes if order is None else docs.codes[order]
    columns: dict[str, pa.Array] = {"id": queries.ids}
    problems = []
    for kind, kind_values in values.items():
        ordered = kind_values if order is None else kind_values[order]
        present = ~np.isnan(ordered)
        kept: IntArray | None = None if present.all() else np.flatnonzero(present)
        rows = order if kept is None else (kept if order is None else order[kept])
        if not distinct:
            problems += _repeats(rows, f"has two {kind} labels", queries, docs, where)
        bounds = offsets
        entries: slice | IntArray = slice(None)  # every row
        if kept is not None:
            bounds = offsets_of(np.bincount(query_codes[kept], minlength=len(queries.ids)))
            entries = kept
        columns[kind] = label_lists(
            bounds, doc_codes[entries], ordered[entries], mask=np.diff(bounds) == 0
        )
    if problems:
        raise InputError(
            problems, summary=f"invalid labels{f' {where.source}' if where.source else ''}"
        )
    return Columns(table_of(columns, SAMPLE_COLUMNS, len(queries.ids)), docs.ids)


def retrieved_twice(queries: Coded, docs: Coded, where: Where) -> list[Problem]:
    """A problem per row that retrieves a document again for its query (trec_eval refuses
    such a run)."""
    return _repeats(None, "is retrieved twice for this query", queries, docs, where)


def _repeats(
    rows: IntArray | None, saying: str, queries: Coded, docs: Coded, where: Where
) -> list[Problem]:
    """A problem per one of ``rows`` (None: every row) whose (query, document id) an
    earlier one has. The rows are grouped by query and looked at a block of whole queries
    at a time, on a thread per core: each id is fingerprinted, so the ids need no codes,
    and only the rows whose fingerprints meet in their query are coded and compared."""
    query_codes = queries.codes if rows is None else queries.codes[rows]
    order, offsets = grouped(query_codes, len(queries.ids))
    if order is not None:
        rows, query_codes = (order if rows is None else rows[order]), query_codes[order]
    codes = docs.codes if rows is None else docs.codes[rows]  # (None: every row, in order)

    def meeting(block: tuple[int, int]) -> IntArray:
        """The places (in ``codes``) of the block's rows whose fingerprints meet."""
        lo, hi = offsets[block[0]], offsets[block[1]]
        keys = fingerprints.fingerprints(row_ids(docs.ids, codes[lo:hi]))
        return lo + _meeting(keys, np.diff(offsets[block[0] : block[1] + 1]))

    starts = np.searchsorted(offsets, np.arange(0, codes.size, _CHECK_BLOCK))
    blocks = list(itertools.pairwise(np.unique([*starts, len(queries.ids)]).tolist()))
    again = np.concatenate([_NO_ROWS, *on_cores(meeting, blocks, "slotwise-check")])
    if not again.size:  # the common case: nothing to compare
        return []
    exact = Coded.of(docs.ids.take(pa.array(codes[again])))
    pairs = (query_codes[again].astype(np.int64) << np.int64(32)) | exact.codes
    return _again(pairs, again if rows is None else rows[again], saying, queries, docs, where)


def _meeting(keys: npt.NDArray[np.uint64], sizes: IntArray) -> IntArray:
    """The places of ``keys`` (grouped: ``sizes`` of them per group) whose group holds
    another key equal to it, or a superset of them (every key of such a group), the keys
    sorted group by group as the rows of a table (a few long groups: as one array)."""
    width = int(sizes.max(initial=0))
    if width < 2:
        return _NO_ROWS
    group = np.repeat(np.arange(sizes.size), sizes)
    if width * sizes.size > _PADDING * keys.size:  # a few long groups: one sort of all
        paired = fingerprints.with_rows(keys, group)
        ordered = np.sort(paired)
        met = ordered[1:][ordered[1:] == ordered[:-1]]
        return np.flatnonzero(np.isin(paired, met)) if met.size else _NO_ROWS
    table = fingerprints.sorted_rows(keys, sizes)
    meets = (table[:, 1:] == table[:, :-1]) & (np.arange(1, width) < sizes[:, None])
    return np.flatnonzero(meets.any(axis=1)[group])


def _again(
    keys: IntArray, rows: IntArray, saying: str, queries: Coded, docs: Coded, where: Where
) -> list[Problem]:
    """A problem per row whose (query, document) key an earlier row already had."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    again = np.flatnonzero(ordered[1:] == ordered[:-1]) + 1
    problems = []
    for position in again[:_WORDED].tolist():
        first, row = int(rows[order[position - 1]]), int(rows[order[position]])
        message = f"document {docs.id_of(row)!r} {saying} (the first at {where.place(first)})"
        problems.append(where.problem(row, message, queries.id_of(row)))
    return problems


def labels_from_table(table: pa.Table, where: Where = Where()) -> Columns:
    """Samples from a long-format labels table (see the module docstring; its columns may
    have a peer's names, :mod:`engine.io.column_names`)."""
    table = column_names.canonical(table, "labels", where.source)
    kinds = [kind for kind in LABEL_KINDS if kind in table.column_names]
    _require(table, ("query_id", "doc_id"), kinds or ["relevance"], "labels", where.source)
    queries = Coded.of(table.column("query_id"))
    docs = (  # a document's labels of several kinds may come on several rows: one code
        Coded.of(table.column("doc_id"))
        if len(kinds) > 1
        else Coded.rows(table.column("doc_id").combine_chunks().cast(pa.string()))
    )
    problems = _empty_ids(queries, "query_id", where) + _empty_ids(docs, "doc_id", where, queries)
    values = {}
    for kind in kinds:
        values[kind], found = _numbers(table.column(kind), kind, queries, where, optional=True)
        problems += found
    if not problems:
        unlabelled = np.logical_and.reduce([np.isnan(v) for v in values.values()])
        problems += where.rows(
            np.flatnonzero(unlabelled), f"no {' or '.join(kinds)} label", queries
        )
    if problems:
        raise InputError(
            problems, summary=f"invalid labels{f' {where.source}' if where.source else ''}"
        )
    return labels_columns(queries, docs, values, where)


def labels_from_dicts(qrels: Mapping[str, Any]) -> Columns | None:
    """Samples from pytrec_eval's qrels shape ``{qid: {docid: label}}``; None unless every
    id is a non-empty string and every label a finite number (the JSON path then words
    the problems)."""
    found = _long_from_dicts(qrels)
    if found is None:
        return None
    queries, docs, labels = found
    return labels_columns(queries, Coded.rows(docs), {"relevance": labels}, distinct=True)


def _long_from_dicts(nested: Mapping[str, Any]) -> tuple[Coded, pa.Array, FloatArray] | None:
    """``{qid: {docid: number}}`` as long columns (query, doc, number), the query ids
    coded, the doc ids and numbers read in C-level passes over the dicts (into a list
    first: Arrow reads a list twice as fast as an iterator); None unless every id is a
    non-empty string and every number a finite int or float (bools and strings are not)."""
    inner = nested.values()
    if not nested or not _string_ids(nested) or not all(type(m) is dict for m in inner):
        return None
    sizes = np.fromiter(map(len, inner), dtype=np.int64, count=len(nested))
    numbers = _finite_numbers(list(itertools.chain.from_iterable(map(dict.values, inner))))
    if numbers is None:
        return None
    try:  # an id that is not a string fails here, an empty one below
        docs = pa.array(list(itertools.chain.from_iterable(inner)), pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return None
    if len(docs) and pc.any(pc.equal(docs, "")).as_py():
        return None
    rows = np.repeat(np.arange(len(nested), dtype=np.int32), sizes)  # int32: Coded's codes
    queries = Coded(rows, pa.array(list(nested), pa.string()))
    return queries, docs, numbers


_MARSHALLED_INT = np.dtype([("tag", np.uint8), ("value", "<i4")])  # packed: 5 bytes


def _finite_numbers(values: list[Any]) -> FloatArray | None:
    """``values`` as float64 when every one is a finite int or float (bools and strings
    are not), else None."""
    if values and type(values[0]) is int:  # labels: 32-bit ints, or the general path
        numbers = _small_ints(values)
        if numbers is not None:
            return numbers
    try:  # Arrow infers int64 or double in C, refusing bools and strings among numbers
        found = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None
    if found.type not in (pa.int64(), pa.float64(), pa.null()) or found.null_count:
        return None  # (an empty run has the null type and no nulls)
    numbers = found.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    return numbers if np.isfinite(numbers).all() else None


def _small_ints(values: list[Any]) -> FloatArray | None:
    """``values`` as float64 when every one is an int (not a bool) of 32 bits, else None.
    marshal's version 2 writes such a list, in C at 3-4 times the speed of Arrow's
    inference, as 5 header bytes and then, per int, the tag ``i`` and its 4 bytes
    little-endian. Anything else has another tag (a bool ``T`` or ``F``, a float ``g``, a
    larger int ``l``, a numpy int's bytes ``s``), so the first value that is not such an
    int shows at a tag's place."""
    try:
        data = marshal.dumps(values, 2)
    except ValueError:  # an object marshal cannot write (an int subclass, say)
        return None
    count = len(values)
    if len(data) != 5 + 5 * count:
        return None
    records = np.frombuffer(data, _MARSHALLED_INT, count, offset=5)
    if not (records["tag"] == ord("i")).all():
        return None
    return records["value"].astype(np.float64)


def _string_ids(ids: Mapping[Any, Any]) -> bool:
    """Every key a non-empty string."""
    return set(map(type, ids)) <= {str} and "" not in ids


# -- runs -----------------------------------------------------------------------------------


def run_columns(
    queries: Coded, docs: Coded, *, scores: FloatArray | None = None, ranks: IntArray | None = None
) -> Columns:
    """Outputs from a long-format run: one ranked list per query id (in order of first
    appearance), by ``ranks`` ascending, or by ``scores`` as trec_eval orders them
    (score descending, ties by doc id descending)."""
    order, offsets = grouped(queries.codes, len(queries.ids))
    rows: IntArray | None = order  # None: the rows are in order as they are
    query_codes = queries.codes if order is None else queries.codes[order]
    if ranks is not None:
        ranked = ranks if order is None else ranks[order]
        by_rank = np.lexsort((ranked, query_codes))
        rows = by_rank if order is None else order[by_rank]
    codes = docs.codes if rows is None else docs.codes[rows]
    columns = {"id": queries.ids}
    if scores is not None:
        score = scores if rows is None else scores[rows]
        codes, ties, given = _trec_order(codes, query_codes, score, docs.ids)
        if ties is not None:  # what ordering ties another way needs (ir_measures' providers)
            columns["tied"] = list_array(offsets, pa.array(np.concatenate(([False], ties))))
        if given is not None:
            first = np.repeat(offsets[:-1], np.diff(offsets))
            columns["run_order"] = list_array(offsets, pa.array(given - first, pa.int32()))
        columns.update(_zero_scores(score, query_codes, len(queries.ids)))
    columns["retrieved"] = list_array(offsets, pa.array(codes, pa.int32()))
    return Columns(table_of(columns, OUTPUT_COLUMNS, len(queries.ids)), docs.ids)


def _zero_scores(
    score: FloatArray, query_codes: npt.NDArray[np.int32], count: int
) -> dict[str, pa.Array]:
    """The ``positive_scores`` and ``zero_scores`` counts of each of ``count`` queries
    (``query_codes``: each row's), or nothing when every score is above 0."""
    positive = score > 0
    if positive.all():
        return {}
    return {
        "positive_scores": pa.array(np.bincount(query_codes, positive, count).astype(np.int32)),
        "zero_scores": pa.array(np.bincount(query_codes, score == 0, count).astype(np.int32)),
    }


def _trec_order(
    codes: npt.NDArray[np.int32],
    query_codes: npt.NDArray[np.int32],
    score: FloatArray,
    ids: pa.Array,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_] | None, IntArray | None]:
    """The document codes of rows grouped by query, put in trec_eval's order; where two
    neighbours of a query tie in that order (``ties[p]``: row ``p + 1`` ties with ``p``;
    None when none does); and the row each one held before its ties were broken, by
    score with ties in the order the run gave them, as cwl_eval ranks them (None when
    breaking them moved nothing). A run already in trec_eval's order (scores strictly
    descending within each query, as runs are written) is found with one check and kept
    as it is; document ids are compared only among rows whose scores tie, and only their
    codes move."""
    rising, tied = _out_of_order(score, query_codes)
    if not rising and not tied:
        return codes, None, None
    if rising:
        order = np.lexsort((-score, query_codes))  # stable: ties keep the run's order
        codes, query_codes, score = codes[order], query_codes[order], score[order]
    else:  # only ties to break: the codes are copied, the rest read in place
        codes = codes.copy()
    ties = (query_codes[1:] == query_codes[:-1]) & (score[1:] == score[:-1])
    given = _break_ties(codes, ties, ids)
    return codes, (ties if ties.any() else None), given


def _break_ties(
    codes: npt.NDArray[np.int32], ties: npt.NDArray[np.bool_], ids: pa.Array
) -> IntArray | None:
    """Reorder, in place, each run of ``codes`` whose scores tie (``ties[p]``: position
    ``p + 1`` ties with ``p``) by document id descending, as trec_eval does; only the
    tied rows' ids are compared. Where that moves rows: the position each one held
    before (None when nothing moves)."""
    if not ties.any():
        return None
    member = np.zeros(codes.size, dtype=np.bool_)
    member[1:] |= ties
    member[:-1] |= ties
    where = np.flatnonzero(member)
    group = np.cumsum(~np.concatenate(([False], ties))[where])  # a number per run of ties
    names = ids.take(pa.array(codes[where], pa.int32()))
    within = pc.sort_indices(
        pa.table({"group": group, "doc": names}),
        sort_keys=[("group", "ascending"), ("doc", "descending")],
    ).to_numpy()
    if (within == np.arange(within.size)).all():
        return None
    codes[where] = codes[where][within]
    given = np.arange(codes.size, dtype=np.int64)
    given[where] = where[within]
    return given


def _out_of_order(score: FloatArray, query_codes: npt.NDArray[np.int32]) -> tuple[bool, bool]:
    """Whether some query's scores rise, and whether two of its neighbours tie, checked in
    slices to keep the temporaries small."""
    step = 1 << 22
    rising = tied = False
    for start in range(0, max(score.size - 1, 0), step):
        end = min(start + step + 1, score.size)
        s, q = score[start:end], query_codes[start:end]
        same = q[1:] == q[:-1]
        rising = rising or bool(((s[1:] > s[:-1]) & same).any())
        tied = tied or bool(((s[1:] == s[:-1]) & same).any())
    return rising, tied


def run_from_table(table: pa.Table, where: Where = Where()) -> Columns:
    """Outputs from a long-format run table with ``rank`` or ``score`` (its columns may
    have a peer's names, :mod:`engine.io.column_names`)."""
    table = column_names.canonical(table, "run", where.source)
    names = table.column_names
    order = "rank" if "rank" in names else "score"
    _require(
        table,
        ("query_id", "doc_id"),
        [order if order in names else "rank or score"],
        "runs",
        where.source,
    )
    queries, docs = Coded.of(table.column("query_id")), Coded.of(table.column("doc_id"))
    problems = _empty_ids(queries, "query_id", where) + _empty_ids(docs, "doc_id", where, queries)
    numbers, found = _numbers(table.column(order), order, queries, where, optional=False)
    problems += found
    if not problems and order == "rank":
        problems += _rank_problems(queries, numbers, where)
    if problems:
        raise InputError(
            problems, summary=f"invalid run{f' {where.source}' if where.source else ''}"
        )
    if order == "score":
        return run_columns(queries, docs, scores=numbers)
    ranked = run_columns(queries, docs, ranks=numbers.astype(np.int64))
    if "score" in names:
        _agree(ranked, table.column("score"), queries, docs, where)
    return ranked


def _rank_problems(queries: Coded, ranks: FloatArray, where: Where) -> list[Problem]:
    """A rank is a place: each query's ranks are 1, 2, ..., n, each once (a rank twice,
    or a gap, is refused: which document is first would be a guess)."""
    bad = np.flatnonzero((ranks < 1) | (ranks != np.floor(ranks)))
    if bad.size:
        return where.rows(bad, "rank must be a positive integer", queries)
    order = np.lexsort((ranks, queries.codes))
    query, rank = queries.codes[order], ranks[order]
    start = np.flatnonzero(np.concatenate(([True], query[1:] != query[:-1])))
    place = np.arange(rank.size) - np.repeat(start, np.diff(np.append(start, rank.size))) + 1
    twice = np.flatnonzero((query[1:] == query[:-1]) & (rank[1:] == rank[:-1])) + 1
    if twice.size:
        return where.rows(order[twice], "this rank is given twice for this query", queries)
    gaps = np.flatnonzero(rank != place)
    message = "a query's ranks must be 1, 2, 3, ... with no gap; this rank leaves one"
    return where.rows(order[gaps[np.unique(query[gaps], return_index=True)[1]]], message, queries)


def _agree(
    ranked: Columns, scores: pa.ChunkedArray, queries: Coded, docs: Coded, where: Where
) -> None:
    """A run with both ``rank`` and ``score``: refused unless the ranks order each query's
    documents as trec_eval orders them by score (score descending, ties by doc id
    descending)."""
    values, problems = _numbers(scores, "score", queries, where, optional=False)
    if not problems:
        by_score = run_columns(queries, docs, scores=values).column("retrieved")
        given = ranked.column("retrieved")
        differ = np.flatnonzero(
            pc.list_flatten(given).to_numpy() != pc.list_flatten(by_score).to_numpy()
        )
        if not differ.size:
            return
        query = int(np.searchsorted(offsets_of(lengths(given)), differ[0], side="right")) - 1
        message = (
            "rank and score order the documents differently (by score, as trec_eval "
            "ranks: score descending, ties by doc id descending); give one of them"
        )
        problems = [Problem(message, sample_id=ranked.ids[query].as_py(), source=where.source)]
    raise InputError(problems, summary=f"invalid run{f' {where.source}' if where.source else ''}")


def run_from_dicts(run: Mapping[str, Any]) -> Columns | None:
    """Outputs from pytrec_eval's run shape ``{qid: {docid: score}}``, ranked as trec_eval
    ranks; None unless every id is a non-empty string and every score a finite number
    (the outputs path then takes it, or words the problems)."""
    found = _long_from_dicts(run)
    if found is None:
        return None
    queries, docs, scores = found
    return run_columns(queries, Coded.rows(docs), scores=scores)  # a dict's keys are distinct


# -- back to long tables -------------------------------------------------------------------


def labels_table(samples: Columns) -> pa.Table:
    """Samples' labels as a long table: ``query_id``, ``doc_id``, ``relevance``,
    ``utility``, ``grades`` (null where a document has no label of that kind), queries in
    order."""
    keys, values = [], {}
    for kind in LABEL_KINDS:
        column = samples.column(kind)
        entries = pc.list_flatten(column)
        rows = np.repeat(np.arange(len(samples), dtype=np.int64), lengths(column))
        kind_keys = (rows << np.int64(32)) | entries.field("doc").to_numpy(zero_copy_only=False)
        keys.append(kind_keys)
        values[kind] = (kind_keys, entries.field("label").to_numpy(zero_copy_only=False))
    every = np.unique(np.concatenate(keys))
    columns = {
        "query_id": samples.ids.take(pa.array(every >> np.int64(32))),
        "doc_id": samples.docs.take(pa.array(every & np.int64(0xFFFFFFFF))),
    }
    for kind, (kind_keys, labels) in values.items():
        found = np.full(every.size, np.nan)
        found[np.searchsorted(every, kind_keys)] = labels
        columns[kind] = pa.array(found, mask=np.isnan(found))
    return pa.table(columns)


def run_table(outputs: Columns) -> pa.Table:
    """Ranked lists as a long table: ``query_id``, ``doc_id``, ``rank`` (1 first)."""
    column = outputs.column("retrieved")
    sizes = lengths(column)
    rows = np.repeat(np.arange(len(outputs), dtype=np.int64), sizes)
    ranks = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes) + 1
    return pa.table(
        {
            "query_id": outputs.ids.take(pa.array(rows)),
            "doc_id": outputs.docs.take(pc.list_flatten(column)),
            "rank": pa.array(ranks, pa.int64()),
        }
    )


# -- files and frames ----------------------------------------------------------------------


def _require(
    table: pa.Table, ids: Sequence[str], values: Sequence[str], what: str, source: str | None
) -> None:
    """The columns a table needs are there, and its id columns hold text or integers (as
    their decimal digits; other types are refused: their text would not be the id)."""
    needed = [*ids, *values]
    missing = [c for c in needed if c not in table.column_names]
    for name in ids:
        kind = table.schema.field(name).type if name in table.column_names else pa.string()
        kind = kind.value_type if pa.types.is_dictionary(kind) else kind
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and not (
            pa.types.is_integer(kind) or pa.types.is_null(kind)
        ):
            message = f"{name} is a column of {kind}; ids are text (or integers)"
            raise InputError([Problem(message, source=source)])
    if missing:
        raise InputError(
            [
                Problem(
                    f"{what} need columns {', '.join(needed)}; missing {', '.join(missing)} "
                    f"(found {', '.join(table.column_names) or 'none'})",
                    source=source,
                )
            ]
        )


def read_table(path: str | os.PathLike[str]) -> pa.Table:
    """An Arrow table from a ``.parquet``, ``.arrow``/``.feather`` or ``.csv`` file (a CSV
    file with a header line; compressed by suffix)."""
    import pyarrow.csv
    import pyarrow.feather
    import pyarrow.parquet

    path = Path(path)
    try:
        if format_suffix(path) == ".parquet":
            return pyarrow.parquet.read_table(path)
        if format_suffix(path) == ".csv":
            return pyarrow.csv.read_csv(arrow_input(path), convert_options=csv_options())
        return pyarrow.feather.read_table(path)
    except (OSError, pa.ArrowInvalid) as error:
        raise InputError(
            [Problem(f"cannot read columnar file: {error}", source=str(path))]
        ) from None


def shard_table(shard: Shard, kind: str, *, by_score: bool = False) -> pa.Table:
    """The long rows of one shard of a ``labels`` or ``run`` table (Parquet, Arrow/Feather,
    CSV, TSV or JSONL, by content: :mod:`engine.io.tables_in`): ``query_id``
    (dictionary-encoded) and ``doc_id`` as text, and the label or ranking columns as
    float64 (null: none); a missing column, or a value that is not a finite number, is an
    :class:`InputError` naming the file (and the row or line). A run ``by_score`` (as
    TREC text is ranked) keeps its ``score`` alone, its ``rank`` (if any) left out."""
    table, lines = tables_in.read(shard, kind)
    names = table.column_names
    if kind == "labels":
        values = [name for name in LABEL_KINDS if name in names]
        _require(table, ("query_id", "doc_id"), values or ["relevance"], "labels", shard.name)
    else:
        values = ["rank" if "rank" in names and not by_score else "score"]
        wanted = values if values[0] in names or by_score else ["rank or score"]
        _require(table, ("query_id", "doc_id"), wanted, "runs", shard.name)
    where = Where(shard.name, lines=lines)
    queries = Coded.of(table.column("query_id"))
    columns = {
        "query_id": pa.DictionaryArray.from_arrays(pa.array(queries.codes), queries.ids),
        "doc_id": table.column("doc_id").cast(pa.string()),
    }
    problems = []
    for name in values:
        numbers, found = _numbers(table.column(name), name, queries, where, optional=True)
        problems += found
        columns[name] = pa.array(numbers, mask=np.isnan(numbers))
    if problems:
        raise InputError(problems, summary=f"invalid {kind} {shard.name}")
    return pa.table(columns)


def csv_options() -> Any:
    """How a CSV table is read: ids, labels and scores as text as written (``NA``,
    ``null``, ``nan`` ids too), empty cells (only) as missing."""
    import pyarrow.csv

    return pyarrow.csv.ConvertOptions(
        column_types=_TEXT_COLUMNS, null_values=[""], strings_can_be_null=True
    )


def as_table(frame: Any) -> pa.Table | None:
    """An Arrow table from a pandas or polars DataFrame or an Arrow table; None for
    anything else."""
    if isinstance(frame, pa.Table):
        return frame
    module = type(frame).__module__.split(".")[0]
    if module == "pandas":
        return pa.Table.from_pandas(frame, preserve_index=False)
    if module == "polars":
        return frame.to_arrow()
    return None


def write_table(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write a table as ``.parquet`` or ``.arrow``/``.feather``, atomically."""
    import pyarrow.feather
    import pyarrow.parquet

    path = Path(path)
    if path.suffix.lower() not in (".parquet", ".arrow", ".feather"):
        raise InputError([Problem("use one of .parquet, .arrow, .feather", source=str(path))])
    with AtomicFile(path, binary=True) as handle:
        if path.suffix.lower() == ".parquet":
            pyarrow.parquet.write_table(table, handle)
        else:
            pyarrow.feather.write_feather(table, handle)
