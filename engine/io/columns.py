"""The columnar form every source produces and every evaluation consumes.

:class:`Columns` is an Arrow table with one row per sample, plus ``docs``, the
vocabulary of document ids: every document column holds int32 codes into it (dictionary
encoding, one dictionary shared by all the table's columns). ``docs`` is a string array,
or a chunked array of them where outputs were put beside samples (both sides'
vocabularies one after the other, neither copied). A dataset's sample columns
and a system's output columns live in separate tables until they are aligned by sample
id into one.

Sample columns:

- ``id`` (string): the sample id;
- ``relevance``, ``utility``, ``grades`` (list of struct ``{doc: int32, label:
  float64}``): labels in the order given; null when the sample has none of that kind;
- ``answers`` (list of string) and ``groups`` (list of struct ``{group: string, docs:
  list of int32}``): null when absent;
- ``k`` (int64): ``metadata.k``, null when unset;
- ``input``, ``metadata`` (string): canonical JSON text (sorted keys), null when absent;
- ``claims`` (list of string): the ids of ``expected_output.claims``, null when absent.

Output columns: ``retrieved`` (list of int32, rank 1 first, as given, duplicates
included; null: no output), ``texts`` (list of string or null, one per retrieved item;
null when no item has a text), ``pool`` and ``cited`` (list of int32; null when absent),
``tied`` (list of bool, one per retrieved item: its score equals the one ranked before
it; null unless the outputs were ranked by scores and some tie), ``run_order`` (list of
int32, one per retrieved item: its 0-based rank were tied scores kept in the order the
outputs gave them, as cwl_eval ranks them; null unless that order differs),
``positive_scores`` and ``zero_scores`` (int32: how many retrieved items score above 0,
and exactly 0; null unless some score of the outputs is 0 or below), and ``error``
(string: why the system failed on the sample, an error row with no output; null for an
output), and an output's hops (``hops``, ``hop_retrieved``, ``hop_pool``,
``hop_selected``: see :mod:`engine.io.hops`; null for an output without hops).

A vocabulary need only tell ids apart within a row: in one row, equal ids share a code
and different ids have different codes, while an id two rows name may have a code in each
(labels and runs of millions of distinct ids are coded per block of queries, never hashed
as a whole; a JSON dataset's samples hold each id once). Putting outputs beside samples
matches each output id with the same row's labelled ids, a block of rows at a time, so a
ranked document and its label share a code.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.cores import on_cores
from engine.io.fingerprints import fingerprints, first_equals, order_within, same_strings

__all__ = [
    "HOP_COLUMNS",
    "LABEL_KINDS",
    "OUTPUT_COLUMNS",
    "SAMPLE_COLUMNS",
    "Columns",
    "ContentHash",
    "canonical_lines",
    "counts_up",
    "grouped",
    "label_lists",
    "labelled_codes",
    "lengths",
    "list_array",
    "merge_vocabularies",
    "offsets_of",
    "owned_codes",
    "stack",
    "string_bytes",
    "table_of",
]

IntArray = npt.NDArray[np.int64]
CodeArray = npt.NDArray[np.int32]

CODE = pa.int32()
IDS = pa.list_(CODE)
LABELS = pa.list_(pa.struct([("doc", CODE), ("label", pa.float64())]))
GROUPS = pa.list_(pa.struct([("group", pa.string()), ("docs", IDS)]))

#: Label kinds: each a list of (doc, label) per sample.
LABEL_KINDS = ("relevance", "utility", "grades")
#: Output columns holding lists of document codes (``hop_*``: every hop's, engine.io.hops).
ID_LISTS = ("retrieved", "pool", "cited", "hop_retrieved", "hop_pool", "hop_selected")
#: Every column holding document codes.
DOC_COLUMNS = (*LABEL_KINDS, *ID_LISTS, "groups")
#: Old document codes to new ones.
Remap = Callable[[npt.NDArray[Any]], npt.NDArray[Any]]

SAMPLE_COLUMNS: dict[str, pa.DataType] = {
    "id": pa.string(),
    "relevance": LABELS,
    "utility": LABELS,
    "grades": LABELS,
    "answers": pa.list_(pa.string()),
    "groups": GROUPS,
    "k": pa.int64(),
    "input": pa.string(),
    "metadata": pa.string(),
    "claims": pa.list_(pa.string()),
}
#: An output's hops (engine.io.hops): each hop's query and the length of each of its
#: lists (null: it has none), and every hop's lists one after the other.
HOP_COLUMNS: dict[str, pa.DataType] = {
    "hops": pa.list_(
        pa.struct(
            [
                ("query", pa.string()),
                ("retrieved", CODE),
                ("pool", CODE),
                ("selected", CODE),
            ]
        )
    ),
    "hop_retrieved": IDS,
    "hop_pool": IDS,
    "hop_selected": IDS,
}
OUTPUT_COLUMNS: dict[str, pa.DataType] = {
    "id": pa.string(),
    "retrieved": IDS,
    "texts": pa.list_(pa.string()),
    "pool": IDS,
    "cited": IDS,
    "tied": pa.list_(pa.bool_()),
    "run_order": pa.list_(CODE),
    "positive_scores": CODE,
    "zero_scores": CODE,
    "error": pa.string(),
    **HOP_COLUMNS,
}


# -- building ---------------------------------------------------------------------------


def list_array(offsets: npt.ArrayLike, values: pa.Array, mask: Any = None) -> pa.Array:
    """A list array from ``n + 1`` offsets and flat values; ``mask`` marks null rows
    (which must span no values)."""
    offsets = pa.array(np.asarray(offsets, dtype=np.int32), pa.int32())
    if mask is not None and np.any(mask):
        return pa.ListArray.from_arrays(offsets, values, mask=pa.array(np.asarray(mask)))
    return pa.ListArray.from_arrays(offsets, values)


def label_lists(
    offsets: npt.ArrayLike, docs: npt.ArrayLike, labels: npt.ArrayLike, mask: Any = None
) -> pa.Array:
    """A ``relevance``/``utility`` column from offsets, flat doc codes and labels."""
    entries = pa.StructArray.from_arrays(
        [
            pa.array(np.asarray(docs, dtype=np.int32), CODE),
            pa.array(np.asarray(labels, dtype=np.float64), pa.float64()),
        ],
        names=["doc", "label"],
    )
    return list_array(offsets, entries, mask)


def grouped(codes: npt.ArrayLike, count: int) -> tuple[IntArray | None, IntArray]:
    """For rows carrying group codes ``0..count-1``: the order that brings each group's
    rows together, keeping their order (None when they already are), and the ``count +
    1`` offsets of the groups in that order."""
    codes = np.asarray(codes)
    if not np.issubdtype(codes.dtype, np.integer):
        codes = codes.astype(np.int64)
    if codes.size > 1 and (codes[1:] < codes[:-1]).any():
        sizes = np.bincount(codes, minlength=count)
        return np.argsort(codes, kind="stable"), offsets_of(sizes)
    bounds = np.arange(count + 1, dtype=codes.dtype)  # in order: each group's start, found
    return None, np.searchsorted(codes, bounds).astype(np.int64)


def offsets_of(sizes: npt.ArrayLike) -> IntArray:
    """``[0, s0, s0 + s1, ...]``."""
    return np.concatenate(([0], np.cumsum(np.asarray(sizes, dtype=np.int64))))


def lengths(column: pa.Array) -> IntArray:
    """Per row, the length of a list column (0 for a null row)."""
    return pc.list_value_length(column).fill_null(0).to_numpy().astype(np.int64)


def table_of(columns: dict[str, pa.Array], kinds: dict[str, pa.DataType], rows: int) -> pa.Table:
    """A table with every column of ``kinds`` in order (null-filled when not given)."""
    arrays = [
        columns[name].cast(kind) if name in columns else pa.nulls(rows, kind)
        for name, kind in kinds.items()
    ]
    return pa.Table.from_arrays(arrays, names=list(kinds))


def merge_vocabularies(vocabularies: Sequence[pa.Array]) -> tuple[pa.Array, list[CodeArray]]:
    """One vocabulary for several, and for each a table old code -> new code."""
    if len(vocabularies) == 1:
        return vocabularies[0], [np.arange(len(vocabularies[0]), dtype=np.int32)]
    joined = pa.concat_arrays([chunk for v in vocabularies for chunk in chunks_of(v)])
    encoded = pc.dictionary_encode(joined)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    bounds = offsets_of([len(v) for v in vocabularies])
    remaps = [codes[start:end] for start, end in itertools.pairwise(bounds)]
    return encoded.dictionary, remaps


# -- the table ----------------------------------------------------------------------------


@attrs.frozen
class Columns:
    """A table of samples and/or their outputs, one row per sample; every document column
    holds int32 codes into ``docs`` (see the module docstring for the columns)."""

    table: pa.Table
    docs: pa.Array | pa.ChunkedArray

    def __len__(self) -> int:
        return int(self.table.num_rows)

    @property
    def ids(self) -> pa.Array:
        return self.column("id")

    def has(self, name: str) -> bool:
        return self.table.schema.get_field_index(name) >= 0  # no list of every name

    def valid(self, name: str) -> npt.NDArray[np.bool_]:
        """Per row, whether it holds a value of column ``name``, read-only (no compute call
        when no row is null, the common case)."""
        column = self.column(name)
        if not column.null_count:
            found = np.ones(len(column), dtype=np.bool_)
        else:
            found = column.is_valid().to_numpy(zero_copy_only=False)
        found.flags.writeable = False
        return found

    def column(self, name: str) -> pa.Array:
        """One column as a single array (all null when the table lacks it)."""
        if not self.has(name):
            kind = SAMPLE_COLUMNS.get(name) or OUTPUT_COLUMNS[name]
            return pa.nulls(len(self), kind)
        return one_array(self.table.column(name))

    def slice(self, start: int, length: int) -> Columns:
        return Columns(self.table.slice(start, length), self.docs)

    def take(self, rows: npt.ArrayLike) -> Columns:
        """The rows at these positions; position -1 gives a row of nulls."""
        positions = np.asarray(rows, dtype=np.int64)
        index = pa.array(positions, mask=positions < 0)
        return Columns(self.table.take(index), self.docs)

    def recoded(self, docs: pa.Array, remap: Remap) -> Columns:
        """The same rows with each document code ``c`` replaced by ``remap(c)``, a code
        into ``docs``."""
        table = self.table
        for index, name in enumerate(table.column_names):
            if name in DOC_COLUMNS and table.column(name).null_count < len(table):
                column = _map_codes(table.column(name).combine_chunks(), remap)
                table = table.set_column(index, name, column)
        return Columns(table, docs)

    def compact(self) -> Columns:
        """The same rows with ``docs`` cut down to the ids they use, taken from each piece
        of a joined vocabulary apart, and every column with buffers of its own: a slice of
        a large table, shipped to another process, ships its own rows alone. Of a piece,
        the stretch from the first id used to the last is kept whole when most of it is
        used (the rows' own ids, in order, as runs and qrels code them: no gather)."""
        codes = [_codes(self.column(name)) for name in DOC_COLUMNS if self.has(name)]
        used = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int32)
        pieces = chunks_of(self.docs)
        starts = offsets_of([len(piece) for piece in pieces]).tolist()
        taken: list[pa.Array] = []
        spans: list[tuple[int, int, Any]] = []  # first code, new code of it, new codes or None
        count = 0
        for piece, (start, end) in zip(pieces, itertools.pairwise(starts), strict=True):
            mine = used[(used >= start) & (used < end)]
            if not mine.size:
                continue
            low = int(mine.min())
            span = int(mine.max()) - low + 1
            if span <= max(2 * mine.size, _WHOLE_STRETCH):
                taken.append(pa.concat_arrays([piece.slice(low - start, span)]))  # own buffers
                spans.append((low, count, None))
                count += span
                continue
            seen = np.zeros(span, dtype=np.bool_)  # the codes' span: the chunk's, not the piece's
            seen[mine - low] = True
            kept = np.flatnonzero(seen)
            taken.append(piece.take(pa.array(kept + (low - start))))
            spans.append((low, count, np.cumsum(seen, dtype=np.int32) - 1))
            count += kept.size
        lows = np.array([low for low, _, _ in spans], dtype=np.int64)
        shifts = np.array([base - low for low, base, _ in spans], dtype=np.int64)
        stretches = all(ranks is None for _, _, ranks in spans)

        def remap(found: npt.NDArray[Any]) -> npt.NDArray[Any]:
            if stretches and len(spans) == 2:  # a sample's ids, then its outputs' own
                moved = found + np.int32(shifts[0])
                return np.where(found >= np.int32(lows[1]), found + np.int32(shifts[1]), moved)
            which = np.zeros(found.shape, dtype=np.intp)  # the span of each code (a few)
            for low in lows[1:]:
                which += found >= low
            new = (found + shifts[which]).astype(np.int32)
            for index, (low, base, ranks) in enumerate(spans):
                if ranks is not None:
                    inside = which == index
                    new[inside] = ranks[found[inside] - low] + np.int32(base)
            return new

        docs = (
            (pa.chunked_array(taken) if len(taken) > 1 else taken[0])
            if taken
            else pa.array([], pa.string())
        )
        recoded = self.recoded(docs, remap)  # its document columns with codes are new arrays
        own = [
            column
            if name in DOC_COLUMNS and column.null_count < len(column)
            else pa.chunked_array(
                [pa.concat_arrays(column.chunks)] if column.num_chunks else [], column.type
            )
            for name, column in zip(recoded.table.column_names, recoded.table.columns, strict=True)
        ]
        return Columns(pa.Table.from_arrays(own, schema=recoded.table.schema), docs)

    def beside(self, other: Columns) -> Columns:
        """This table's columns (samples) and ``other``'s (outputs for the same rows, its
        ``id`` dropped) as one table: this table's codes stay, and each output id takes
        the code of the same id among its row's labels and groups, else
        ``len(self.docs)`` plus its own code (see the module docstring)."""
        docs, left = self.docs, self.table
        for name in other.table.column_names:
            column = other.column(name)
            if name in ID_LISTS and column.null_count < len(column):
                codes, offsets = _codes(column), offsets_of(lengths(column))
                matched = labelled_codes(self, offsets, other.docs, codes)
                unmatched = matched < 0
                if unmatched.any():  # both vocabularies, neither copied
                    docs = pa.chunked_array(chunks_of(self.docs) + chunks_of(other.docs))
                    np.add(codes, len(self.docs), out=matched, where=unmatched)
                mask = column.is_null().to_numpy(zero_copy_only=False)
                column = list_array(offsets, pa.array(matched, CODE), mask)
            if name != "id":
                left = left.append_column(name, column)
        return Columns(left, docs)

    def doc_codes(self, name: str) -> tuple[CodeArray, IntArray]:
        """A document-list column flattened: (codes, per-row lengths)."""
        column = self.column(name)
        return _codes(column), lengths(column)


def row_ids(ids: pa.Array, codes: npt.NDArray[Any]) -> pa.Array:
    """The id of each code: a slice of ``ids`` when the codes count up (``c, c + 1, ...``;
    no copy of the ids), else taken."""
    first = int(codes[0]) if codes.size else 0
    counting = first + codes.size <= len(ids) and counts_up(codes)
    return one_array(ids.slice(first, codes.size) if counting else ids.take(pa.array(codes)))


def chunks_of(strings: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    """A vocabulary's string arrays (one, or a chunked array's chunks)."""
    strings = strings.cast(pa.string())
    return strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]


def one_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``values`` as one array: a chunked array's only chunk as it is, its chunks combined
    when there are several."""
    if isinstance(values, pa.Array):
        return values
    return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()


def counts_up(codes: npt.NDArray[Any]) -> bool:
    """Whether ``codes`` are ``c, c + 1, c + 2, ...`` (as a TREC file's labels, coded line
    by line): checked a slice at a time, no big temporary."""
    first, step = (int(codes[0]) if codes.size else 0), 1 << 16
    return all(
        (codes[at : at + step] == np.arange(first + at, first + min(at + step, codes.size))).all()
        for at in range(0, codes.size, step)
    )


def _codes(column: pa.Array) -> CodeArray:
    """Every document code of a document column, row by row (through structs and the
    nested lists of ``groups``)."""
    flat = pc.list_flatten(column)
    if pa.types.is_struct(flat.type):
        if flat.type.get_field_index("doc") >= 0:
            flat = flat.field("doc")
        else:
            flat = pc.list_flatten(flat.field("docs"))
    return flat.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)


def _map_codes(column: pa.Array, remap: Remap) -> pa.Array:
    """A document column with its codes passed through ``remap`` (offsets and nulls
    kept)."""
    flat = pc.list_flatten(column)
    offsets = offsets_of(lengths(column))
    mask = column.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_integer(flat.type):
        codes = flat.to_numpy(zero_copy_only=False)
        return list_array(offsets, pa.array(remap(codes).astype(np.int32, copy=False), CODE), mask)
    if flat.type.get_field_index("doc") >= 0:
        codes = flat.field("doc").to_numpy(zero_copy_only=False)
        return label_lists(offsets, remap(codes), flat.field("label"), mask)
    members = _map_codes(flat.field("docs"), remap)
    entries = pa.StructArray.from_arrays([flat.field("group"), members], names=["group", "docs"])
    return list_array(offsets, entries, mask)


#: A stretch of a vocabulary this short is kept whole by :meth:`Columns.compact`.
_WHOLE_STRETCH = 1 << 12
#: About how many ids (labelled and output) are matched at a time: a block's labelled ids
#: are hashed together, in a table small enough to stay in the CPU's cache.
_MATCH_BLOCK = 1 << 16
_NONE = np.zeros(0, dtype=np.int64)


def owned_codes(column: pa.Array) -> tuple[IntArray, CodeArray]:
    """Every document code of a label or ``groups`` column, and the row it is in."""
    flat = pc.list_flatten(column)
    owners = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
    if flat.type.get_field_index("doc") >= 0:
        codes = flat.field("doc")
    else:  # groups: the member lists of each row's groups
        members = flat.field("docs")
        owners = owners[pc.list_parent_indices(members).to_numpy(zero_copy_only=False)]
        codes = pc.list_flatten(members)
    return owners.astype(np.int64, copy=False), codes.to_numpy(zero_copy_only=False)


def _labelled(samples: Columns) -> tuple[IntArray, CodeArray]:
    """Every (row, code) of the samples' labels and groups, by row."""
    found = [owned_codes(samples.column(n)) for n in (*LABEL_KINDS, "groups") if samples.has(n)]
    found = [(rows, codes) for rows, codes in found if codes.size]  # kinds with a label
    if len(found) == 1:  # one kind: already by row (a code met twice in a row is harmless)
        rows, codes = found[0]
        return rows, codes.astype(np.int32, copy=False)
    keys = np.concatenate([(rows << 32) | codes for rows, codes in found] or [_NONE])
    keys = np.sort(keys)
    keys = keys[np.diff(keys, prepend=-1) != 0]  # each (row, code) once
    return keys >> 32, (keys & 0xFFFFFFFF).astype(np.int32)


def labelled_codes(
    samples: Columns, offsets: IntArray, ids: pa.Array, codes: CodeArray | None = None
) -> CodeArray:
    """For ids given row by row (row ``r``'s are ``ids[offsets[r]:offsets[r + 1]]``, or
    with ``codes`` the ids of ``codes[offsets[r]:offsets[r + 1]]``): the code of the same
    id among the row's labels and groups in ``samples``, else -1. A block of rows at a
    time, the smaller side of the block (its labelled ids, or its output ids) is hashed
    and the other looked up: never the whole vocabulary, nor a copy of it."""
    label_rows, label_codes = _labelled(samples)
    label_ids = row_ids(samples.docs.cast(pa.string()), label_codes)
    label_bounds = np.searchsorted(label_rows, np.arange(len(samples) + 1))
    ids = ids.cast(pa.string())
    matched = np.full(len(ids) if codes is None else codes.size, -1, dtype=np.int32)
    weight = label_bounds + offsets  # ids up to each row
    edges = np.searchsorted(weight, np.arange(0, weight[-1], _MATCH_BLOCK)).tolist()

    def match(rows: tuple[int, int]) -> None:
        first, last = rows
        start, end = label_bounds[first], label_bounds[last]
        lo, hi = offsets[first], offsets[last]
        if start == end or lo == hi:
            return
        labelled = label_ids.slice(start, end - start)
        outputs = ids.slice(lo, hi - lo) if codes is None else row_ids(ids, codes[lo:hi])
        if len(labelled) > len(outputs):  # deep pools: fingerprints met row by row
            pairs = first_equals(
                fingerprints(labelled),
                np.diff(label_bounds[first : last + 1]),
                fingerprints(outputs),
                np.diff(offsets[first : last + 1]),
            )
            if pairs is not None and same_strings(labelled, pairs[0], outputs, pairs[1]):
                matched[lo:hi][pairs[1]] = label_codes[start + pairs[0]]
                return  # (else a table of mostly padding, or keys that met for two ids)
        if len(labelled) <= len(outputs):  # hash the smaller side, look the other one up
            label_index, position = _indices_in(labelled, outputs)
        else:  # (deep pools)
            position, label_index = _indices_in(outputs, labelled)
        kept = np.flatnonzero(label_index >= 0)  # labelled ids the block's outputs name
        if not kept.size:
            return
        width = int(label_index.max()) + 1
        own, order = _sorted_with_places(
            (label_rows[start:end][kept] - first) * width + label_index[kept]
        )
        named = np.flatnonzero((position >= 0) & (position < width))  # some row labels it
        owner = np.searchsorted(offsets[first + 1 : last + 1], lo + named, side="right")
        wanted = owner * width + position[named]
        at = np.minimum(np.searchsorted(own, wanted), own.size - 1)
        hit = own[at] == wanted  # its own row does
        matched[lo:hi][named[hit]] = label_codes[start + kept[order[at[hit]]]]

    blocks = list(itertools.pairwise([*edges, len(samples)]))
    list(on_cores(match, blocks, "slotwise-match"))  # blocks side by side, each its own ids
    return matched


def _indices_in(hashed: pa.Array, looked_up: pa.Array) -> tuple[IntArray, IntArray]:
    """Each of ``hashed``'s ids coded by a dictionary of them, and each of ``looked_up``'s
    by the same dictionary (-1: not in it)."""
    block = pc.dictionary_encode(hashed)
    found = pc.index_in(looked_up, value_set=block.dictionary).fill_null(-1)
    return (
        block.indices.to_numpy(zero_copy_only=False).astype(np.int64),
        found.to_numpy(zero_copy_only=False).astype(np.int64),
    )


def _sorted_with_places(values: IntArray) -> tuple[IntArray, IntArray]:
    """Non-negative ``values`` sorted, and where each came from: sorted with its place in
    the low digits when that fits in 64 bits (numpy sorts integers with SIMD, several
    times faster than ``argsort``)."""
    count = values.size
    if not count or int(values.max()) >= np.iinfo(np.int64).max // count - 1:
        order = np.argsort(values, kind="stable")
        return values[order], order
    packed = np.sort(values * count + np.arange(count))
    return packed // count, packed % count


def stack(parts: Sequence[Columns]) -> Columns:
    """The rows of several tables with the same columns: their vocabularies side by
    side, codes shifted (no hashing; ids stay told apart within each row)."""
    starts = offsets_of([len(part.docs) for part in parts])[:-1].tolist()
    tables = [
        part.recoded(part.docs, functools.partial(np.add, start)).table
        for part, start in zip(parts, starts, strict=True)
    ]
    docs = pa.concat_arrays([chunk for part in parts for chunk in chunks_of(part.docs)])
    return Columns(pa.concat_tables(tables), docs)


def string_bytes(strings: pa.Array) -> memoryview:
    """The concatenated UTF-8 bytes of a string array without nulls, without a copy."""
    if len(strings) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)
    start, end = offsets[strings.offset], offsets[strings.offset + len(strings)]
    return memoryview(strings.buffers()[2])[start:end]


# -- the content hash ---------------------------------------------------------------------


class ContentHash:
    """sha256 of a dataset's content, whatever its source or chunking: each sample
    becomes one canonical line (id; labels of each kind sorted by document id; answers;
    groups sorted by name, their documents by id; k; input; metadata; then, for a sample
    with claims only, their ids) and the lines are hashed in order."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()

    def update(self, columns: Columns) -> None:
        """Hash the samples' lines a slice at a time (:func:`canonical_lines`)."""
        for lines in canonical_lines(columns):
            self._digest.update(string_bytes(lines))

    def update_lines(self, lines: bytes | memoryview) -> None:
        """Hash lines :func:`canonical_lines` made elsewhere (the next samples')."""
        self._digest.update(lines)

    def hexdigest(self) -> str:
        return "sha256:" + self._digest.hexdigest()


def canonical_lines(columns: Columns) -> Iterator[pa.Array]:
    """Each sample's line of the content hash (see :class:`ContentHash`), a slice of
    samples of about :data:`_HASH_ENTRIES` labels at a time (the lines of deep qrels are
    never all held at once)."""
    weight = np.ones(len(columns), dtype=np.int64)
    for kind in LABEL_KINDS:
        weight += lengths(columns.column(kind))
    ends = np.cumsum(weight)
    marks = np.arange(0, int(ends[-1]) if ends.size else 0, _HASH_ENTRIES)
    starts = np.unique(np.searchsorted(ends, marks, side="right")).tolist()
    for start, end in itertools.pairwise([*starts, len(columns)]):
        yield _canonical_lines(columns.slice(start, end - start))


_FIELD, _ITEM, _LINE = "\x1f", "\x1e", "\x1d\n"
_HASH_ENTRIES = 1 << 16  # labels hashed at a time


def _canonical_lines(columns: Columns) -> pa.Array:
    """One string per sample (see :class:`ContentHash`); absent values are ``\\0``."""
    docs = one_array(columns.docs.cast(pa.string()))
    parts = [
        columns.column("id"),
        *(_labels_text(columns.column(kind), docs) for kind in LABEL_KINDS),
        pc.binary_join(columns.column("answers"), _ITEM),
        _groups_text(columns.column("groups"), docs),
        pc.cast(columns.column("k"), pa.string()),
        columns.column("input"),
        columns.column("metadata"),
    ]
    filled = [pc.fill_null(part, "\x00") for part in parts]
    line = pc.binary_join_element_wise(*filled, _FIELD)
    claims = pc.binary_join(columns.column("claims"), _ITEM)
    claimed = pc.fill_null(pc.binary_join_element_wise(_FIELD, claims, ""), "")
    line = pc.binary_join_element_wise(line, claimed, "")
    return pc.binary_join_element_wise(line, pa.repeat("", len(columns)), _LINE)


def _sorted_names(codes: CodeArray, sizes: IntArray, docs: pa.Array) -> tuple[pa.Array, IntArray]:
    """Document ids of ``codes`` (``sizes`` of them per row) sorted by id within each
    row, and that order."""
    names = row_ids(docs, codes)
    order = order_within(names, sizes)
    return names.take(pa.array(order)), order


def _labels_text(column: pa.Array, docs: pa.Array) -> pa.Array:
    """Per row, ``doc=label`` entries sorted by document id and joined; null stays null.
    Written as one join per row of pieces taken in one pass: each document id, then
    ``=label`` and the separator (none after a row's last), from a table of the labels'
    texts (Arrow joins a row's pieces several times faster than it joins two strings
    element by element)."""
    flat = pc.list_flatten(column)
    if not len(flat):
        return _entryless_text(column)
    sizes = lengths(column)
    names = row_ids(docs, flat.field("doc").to_numpy(zero_copy_only=False))
    order = order_within(names, sizes)
    texts, which = _label_texts(flat.field("label"), order)
    last = np.zeros(order.size, dtype=bool)
    last[np.cumsum(sizes)[sizes > 0] - 1] = True  # a row's last entry: no separator
    tails = pa.concat_arrays(
        [
            pc.binary_join_element_wise("=", texts, _ITEM, ""),
            pc.binary_join_element_wise("=", texts, ""),
        ]
    )
    pieces = np.empty(2 * order.size, dtype=np.int64)
    pieces[0::2] = order
    pieces[1::2] = len(names) + which + len(texts) * last
    joined = pa.concat_arrays([names, tails]).take(pa.array(pieces))
    mask = column.is_null().to_numpy(zero_copy_only=False)
    return pc.binary_join(list_array(2 * offsets_of(sizes), joined, mask), "")


def _label_texts(labels: pa.Array, order: IntArray) -> tuple[pa.Array, IntArray]:
    """The texts of the labels, as Arrow casts them (few distinct), and which text each
    label in ``order`` has: whole labels from 0 to 9 (most graded qrels) are read from a
    table of the ten digits, others dictionary-encoded."""
    numbers = labels.to_numpy()[order]
    if ((numbers >= 0) & (numbers < 10)).all() and not np.signbit(numbers).any():
        whole = numbers.astype(np.int64)  # (-0.0 is cast as "-0": not a digit)
        if (whole == numbers).all():
            return _digits(), whole
    coded = pc.dictionary_encode(pa.array(numbers))
    return coded.dictionary.cast(pa.string()), coded.indices.to_numpy().astype(np.int64)


@functools.cache
def _digits() -> pa.Array:
    """The texts "0" to "9", made at first use: converting a list as slotwise is
    imported would have pyarrow look for pandas, and import it, in every command."""
    return pa.array([str(digit) for digit in range(10)])


def _entryless_text(column: pa.Array) -> pa.Array:
    """The text of a list column without one entry: "" per row, null stays null (a
    kind no sample has, as qrels' utilities: no sorting or joining)."""
    return pc.if_else(column.is_valid(), "", pa.scalar(None, pa.string()))


def _groups_text(column: pa.Array, docs: pa.Array) -> pa.Array:
    """Per row, ``group=doc,doc`` entries sorted by group name (documents by id)."""
    flat = pc.list_flatten(column)
    if not len(flat):
        return _entryless_text(column)
    members = flat.field("docs")
    member_sizes = lengths(members)
    names, _ = _sorted_names(
        pc.list_flatten(members).to_numpy(zero_copy_only=False), member_sizes, docs
    )
    member_text = pc.binary_join(list_array(offsets_of(member_sizes), names), ",")
    entries = pc.binary_join_element_wise(flat.field("group"), member_text, "=")
    sizes = lengths(column)
    owners = np.repeat(np.arange(len(column)), sizes)
    order = pc.sort_indices(
        pa.table({"owner": owners, "group": flat.field("group")}),
        sort_keys=[("owner", "ascending"), ("group", "ascending")],
    )
    mask = column.is_null().to_numpy(zero_copy_only=False)
    return pc.binary_join(list_array(offsets_of(sizes), entries.take(order), mask), _ITEM)
