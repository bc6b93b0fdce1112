"""TREC qrels and run files, read as trec_eval reads them.

- qrels: ``qid iter docid rel`` (4 whitespace-separated fields; ``iter`` is ignored);
- run: ``qid Q0 docid rank score tag`` (6 fields; more are ignored, "reserved for future
  expansion"). The rank column is ignored: documents are ordered as trec_eval orders
  them, by score descending, ties by doc id descending. A document retrieved twice for a
  query is an error naming both lines, as trec_eval refuses such a run.

Lines whose first field starts with ``#`` are comments, and blank lines are skipped, in
both; any run of spaces and tabs separates fields, and a doc id may contain ``#``.

A file with single spaces (or single tabs) between fields is read by pyarrow's CSV reader
straight into columns (:mod:`engine.io.trec_csv`, which may have parsed it ahead); any
other file, and any file with a problem, is read line by line, which reports every bad
line with its number. Streamed files are read in blocks of whole
lines that never split a query's lines.
"""

from __future__ import annotations

import io
import math
import os
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv

from engine.errors import InputError, Problem
from engine.io import grammar, shards, trec_csv
from engine.io.columns import GROUPS, Columns, lengths, string_bytes
from engine.io.files import COMPRESSIONS, magic_codec, open_binary
from engine.io.frames import (
    Coded,
    Where,
    flat,
    flat_strings,
    labels_columns,
    retrieved_twice,
    run_columns,
)
from engine.io.writer import AtomicFile

__all__ = [
    "read_qrels",
    "read_run",
    "read_subtopic_qrels",
    "run_tag",
    "shard_blocks",
    "shard_columns",
    "shard_lines",
    "shard_rows",
    "stream_qrels",
    "stream_run",
    "stream_run_lengths",
    "write_qrels",
    "write_run",
]

_BLOCK = 1 << 24  # the most bytes per streamed block
_BLOCK_QUERIES = 1 << 14  # about this many queries per streamed block
_FIRST_READ = 1 << 20  # bytes read before the size of a query is known


class _Format:
    """The layout of one kind of TREC file."""

    def __init__(self, kind: str, names: tuple[str, ...], number: str, what: str) -> None:
        self.kind, self.names, self.number, self.what = kind, names, number, what
        self.layout = " ".join(
            {"query": "qid", "iteration": "iter", "doc": "docid", "label": "rel", "q0": "Q0"}.get(
                n, n
            )
            for n in names
        )

    def columns(self, queries: Coded, docs: Coded, numbers: np.ndarray, where: Where) -> Columns:
        if self.kind == "qrels":
            return labels_columns(queries, docs, {"relevance": numbers}, where)
        problems = retrieved_twice(queries, docs, where)
        if problems:
            raise InputError(problems, summary=f"a document retrieved twice {where.source}")
        return run_columns(queries, docs, scores=numbers)


_QRELS = _Format("qrels", *trec_csv.FIELDS["qrels"], "relevance")
_RUN = _Format("run", *trec_csv.FIELDS["run"], "score")


def read_qrels(path: str | os.PathLike[str]) -> Columns:
    """Samples of a qrels file: one per query, in order of first appearance, with its
    relevance labels. A document judged twice for a query is an error naming both lines."""
    return _read(Path(path), _QRELS)


def read_subtopic_qrels(path: str | os.PathLike[str], threshold: float = 1.0) -> Columns:
    """Samples of diversity qrels (``qid subtopic docid rel``, as TREC Web's: the second
    field names the subtopic), one per query in order of first appearance: each document's
    relevance label is its largest over the subtopics, and each subtopic with a document
    labelled >= ``threshold`` is a group listing those documents (``expected_output.groups``,
    what the diversity metrics read; a query without one has no group), the groups in order
    of their subtopic's first line in the file, as pyndeval numbers subtopics. Every bad
    line is reported, a document a subtopic labels twice naming both lines."""
    path = Path(path)
    seen: dict[tuple[str, str, str], int] = {}
    best: dict[tuple[str, str], float] = {}
    groups: dict[str, dict[str, list[str]]] = {}
    first_line: dict[str, int] = {}  # each subtopic's
    problems = []
    with open_binary(path) as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                fields = raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8").split()
            except UnicodeDecodeError as error:
                problems.append(
                    Problem(f"not UTF-8 text: {error.reason}", source=str(path), line=number)
                )
                continue
            if not fields or fields[0].startswith("#"):
                continue
            label = grammar.number(fields[3]) if len(fields) == 4 else None
            if label is None:
                message = "expected 4 fields 'qid subtopic docid rel', rel a finite number"
                problems.append(
                    Problem(message, sample_id=fields[0], source=str(path), line=number)
                )
                continue
            qid, subtopic, doc = fields[:3]
            first = seen.setdefault((qid, subtopic, doc), number)
            if first != number:
                message = f"subtopic {subtopic!r} labels document {doc!r} again (line {first})"
                problems.append(Problem(message, sample_id=qid, source=str(path), line=number))
                continue
            best[qid, doc] = max(label, best.get((qid, doc), -math.inf))
            first_line.setdefault(subtopic, number)
            members = groups.setdefault(qid, {}).setdefault(subtopic, [])
            if label >= threshold:
                members.append(doc)
    if problems:
        raise InputError(problems, summary=f"malformed diversity qrels {path}")
    queries = Coded.of_strings((q for q, _ in best), len(best))
    docs = Coded.of_strings((d for _, d in best), len(best))
    relevance = {"relevance": np.fromiter(best.values(), float)}
    columns = labels_columns(queries, docs, relevance, distinct=True)  # keys of `best`
    code = {doc: i for i, doc in enumerate(docs.ids.to_pylist())}
    column = pa.array(
        [
            [
                {"group": s, "docs": [code[d] for d in ds]}
                for s, ds in sorted(groups[q].items(), key=lambda group: first_line[group[0]])
                if ds
            ]
            for q in columns.ids.to_pylist()
        ],
        GROUPS,
    )
    table = columns.table.set_column(columns.table.column_names.index("groups"), "groups", column)
    return _not_empty(Columns(table, columns.docs), path, "qrels")


def read_run(path: str | os.PathLike[str]) -> Columns:
    """Outputs of a run file: one ranked list per query, in trec_eval's order. Repeated doc
    ids are kept (the engine drops and counts them)."""
    return _read(Path(path), _RUN)


def run_tag(path: str | os.PathLike[str]) -> str:
    """The run's tag as trec_eval reports it (its ``runid``): the sixth field of the last
    line that is not blank or a comment; "" when there is none."""
    path = Path(path)
    with open_binary(path) as handle:
        if path.suffix.lower() in COMPRESSIONS or magic_codec(path):
            tail = b"".join(deque(handle, maxlen=64))  # streamed: no seeking back
        else:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - (1 << 16)))
            tail = handle.read()
    for line in reversed(tail.splitlines()):
        fields = line.split()
        if len(fields) >= 6 and not fields[0].startswith(b"#"):
            return fields[5].decode("utf-8", "replace")
    return ""


def stream_qrels(path: str | os.PathLike[str]) -> Iterator[Columns]:
    """:func:`read_qrels` in blocks of whole queries (a query's lines must be together)."""
    return _stream(Path(path), _QRELS)


def stream_run(path: str | os.PathLike[str]) -> Iterator[Columns]:
    """:func:`read_run` in blocks of whole queries (a query's lines must be together)."""
    return _stream(Path(path), _RUN)


def stream_run_lengths(path: str | os.PathLike[str]) -> Iterator[tuple[pa.Array, np.ndarray]]:
    """Per block of whole queries, each query id and how many lines it has: what a
    streamed evaluation's first pass needs of a run, read from the query column alone
    (a block that is not canonically formatted is read whole); a file without a query is
    an error, as for :func:`read_run`."""
    path, reads = Path(path), _Reads()
    delimiter, queries_read = None, 0
    for offset, block in _blocks(path, reads):
        delimiter = delimiter or trec_csv.delimiter(block[: block.find(b"\n") + 1])
        queries = _query_column(pa.BufferReader(block), delimiter)
        if queries is None:
            columns = _worded(io.BytesIO(block), _RUN, path, _line_at(path, offset))
            ids, counts = columns.ids, lengths(columns.column("retrieved"))
        else:
            ids, counts = queries.ids, np.bincount(queries.codes, minlength=len(queries.ids))
        reads.learn(len(block), len(ids))
        queries_read += len(ids)
        yield ids, counts
    if not queries_read:
        raise _empty(path, "run")


def _query_column(source: Any, delimiter: str) -> Coded | None:
    """The query ids of a canonically formatted run (None when it is not)."""
    try:
        table = csv.read_csv(
            source,
            read_options=trec_csv.read_options("run"),
            parse_options=trec_csv.parse_options(delimiter),
            convert_options=csv.ConvertOptions(
                include_columns=["query"], column_types={"query": trec_csv.ID}
            ),
        )
    except (pa.ArrowInvalid, OSError):
        return None
    return Coded.of(table.column("query"))


def _read(path: Path, layout: _Format) -> Columns:
    parsed = _columnar(partial(trec_csv.parse_file, path, layout.kind), layout)
    if parsed is not None:
        try:
            return _not_empty(layout.columns(*parsed, Where(str(path))), path, layout.kind)
        except InputError:
            pass  # e.g. a document judged twice: the line reader names the lines
    with open_binary(path) as handle:
        return _not_empty(_worded(handle, layout, path, 1), path, layout.kind)


def _not_empty(columns: Columns, path: Path, kind: str) -> Columns:
    """The columns of a file that has a query (see :func:`_empty`)."""
    if not len(columns):
        raise _empty(path, kind)
    return columns


def _empty(path: Path, kind: str) -> InputError:
    """A file without a query (empty, or comments only) scores nothing: an error naming
    it, as trec_eval refuses it."""
    problem = Problem(f"no {kind} line: the file holds no query", source=str(path))
    return InputError([problem], summary=f"empty {kind} file")


def _stream(path: Path, layout: _Format) -> Iterator[Columns]:
    """Blocks of whole queries; the problems of every block are reported together, once
    the whole file was read, and a file without a query is an error."""
    delimiter, reads = None, _Reads()
    problems: list[Problem] = []
    rows = 0
    for offset, block in _blocks(path, reads):
        delimiter = delimiter or trec_csv.delimiter(block[: block.find(b"\n") + 1])
        block_table = partial(trec_csv.parse, pa.BufferReader(block), layout.kind, delimiter)
        parsed = _columnar(block_table, layout)
        if parsed is not None:
            reads.learn(len(block), len(parsed[0].ids))
        if parsed is not None and not problems:
            try:
                columns = layout.columns(*parsed, Where(str(path)))
                rows += len(columns)
                yield columns
                continue
            except InputError:
                pass
        try:
            columns = _worded(io.BytesIO(block), layout, path, _line_at(path, offset))
        except InputError as error:
            problems += error.problems
            continue
        rows += len(columns)
        if not problems:
            yield columns
    if problems:
        raise InputError(problems, summary=f"malformed {layout.kind} {path}")
    if not rows:
        raise _empty(path, layout.kind)


def _worded(handle: IO[bytes], layout: _Format, path: Path, first_line: int) -> Columns:
    """Columns of lines read one by one; every bad line (malformed, or labelling a
    document again) is reported, in line order."""
    queries, docs, numbers, where, problems = _by_line(handle, layout, path, first_line)
    try:
        columns = layout.columns(queries, docs, numbers, where)
    except InputError as error:
        problems += error.problems
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise InputError(problems, summary=f"malformed {layout.kind} {path}")
    return columns


def _columnar(
    parsed: Callable[[], pa.Table | None], layout: _Format
) -> tuple[Coded, Coded, np.ndarray] | None:
    """(queries, docs, numbers) of the table ``parsed`` gives, or None when there is none
    (the input is not canonically formatted) or a number is not finite (the line reader
    then reads it or words why)."""
    table = parsed()
    if table is None:
        return None
    query_chunks, doc_chunks = table.column("query").chunks, table.column("doc").chunks
    number_chunks = table.column(layout.number).chunks
    del table  # each chunk is freed as it is copied
    # Arrow's pool keeps what is freed until asked: each column's chunks are given back
    # once copied, so that the copies do not stack on them at the peak of memory
    release = pa.default_memory_pool().release_unused
    numbers = flat(number_chunks, np.float64)
    release()
    if not np.isfinite(numbers).all():
        return None
    queries = Coded.of_blocks(query_chunks)
    release()
    if pc.any(pc.starts_with(queries.ids, "#")).as_py():
        return None  # a comment line that happens to have the right number of fields
    docs = flat_strings(doc_chunks)
    release()
    return queries, Coded.rows(docs), numbers  # repeats: refused


def _by_line(
    handle: IO[bytes], layout: _Format, path: str | Path, first_line: int
) -> tuple[Coded, Coded, np.ndarray, Where, list[Problem]]:
    """(queries, docs, numbers, where) of the good lines, and a problem per bad line."""
    lines, queries, docs, values = [], [], [], []
    problems = []
    width, column = len(layout.names), layout.names.index(layout.number)
    try:
        for number, raw in enumerate(handle, start=first_line):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a byte-order mark
            fields = [
                field.decode("utf-8") for field in raw.split()
            ]  # ASCII whitespace, as trec_eval
            if not fields or fields[0].startswith("#"):
                continue  # a blank line, or a comment
            if len(fields) > width and layout.kind == "run":
                fields = fields[:width]  # trec_eval ignores what follows the sixth field
            if len(fields) != width:
                message = f"expected {width} fields '{layout.layout}', got {len(fields)}"
                problems.append(
                    Problem(message, sample_id=fields[0], source=str(path), line=number)
                )
                continue
            value = grammar.number(fields[column])
            if value is None:
                message = f"{layout.what} {fields[column]!r} is not a finite number"
                problems.append(
                    Problem(message, sample_id=fields[0], source=str(path), line=number)
                )
                continue
            lines.append(number)
            queries.append(fields[0])
            docs.append(fields[2])
            values.append(value)
    except UnicodeDecodeError as error:
        problem = Problem(f"not UTF-8 text: {error.reason}", source=str(path), line=number)
        raise InputError([problem]) from None
    where = Where(str(path), lines=np.asarray(lines, dtype=np.int64))
    return (
        Coded.of_strings(queries, len(queries)),
        Coded.of_strings(docs, len(docs)),
        np.asarray(values, dtype=np.float64),
        where,
        problems,
    )


class _Reads:
    """How many bytes a stream reads next: about ``_BLOCK_QUERIES`` queries' worth, as
    the blocks parsed so far measure a query (at most ``_BLOCK``). Sparse qrels hold a
    query in a line or two, so ``_BLOCK`` bytes of them would be most of a million
    queries held at once."""

    def __init__(self) -> None:
        self.size = min(_FIRST_READ, _BLOCK)

    def learn(self, size: int, queries: int) -> None:
        """A block of ``size`` bytes held ``queries`` queries."""
        self.size = max(1, min(_BLOCK, size * _BLOCK_QUERIES // max(queries, 1)))


def _blocks(path: Path | shards.Shard, reads: _Reads) -> Iterator[tuple[int, bytes]]:
    """(byte offset, block) of about ``reads.size`` bytes of whole lines each; the lines
    of the last query of a block move to the next one, so no query is split."""
    offset, rest = 0, b""
    opened = shards.open_stream(path) if isinstance(path, shards.Shard) else open_binary(path)
    with opened as handle:
        while chunk := handle.read(reads.size):
            block = rest + chunk
            end = block.rfind(b"\n") + 1
            cut = _last_query_start(block, end)
            if cut == 0:  # one query so far: read on
                rest = block
                continue
            yield offset, block[:cut]
            offset += cut
            rest = block[cut:]
    if rest:
        yield offset, rest if rest.endswith(b"\n") else rest + b"\n"


def _line_at(path: Path, offset: int) -> int:
    """The number of the line that starts at byte ``offset`` (to word a problem)."""
    lines = 1
    with open_binary(path) as handle:
        while offset > 0:
            chunk = handle.read(min(offset, _BLOCK))
            lines += chunk.count(b"\n")
            offset -= len(chunk)
    return lines


def _last_query_start(block: bytes, end: int) -> int:
    """Where the lines of the query of the last whole line (ending at ``end``) begin."""
    if end == 0:
        return 0
    start = block.rfind(b"\n", 0, end - 1) + 1
    query = block[start:end].split(maxsplit=1)[:1]
    while start > 0:
        previous = block.rfind(b"\n", 0, start - 1) + 1
        if block[previous:start].split(maxsplit=1)[:1] != query:
            return start
        start = previous
    return 0


# -- shards ------------------------------------------------------------------------------
#
# A shard's lines become long rows, ``query_id`` (dictionary-encoded), ``doc_id`` and
# ``relevance`` or ``score``, in line order; the rows of several shards (or of the parts
# of them that a worker gathers) become columns as one file's lines do.


def _layout(kind: str) -> _Format:
    return _QRELS if kind == "qrels" else _RUN


def shard_rows(shard: shards.Shard, kind: str) -> pa.Table:
    """The long rows of one shard of a TREC ``kind`` file ("qrels" or "run"); every
    malformed line of it is an :class:`InputError` naming the file and the line."""
    return _block_rows(shards.read_lines(shard), _layout(kind), shard, None)


def shard_blocks(shard: shards.Shard, kind: str) -> Iterator[pa.Table]:
    """:func:`shard_rows` in blocks of whole queries (the file's last query may go on in
    the next shard); the problems of every block are reported together at the end."""
    layout, reads, line = _layout(kind), _Reads(), 1
    problems: list[Problem] = []
    for _, block in _blocks(shard, reads):
        try:
            rows = _block_rows(block, layout, shard, line)
        except InputError as error:
            problems += error.problems
        else:
            reads.learn(len(block), max(1, len(rows.column("query_id").chunk(0).dictionary)))
            if not problems:
                yield rows
        line += block.count(b"\n")
    if problems:
        raise InputError(problems, summary=f"malformed {kind} {shard.name}")


def _block_rows(
    block: bytes, layout: _Format, shard: shards.Shard, first_line: int | None
) -> pa.Table:
    """Long rows of whole lines of a shard (``first_line``: the number of the first; None:
    counted when a problem needs it)."""
    delimiter = trec_csv.delimiter(block[: block.find(b"\n") + 1])
    parsed = _columnar(
        partial(trec_csv.parse, pa.BufferReader(block), layout.kind, delimiter), layout
    )
    if parsed is not None:
        queries, docs, numbers = parsed
        ids = docs.ids
    else:
        first = shards.lines_before(shard) + 1 if first_line is None else first_line
        handle = io.BytesIO(block)
        queries, coded, numbers, _, problems = _by_line(handle, layout, shard.name, first)
        if problems:
            raise InputError(problems, summary=f"malformed {layout.kind} {shard.name}")
        ids = coded.ids.take(pa.array(coded.codes))
    query_ids = pa.DictionaryArray.from_arrays(pa.array(queries.codes, pa.int32()), queries.ids)
    return pa.table({"query_id": query_ids, "doc_id": ids, layout.what: numbers})


def shard_columns(rows: pa.Table, kind: str, where: Where) -> Columns:
    """Samples (qrels) or outputs (run) of the long rows of one or more shards, in their
    order, as :func:`read_qrels` and :func:`read_run` make them of one file's lines."""
    layout = _layout(kind)
    queries = Coded.of_blocks(rows.column("query_id").chunks)
    docs = flat_strings(rows.column("doc_id").chunks)
    numbers = flat(rows.column(layout.what).chunks, np.float64)
    return layout.columns(queries, Coded.rows(docs), numbers, where)


def shard_lines(shard: shards.Shard, kind: str) -> np.ndarray:
    """The line of each row of :func:`shard_rows` (to word a problem)."""
    handle = io.BytesIO(shards.read_lines(shard))
    first = shards.lines_before(shard) + 1
    where = _by_line(handle, _layout(kind), shard.name, first)[3]
    assert where.lines is not None
    return where.lines


# -- writing -----------------------------------------------------------------------------


def _write_lines(path: str | os.PathLike[str], fields: list[Any]) -> None:
    line = pc.binary_join_element_wise(*fields, " ")
    lines = pc.binary_join_element_wise(line, pa.repeat("", len(line)), "\n")
    with AtomicFile(path, binary=True) as handle:
        handle.write(string_bytes(lines))


def write_qrels(path: str | os.PathLike[str], samples: Columns) -> None:
    """Write the relevance labels of samples as ``qid 0 docid rel`` lines (atomically);
    samples without relevance labels are left out."""
    column = samples.column("relevance")
    entries = pc.list_flatten(column)
    rows = np.repeat(np.arange(len(samples)), lengths(column))
    fields = [
        samples.ids.take(pa.array(rows)),
        pa.repeat("0", len(entries)),
        samples.docs.take(entries.field("doc")),
        pc.cast(entries.field("label"), pa.string()),
    ]
    _write_lines(path, fields)


def write_run(path: str | os.PathLike[str], outputs: Columns, tag: str = "slotwise") -> None:
    """Write ranked lists as ``qid Q0 docid rank score tag`` lines (atomically), scores
    ``n - rank + 1``, strictly descending, so :func:`read_run` restores the same order."""
    column = outputs.column("retrieved")
    sizes = lengths(column)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    ranks = np.arange(int(sizes.sum())) - starts + 1
    fields = [
        outputs.ids.take(pa.array(np.repeat(np.arange(len(outputs)), sizes))),
        pa.repeat("Q0", len(ranks)),
        outputs.docs.take(pc.list_flatten(column)),
        pc.cast(pa.array(ranks), pa.string()),
        pc.cast(pa.array(np.repeat(sizes, sizes) - ranks + 1), pa.string()),
        pa.repeat(tag, len(ranks)),
    ]
    _write_lines(path, fields)
