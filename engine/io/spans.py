"""Labels anchored to text: spans of source documents, the chunks a chunker made of those
documents, and where each chunk lies in its source.

- A **span label** names ``doc`` (a source document id) and either character offsets
  ``start``/``end`` (``[start, end)``, Python's slicing) or the quoted ``text``, with the
  label's ``grade``. ``expected_output.spans`` holds a sample's (``sample.schema.json``);
  a span table holds many samples' (:func:`read_span_table`: TREC-like whitespace lines
  ``QUERY DOC START END GRADE [PASSAGE]``, or a CSV/TSV/Parquet/JSONL table with the columns
  ``query_id, doc_id, start, end, grade``).
- A **chunk** is a passage a chunker wrote: its id, text and, when the chunker records
  them, its source and offsets. :func:`chunk_of` reads the shapes frameworks write:
  LangChain (``metadata.start_index`` from ``add_start_index=True``, ``metadata.source``),
  LlamaIndex (``start_char_idx``/``end_char_idx``, ``ref_doc_id`` or, serialised, its
  ``relationships`` SOURCE), Haystack
  (``meta.split_idx_start``, ``meta.source_id``), or plain ``doc``/``start``/``end``.
- :func:`align` finds each chunk in its source: the recorded offsets when the source's
  text there is the chunk's, else the chunk's text found exactly, else fuzzily
  (:data:`MIN_FUZZY` of its characters matched in order, difflib); a chunk found nowhere
  is *unaligned*, listed with the reason, never placed by guess.
- :func:`lift` turns labels made on passages into span labels, through the passages'
  alignment.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from engine.errors import InputError, Problem
from engine.io.files import format_suffix, read_jsonl, read_text

__all__ = [
    "MIN_FUZZY",
    "SPAN_COLUMNS",
    "Alignment",
    "Chunk",
    "Span",
    "align",
    "chunk_of",
    "lift",
    "read_chunks",
    "read_documents",
    "read_span_table",
    "span_of",
    "write_span_table",
]

#: The least share of a chunk's characters that must match its source, in order, for a
#: fuzzy alignment (difflib's matching blocks); below it the chunk is unaligned.
MIN_FUZZY = 0.9

#: The columns of a span table, in order.
SPAN_COLUMNS = ("query_id", "doc_id", "start", "end", "grade")


@attrs.frozen
class Span:
    """A labelled span of a source document: ``text[start:end]`` of ``doc`` has ``grade``;
    ``passage`` is the passage id the label was lifted from (None: labelled as a span)."""

    doc: str
    start: int
    end: int
    grade: float
    passage: str | None = None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"doc": self.doc, "start": self.start, "end": self.end}
        found["grade"] = int(self.grade) if float(self.grade).is_integer() else self.grade
        if self.passage is not None:
            found["passage"] = self.passage
        return found


@attrs.frozen
class Chunk:
    """A chunk as the chunker wrote it: ``doc``, ``start`` and ``end`` are None when it did
    not record them."""

    id: str
    text: str
    doc: str | None = None
    start: int | None = None
    end: int | None = None


@attrs.frozen
class Alignment:
    """Where chunks lie in their sources: per chunk id, ``(doc, start, end, how)`` with
    ``how`` one of ``offsets`` (as recorded), ``exact`` (its text found), ``fuzzy``;
    ``unaligned`` maps the others to why."""

    placed: Mapping[str, tuple[str, int, int, str]]
    unaligned: Mapping[str, str]

    def counts(self) -> dict[str, int]:
        """How many chunks were placed each way, and how many not."""
        found = {"offsets": 0, "exact": 0, "fuzzy": 0}
        for _, _, _, how in self.placed.values():
            found[how] += 1
        found["unaligned"] = len(self.unaligned)
        return found


def _int(value: Any) -> int | None:
    return None if value is None or isinstance(value, bool) else int(value)


def chunk_of(record: Any) -> Chunk:
    """A :class:`Chunk` from a framework's chunk (a LangChain ``Document``, a LlamaIndex
    node, a Haystack ``Document``) or its dict, or a plain ``{id, text, doc?, start?,
    end?}``."""
    if not isinstance(record, Mapping):
        record = _as_dict(record)
    meta = record.get("metadata") or record.get("meta") or {}
    text = next((record[k] for k in ("text", "page_content", "content") if record.get(k)), None)
    chunk_id = next((record[k] for k in ("id", "id_", "node_id") if record.get(k)), None)
    if chunk_id is None:
        chunk_id = meta.get("id")
    if chunk_id is None or not isinstance(text, str):
        raise ValueError("a chunk needs an id and its text")
    doc = next(
        (
            source[k]
            for source in (record, meta)
            for k in ("doc", "ref_doc_id", "source_id", "doc_id", "source")
            if source.get(k) is not None
        ),
        None,
    )
    start = next(
        (
            source[k]
            for source in (record, meta)
            for k in ("start", "start_char_idx", "start_index", "split_idx_start")
            if source.get(k) is not None
        ),
        None,
    )
    source = (record.get("relationships") or {}).get("1")  # LlamaIndex's SOURCE, serialised
    if doc is None and isinstance(source, Mapping) and source.get("node_id") is not None:
        doc = source["node_id"]
    end = record.get("end", record.get("end_char_idx"))
    return Chunk(str(chunk_id), text, None if doc is None else str(doc), _int(start), _int(end))


def _as_dict(node: Any) -> dict[str, Any]:
    """The fields :func:`chunk_of` reads, from a framework object by attribute."""
    names = ("id", "id_", "text", "page_content", "content", "metadata", "meta")
    found = {name: getattr(node, name, None) for name in names}
    for name in ("start_char_idx", "end_char_idx", "ref_doc_id"):
        found[name] = getattr(node, name, None)
    return found


def align(chunks: Iterable[Chunk], documents: Mapping[str, str]) -> Alignment:
    """Place each chunk in its source document (see the module's docstring). A chunk
    without a ``doc`` is searched in every document, and is unaligned when its text
    occurs in more than one. Repeated text within a document is resolved by the
    recorded start (the occurrence nearest to it), else the first occurrence."""
    placed: dict[str, tuple[str, int, int, str]] = {}
    unaligned: dict[str, str] = {}
    for chunk in chunks:
        if chunk.id in placed or chunk.id in unaligned:
            unaligned[chunk.id] = "the chunk id occurs more than once"
            placed.pop(chunk.id, None)
            continue
        if chunk.doc is not None and chunk.doc not in documents:
            unaligned[chunk.id] = f"its source document {chunk.doc!r} is not in the documents"
            continue
        if not chunk.text.strip():
            unaligned[chunk.id] = "the chunk's text is empty"
            continue
        found = _place(chunk, documents)
        if isinstance(found, str):
            unaligned[chunk.id] = found
        else:
            placed[chunk.id] = found
    return Alignment(placed, unaligned)


def _place(chunk: Chunk, documents: Mapping[str, str]) -> tuple[str, int, int, str] | str:
    text = chunk.text
    if chunk.doc is not None:
        source = documents[chunk.doc]
        if chunk.start is not None:
            end = chunk.end if chunk.end is not None else chunk.start + len(text)
            if source[chunk.start : end] == text:
                return chunk.doc, chunk.start, end, "offsets"
        at = _nearest(source, text, chunk.start)
        if at is not None:
            return chunk.doc, at, at + len(text), "exact"
        fuzzy = _fuzzy(source, text, chunk.start)
        if fuzzy is None:
            return (
                f"its text is not in {chunk.doc!r}, exactly or with {MIN_FUZZY:.0%} of its "
                "characters matched in order"
            )
        return chunk.doc, fuzzy[0], fuzzy[1], "fuzzy"
    hits = [(doc, at) for doc, source in documents.items() if (at := source.find(text)) >= 0]
    if len(hits) == 1:
        doc, at = hits[0]
        return doc, at, at + len(text), "exact"
    if hits:
        return (
            f"no source document recorded and its text occurs in {len(hits)} documents "
            f"({', '.join(repr(doc) for doc, _ in hits[:3])}{', ...' if len(hits) > 3 else ''})"
        )
    return "no source document recorded and its text occurs in none exactly"


def _nearest(source: str, text: str, hint: int | None) -> int | None:
    """The start of the occurrence of ``text`` in ``source`` nearest to ``hint`` (the
    first when there is no hint), or None."""
    at = source.find(text)
    if at < 0 or hint is None:
        return None if at < 0 else at
    best = at
    while at >= 0:
        if abs(at - hint) < abs(best - hint):
            best = at
        at = source.find(text, at + 1)
    return best


def _fuzzy(source: str, text: str, hint: int | None) -> tuple[int, int] | None:
    """``(start, end)`` of the stretch of ``source`` that holds at least
    :data:`MIN_FUZZY` of ``text``'s characters in order (whitespace, quotes and case a
    chunker may have changed), searched near ``hint`` and near where a piece of the text
    occurs exactly (its start, middle, end): never the whole of a long document."""
    hints = [] if hint is None else [hint]
    for at in (0, max(0, len(text) // 2 - _ANCHOR // 2), max(0, len(text) - _ANCHOR)):
        found = source.find(text[at : at + _ANCHOR])
        if found >= 0:
            hints.append(found - at)
    for near in dict.fromkeys(hints):
        placed = _fuzzy_near(source, text, near)
        if placed is not None:
            return placed
    return None


_ANCHOR = 24  # characters of a chunk looked up exactly to anchor a fuzzy search


def _fuzzy_near(source: str, text: str, hint: int) -> tuple[int, int] | None:
    low, high = max(0, hint - len(text) // 2), min(len(source), hint + 3 * len(text) // 2 + 16)
    window = source[low:high]
    matcher = difflib.SequenceMatcher(None, window, text, autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    if not blocks:
        return None
    # the densest run of blocks: drop stray matches far from the rest
    best: tuple[int, int, int] | None = None
    for first in range(len(blocks)):
        matched = 0
        for last in range(first, len(blocks)):
            matched += blocks[last].size
            span = blocks[last].a + blocks[last].size - blocks[first].a
            if span > 1.5 * len(text) + 16:
                break
            if best is None or matched > best[0]:
                best = (matched, blocks[first].a, blocks[last].a + blocks[last].size)
    assert best is not None
    if best[0] < MIN_FUZZY * len(text):
        return None
    return low + best[1], low + best[2]


def span_of(raw: Mapping[str, Any], documents: Mapping[str, str] | None = None) -> Span | str:
    """A :class:`Span` from a schema-valid ``expected_output.spans`` item; a quoted
    ``text`` is found in its document (``documents``), else the reason it cannot be."""
    doc, grade = str(raw["doc"]), float(raw["grade"])
    passage = None if raw.get("passage") is None else str(raw["passage"])
    if "start" in raw and "end" in raw:
        if raw["end"] <= raw["start"]:
            return f"end {raw['end']} is not past start {raw['start']}"
        if documents is not None and doc in documents and raw["end"] > len(documents[doc]):
            return (
                f"end {raw['end']} lies past the end of {doc!r} ({len(documents[doc])} characters)"
            )
        return Span(doc, int(raw["start"]), int(raw["end"]), grade, passage)
    if documents is None or doc not in documents:
        return f"the quoted text's document {doc!r} is not in the documents"
    at = documents[doc].find(raw["text"])
    if at < 0:
        return f"the quoted text is not in {doc!r}"
    return Span(doc, at, at + len(raw["text"]), grade, passage)


def lift(labels: Mapping[str, float], alignment: Alignment) -> tuple[list[Span], dict[str, str]]:
    """Span labels from labels on passages (``{passage id: grade}``) whose alignment is
    known; the passages that cannot be lifted, with why."""
    spans = []
    left: dict[str, str] = {}
    for passage, grade in labels.items():
        if passage in alignment.placed:
            doc, start, end, _ = alignment.placed[passage]
            spans.append(Span(doc, start, end, float(grade), passage))
        else:
            left[passage] = alignment.unaligned.get(passage, "the passage is not in the chunks")
    return spans, left


# -- files ---------------------------------------------------------------------------------


def read_documents(path: Path) -> dict[str, str]:
    """Source documents from a JSONL file of ``{"id": ..., "text": ...}`` lines."""
    found: dict[str, str] = {}
    problems = []
    for line, raw in read_jsonl(path):
        if (
            not isinstance(raw, Mapping)
            or raw.get("id") is None
            or not isinstance(raw.get("text"), str)
        ):
            problems.append(
                Problem('a document needs "id" and "text"', source=str(path), line=line)
            )
            continue
        doc = str(raw["id"])
        if doc in found:
            problems.append(Problem(f"duplicate document id {doc!r}", source=str(path), line=line))
        found[doc] = raw["text"]
    if problems:
        raise InputError(problems, summary=f"invalid documents file {path}")
    return found


def read_chunks(path: Path) -> list[Chunk]:
    """Chunks from a JSONL file, one per line in any shape :func:`chunk_of` reads."""
    chunks, problems = [], []
    for line, raw in read_jsonl(path):
        try:
            chunks.append(chunk_of(raw))
        except (ValueError, TypeError, AttributeError) as error:
            problems.append(Problem(str(error), source=str(path), line=line))
    if problems:
        raise InputError(problems, summary=f"invalid chunks file {path}")
    return chunks


def read_span_table(path: Path) -> dict[str, list[Span]]:
    """Span labels per query id from a span table: TREC-like whitespace lines ``QUERY DOC
    START END GRADE [PASSAGE]`` (any other suffix: ``.spans``, ``.txt``, ``.trec``), or
    ``.csv``/``.tsv``/``.parquet``/``.jsonl`` with the columns :data:`SPAN_COLUMNS`
    (``passage`` optional)."""
    suffix = format_suffix(path)
    rows: list[tuple[int | None, dict[str, Any]]]
    if suffix == ".jsonl":
        rows = [(line, raw) for line, raw in read_jsonl(path)]
    elif suffix in (".csv", ".tsv", ".parquet"):
        rows = [(None, row) for row in _table(path, suffix)]
    else:
        rows = []
        for number, text in enumerate(read_text(path).splitlines(), 1):
            fields = text.split()
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) not in (5, 6):
                rows.append((number, {"_fields": len(fields)}))
                continue
            rows.append((number, dict(zip((*SPAN_COLUMNS, "passage"), fields, strict=False))))
    found: dict[str, list[Span]] = {}
    problems = []
    for index, (line, row) in enumerate(rows):
        try:
            query, span = _span_row(row)
        except (KeyError, ValueError, TypeError) as error:
            where = {"line": line} if line is not None else {"pointer": f"/{index}"}
            problems.append(Problem(f"not a span row: {error}", source=str(path), **where))
            continue
        found.setdefault(query, []).append(span)
    if problems:
        raise InputError(problems, summary=f"invalid span table {path}")
    return found


def _table(path: Path, suffix: str) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    if suffix == ".parquet":
        table = pq.read_table(path)
    else:
        delimiter = "\t" if suffix == ".tsv" else ","
        strings = {name: pa.string() for name in ("query_id", "doc_id", "passage")}
        table = csv.read_csv(
            path,
            parse_options=csv.ParseOptions(delimiter=delimiter),
            convert_options=csv.ConvertOptions(column_types=strings),
        )
    return table.to_pylist()


def _span_row(row: Mapping[str, Any]) -> tuple[str, Span]:
    if "_fields" in row:
        raise ValueError(
            f"{row['_fields']} fields, where QUERY DOC START END GRADE [PASSAGE] are 5 or 6"
        )
    query, doc = row["query_id"], row["doc_id"]
    if query is None or doc is None or str(query) == "" or str(doc) == "":
        raise ValueError("empty query_id or doc_id")
    start, end = _offset(row["start"]), _offset(row["end"])
    if end <= start:
        raise ValueError(f"end {end} is not past start {start}")
    grade = float(row["grade"])
    if not np.isfinite(grade):
        raise ValueError(f"grade {row['grade']!r} is not a finite number")
    passage = row.get("passage")  # a table's empty cell: none
    return str(query), Span(str(doc), start, end, grade, str(passage) if passage else None)


def _offset(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"offset {value!r} is not a whole number")
    number = int(value)
    if number < 0:
        raise ValueError(f"offset {value!r} is negative")
    return number


def write_span_table(path: Path, spans: Mapping[str, Sequence[Span]]) -> None:
    """A span table in the format its suffix names (:func:`read_span_table`), atomically."""
    import json

    from engine.io.writer import atomic_write

    suffix = format_suffix(path)
    rows = [
        {
            "query_id": query,
            "doc_id": s.doc,
            "start": s.start,
            "end": s.end,
            "grade": s.to_dict()["grade"],
        }
        | ({"passage": s.passage} if s.passage is not None else {})
        for query, found in spans.items()
        for s in found
    ]
    if suffix == ".jsonl":
        atomic_write(path, "".join(json.dumps(row) + "\n" for row in rows))
    elif suffix in (".csv", ".tsv", ".parquet"):
        import io

        import pyarrow as pa
        import pyarrow.csv as csv
        import pyarrow.parquet as pq

        columns = {name: [row[name] for row in rows] for name in SPAN_COLUMNS}
        columns["grade"] = [float(g) for g in columns["grade"]]
        if any("passage" in row for row in rows):
            columns["passage"] = [row.get("passage") for row in rows]
        table = pa.table(columns)
        sink = io.BytesIO()
        if suffix == ".parquet":
            pq.write_table(table, sink)
        else:
            delimiter = "\t" if suffix == ".tsv" else ","
            csv.write_csv(
                table, sink, csv.WriteOptions(delimiter=delimiter, quoting_style="needed")
            )
        atomic_write(path, sink.getvalue())
    else:
        atomic_write(
            path,
            "".join(
                f"{row['query_id']} {row['doc_id']} {row['start']} {row['end']} {row['grade']}"
                + (f" {row['passage']}\n" if "passage" in row else "\n")
                for row in rows
            ),
        )
