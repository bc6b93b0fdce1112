"""Sharded inputs of long rows (TREC qrels and runs, labels and run tables): each shard
read into rows, and rows of every shard made into columns.

One process reads an input as one bucket: its shards in order, their rows one after the
other, so the columns are those of one file holding every shard's lines (a query may
span shards). On a cluster (:mod:`engine.evaluation.distributed`) a worker reads each
shard, and a worker makes the columns of the rows of some queries gathered from every
shard, so a document labelled (or ranked) twice for a query is found whichever shards
hold the two lines, and every problem names the file and the line (or the row of a
table). Each row is numbered by its shard and its place there
(:data:`~engine.io.frames.SHARD_SHIFT`), which orders gathered rows as the input orders
them and each sample by its first row.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, Problem
from engine.io import frames, shards, sniff, tables_in, trec
from engine.io.columns import LABEL_KINDS, Columns
from engine.io.frames import SHARD_SHIFT, Coded, Spread
from engine.io.shards import Shard, Spec, resolve, split, unchanged

__all__ = [
    "Long",
    "Rows",
    "Runs",
    "columns",
    "empty",
    "first_rows",
    "read",
    "refused",
    "rows",
    "stream",
]

IntArray = npt.NDArray[np.int64]

#: Bytes of an uncompressed TREC file read by one task on a cluster, at the most.
RANGE_BYTES = 1 << 26


@attrs.frozen
class Long:
    """A sharded input of long rows: its shards in order, what they hold (``kind``:
    "qrels" or "run", TREC files; "labels" or "run" tables with ``trec`` False)."""

    shards: tuple[Shard, ...]
    kind: str
    trec: bool

    @classmethod
    def of(cls, spec: Spec, kind: str, *, trec: bool) -> Long:
        """The input ``spec`` names. Each shard of qrels or a run (``trec``) may be TREC
        text or a table (Parquet, Arrow, CSV, TSV, JSONL: :mod:`engine.io.tables_in`),
        told by its content, and read as the TREC text of its rows would be."""
        return cls(resolve(spec), kind, trec)

    def ranged(self, size: int = RANGE_BYTES) -> Long:
        """The same input with its uncompressed TREC files cut into byte ranges of about
        ``size`` bytes (a worker's task each). Nothing is read here (the driver lists
        files, the workers read them): a file whose content turns out to be a table, or
        compressed without a compression suffix, is read whole by its first range's
        worker, and its other ranges are empty (:func:`rows`)."""
        return attrs.evolve(self, shards=split(self.shards, size)) if self.trec else self

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(shard.name for shard in self.shards)

    def where(self, at: IntArray) -> Spread:
        """Where rows numbered ``at`` come from (lines of TREC files read when asked)."""
        lines = functools.partial(_lines, self)
        return Spread(_described(self.shards), names=self.names, at=at, lines_of=lines)


def _lines(long: Long, shard: int) -> IntArray | None:
    """The line of each row of a shard (None for a table: its rows are counted)."""
    found = _read_as(long.shards[shard]) if long.trec else None
    if found is None:
        return None
    if is_text(found):
        return trec.shard_lines(found, long.kind)
    return tables_in.table_of(found)[1]


@functools.cache
def is_text(shard: Shard) -> bool:
    """Whether a shard of qrels or a run is TREC text, else a table (its content tells,
    :mod:`engine.io.sniff`)."""
    return tables_in.format_of(attrs.evolve(shard, start=0, end=None)) == sniff.TREC


def _read_as(shard: Shard) -> Shard | None:
    """What a worker reads for a shard: itself, unless it is a byte range of a file that
    is not plain TREC text (a table, or compressed without a compression suffix): then
    the whole file for its first range, and nothing (None) for the others."""
    whole = attrs.evolve(shard, start=0, end=None)
    if shard == whole or (is_text(whole) and not _compressed(whole)):
        return shard
    return whole if shard.start == 0 else None


@functools.cache
def _compressed(shard: Shard) -> bool:
    """Whether a file's first bytes start a compressed stream."""
    with shards.open_file(shard) as handle:
        return sniff.codec(bytes(handle.read(8))) is not None


def _trec_table(shard: Shard, kind: str) -> pa.Table:
    """The long rows of a qrels or run table, as TREC text's: ``query_id``, ``doc_id``
    and ``relevance`` (qrels) or ``score`` (a run, ranked as trec_eval ranks: by score;
    a run table of ranks alone is outputs, ``--outputs``)."""
    table = frames.shard_table(shard, "labels" if kind == "qrels" else "run", by_score=True)
    value = "relevance" if kind == "qrels" else "score"
    if value not in table.column_names:  # (utility or grades labels alone)
        message = f"qrels need a relevance label (found {', '.join(table.column_names)})"
        raise InputError([Problem(message, source=shard.name)], summary=f"invalid {kind}")
    missing = table.column(value).null_count
    if missing:
        message = f"{missing} rows have no {value}"
        raise InputError([Problem(message, source=shard.name)], summary=f"invalid {kind}")
    return table.select(["query_id", "doc_id", value])


def _described(found: Sequence[Shard]) -> str:
    names = sorted({shard.name for shard in found})
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more files"


@attrs.frozen
class Runs:
    """The runs of a shard's rows (see :class:`Rows`), without the rows: each run's query,
    first row number and length; for labels, per kind the rows of each run that have a
    label of that kind, and the largest relevance label (None: none)."""

    queries: pa.DictionaryArray
    starts: IntArray
    lengths: IntArray
    labelled: dict[str, IntArray]
    top: float | None


@attrs.frozen
class Rows:
    """Long rows (of a shard, or of a bucket of shards' rows): per row the document and
    the numbers (``table``); per run of rows of one query numbered one after the other,
    the query (``queries``, dictionary-encoded, each id in order of first appearance),
    the number of the run's first row and its length. A query's lines, together in a
    file as they usually are, cost nothing per row to ship."""

    table: pa.Table
    queries: pa.DictionaryArray
    starts: IntArray
    lengths: IntArray

    @classmethod
    def of(cls, table: pa.Table) -> Rows:
        """The rows of a table of ``query_id``, ``at`` and the other columns."""
        queries = Coded.of(table.column("query_id"))
        at = table.column("at").to_numpy().astype(np.int64, copy=False)
        cut = np.flatnonzero((queries.codes[1:] != queries.codes[:-1]) | (at[1:] != at[:-1] + 1))
        first = np.concatenate(([0], cut + 1)) if at.size else _NONE
        lengths = np.diff(np.append(first, at.size))
        runs = pa.DictionaryArray.from_arrays(pa.array(queries.codes[first]), queries.ids)
        return cls(table.drop_columns(["query_id", "at"]), runs, at[first], lengths)

    def __len__(self) -> int:
        return int(self.table.num_rows)

    @property
    def nbytes(self) -> int:
        return int(
            self.table.nbytes + self.queries.nbytes + self.starts.nbytes + self.lengths.nbytes
        )

    def only(self, codes: npt.ArrayLike) -> Rows:
        """The rows of the queries ``codes`` name (codes into ``queries``' dictionary), with
        buffers of their own (shipping them ships no other rows)."""
        return self._kept(np.isin(self.queries.indices.to_numpy(zero_copy_only=False), codes))

    def without(self, codes: npt.ArrayLike) -> Rows:
        """The rows of the other queries than ``codes`` name (itself when there is none)."""
        found = np.isin(self.queries.indices.to_numpy(zero_copy_only=False), codes)
        return self._kept(~found) if found.any() else self

    def _kept(self, keep: npt.NDArray[np.bool_]) -> Rows:
        """The rows of the runs ``keep`` marks, in order; the query dictionary cut down to
        their queries, in order of first appearance."""
        runs = np.flatnonzero(keep)
        lengths = self.lengths[runs]
        first = np.repeat(np.cumsum(self.lengths)[runs] - lengths, lengths)
        taken = first + np.arange(first.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        ids = self.queries.dictionary
        codes = self.queries.indices.to_numpy(zero_copy_only=False)[runs]
        kept, seen = np.unique(codes, return_index=True)
        kept = kept[np.argsort(seen, kind="stable")]
        local = np.empty(len(ids), dtype=np.int32)
        local[kept] = np.arange(kept.size, dtype=np.int32)
        queries = pa.DictionaryArray.from_arrays(pa.array(local[codes]), ids.take(pa.array(kept)))
        return Rows(self.table.take(pa.array(taken)), queries, self.starts[runs], lengths)

    def runs(self) -> Runs:
        """What the runs of these rows tell without the rows: each run's query, first
        row number and length; per label kind, the rows of each run with a label of that
        kind; the largest relevance label."""
        bounds = np.cumsum(self.lengths) - self.lengths
        labelled, top = {}, None
        for kind in LABEL_KINDS:
            if kind not in self.table.column_names:
                continue
            present = self.table.column(kind).is_valid().to_numpy(zero_copy_only=False)
            counts = np.add.reduceat(present.astype(np.int64), bounds) if bounds.size else _NONE
            labelled[kind] = np.where(self.lengths > 0, counts, 0)
            if kind == "relevance" and present.any():
                top = float(pc.max(self.table.column(kind)).as_py())
        return Runs(self.queries, self.starts, self.lengths, labelled, top)

    def expanded(self) -> pa.Table:
        """The rows with their ``query_id`` and ``at`` (each row's number)."""
        run = np.repeat(np.arange(self.lengths.size), self.lengths)
        offset = np.arange(run.size) - np.repeat(
            np.cumsum(self.lengths) - self.lengths, self.lengths
        )
        codes = self.queries.indices.to_numpy(zero_copy_only=False)[run].astype(np.int32)
        query = pa.DictionaryArray.from_arrays(pa.array(codes), self.queries.dictionary)
        table = self.table.add_column(0, "query_id", query)
        return table.append_column("at", pa.array(self.starts[run] + offset, pa.int64()))


def rows(long: Long, index: int) -> Rows:
    """The long rows of shard ``index``; a file that changed since it was listed (before
    or while it was read) is refused (:func:`~engine.io.shards.unchanged`)."""
    shard = long.shards[index]
    if not long.trec:
        found = frames.shard_table(shard, long.kind)
    elif (read := _read_as(shard)) is None:
        found = empty(long).drop_columns(["at"])  # its first range reads the file
    elif is_text(read):
        found = trec.shard_rows(read, long.kind)
    else:
        found = _trec_table(read, long.kind)
    unchanged(shard)
    return Rows.of(_numbered(found, index, 0))


def _numbered(table: pa.Table, shard: int, first: int) -> pa.Table:
    at = (np.int64(shard) << np.int64(SHARD_SHIFT)) + first + np.arange(table.num_rows)
    return table.append_column("at", pa.array(at, pa.int64()))


def columns(long: Long, pieces: Sequence[Rows]) -> Columns:
    """The columns of the rows of ``pieces`` (in the input's order: rows of earlier shards
    first), as one file of those lines makes them; problems name each row's file."""
    tables = [piece.expanded() for piece in pieces]
    table = pa.concat_tables(tables, promote_options="permissive") if tables else empty(long)
    at = table.column("at").to_numpy().astype(np.int64, copy=False) if table.num_rows else _NONE
    table = table.drop_columns(["at"])
    where = long.where(at)
    if long.trec:
        return trec.shard_columns(table, long.kind, where)
    if long.kind == "labels":
        return frames.labels_from_table(table, where)
    return frames.run_from_table(table, where)


_NONE = np.zeros(0, dtype=np.int64)


def empty(long: Long) -> pa.Table:
    """Long rows of ``long``'s kind, none."""
    value = {"qrels": "relevance", "labels": "relevance"}.get(long.kind, "score")
    ids = pa.DictionaryArray.from_arrays(pa.array([], pa.int32()), pa.array([], pa.string()))
    return pa.table(
        {
            "query_id": ids,
            "doc_id": pa.array([], pa.string()),
            value: pa.array([], pa.float64()),
            "at": pa.array([], pa.int64()),
        }
    )


def first_rows(pieces: Sequence[Rows]) -> IntArray:
    """The number of the first row of each query of ``pieces`` (as :func:`columns` orders
    the samples: by first appearance)."""
    if not pieces:
        return _NONE
    queries = Coded.of(pa.chunked_array([piece.queries for piece in pieces]))
    starts = np.concatenate([piece.starts for piece in pieces])
    first = np.full(len(queries.ids), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, queries.codes, starts)
    return first


def read(long: Long) -> Columns:
    """Every shard's rows as one process reads them: one bucket."""
    return columns(long, [rows(long, index) for index in range(len(long.shards))])


def stream(long: Long) -> Iterator[Columns]:
    """The columns in blocks of whole queries, shard after shard: a query's lines must
    be together (they may go on from one shard into the next), as in a streamed file. A
    file that changed since it was listed is refused when it is opened, or once read
    (what was yielded of it is then not to be written)."""
    held: pa.Table | None = None
    for index, shard in enumerate(long.shards):
        first = 0
        for block in _blocks(long, shard):
            table = _numbered(block, index, first)
            first += block.num_rows
            if held is not None and held.num_rows:
                table = pa.concat_tables([held, table], promote_options="permissive")
            cut = _last_query(table)
            if cut:
                yield columns(long, [Rows.of(_recoded(table.slice(0, cut)))])
            held = _recoded(table.slice(cut))
        unchanged(shard)
    if held is not None and held.num_rows:
        yield columns(long, [Rows.of(held)])


def _recoded(table: pa.Table) -> pa.Table:
    """``table`` with its query column coded anew: a slice keeps its whole dictionary,
    and the ids its rows do not name would be samples."""
    queries = Coded.of(table.column("query_id").cast(pa.string()))
    column = pa.DictionaryArray.from_arrays(pa.array(queries.codes), queries.ids)
    return table.set_column(0, "query_id", column)


def _blocks(long: Long, shard: Shard) -> Iterator[pa.Table]:
    if not long.trec:
        return iter([frames.shard_table(shard, long.kind)])
    read = _read_as(shard)
    if read is None:
        return iter([])
    if is_text(read):
        return trec.shard_blocks(read, long.kind)
    return iter([_trec_table(read, long.kind)])


def _last_query(table: pa.Table) -> int:
    """Where the rows of the table's last query begin (it may go on in the next block)."""
    if not table.num_rows:
        return 0
    queries = table.column("query_id").cast(pa.string())
    same = pc.equal(queries, queries[-1]).to_numpy(zero_copy_only=False)
    others = np.flatnonzero(~same)
    return int(others[-1]) + 1 if others.size else 0


def refused(problems: Sequence[Problem], long: Long, hint: str = "") -> InputError:
    """One error for the problems of every shard of an input, in file and line order."""
    order = {name: place for place, name in enumerate(long.names)}
    ordered = sorted(problems, key=lambda p: (order.get(p.source or "", -1), p.line or 0))
    summary = f"invalid {long.kind} {_described(long.shards)}"
    return InputError(ordered, summary=summary, hint=hint)
