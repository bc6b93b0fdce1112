"""Qrels and runs that are not TREC text: Parquet, Arrow/Feather, CSV, TSV and JSONL
files (and ranx's JSON, ``{q_id: {doc_id: score}}``), found by their content
(:mod:`engine.io.sniff`), their columns named as slotwise or a peer names them
(:mod:`engine.io.column_names`).

:func:`read` gives one file's long table in slotwise's column names and where its rows
come from: the line of each row of a text file (CSV, TSV, JSONL), the row number of a
binary one, so every problem names the file and the line or row.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from engine.errors import InputError, Problem
from engine.io import column_names, shards, sniff
from engine.io.files import open_binary, parse_json
from engine.io.shards import Shard

__all__ = ["format_of", "read", "shard_of", "table_of", "to_trec"]

_TEXT_TYPES = dict.fromkeys(sorted(column_names.NAMES | {"utility", "grades"}), pa.string())
#: The same with labels and scores as numbers: read so first (parsed by pyarrow, as TREC
#: text's are), as text again when a value is not one (the grammar then says why).
_NUMBER_TYPES = {
    name: kind if name in column_names.IDS else pa.float64() for name, kind in _TEXT_TYPES.items()
}


def shard_of(path: str | os.PathLike[str]) -> Shard:
    """A local file as a shard named as given."""
    return Shard(os.fspath(path), os.fspath(path))


def format_of(source: Shard | str | os.PathLike[str]) -> str:
    """The format of a file (:func:`engine.io.sniff.sniff` of its first bytes,
    decompressed by its suffix or by its magic bytes). A local path that is not a
    regular file (missing, a pipe: read once) is TREC text, whose reader words why."""
    if isinstance(source, Shard):
        return sniff.sniff(_head(shards.open_stream(source)), source.path)
    if not os.path.isfile(source):
        return sniff.TREC
    return sniff.sniff(_head(open_binary(source, lines=False)), source)


def _head(stream: Any) -> bytes:
    with stream:
        return bytes(stream.read(sniff.HEAD))


def read(
    source: Shard | str | os.PathLike[str],
    kind: str,
    fmt: str | None = None,
    names: Mapping[str, str] | None = None,
) -> tuple[pa.Table, np.ndarray | None]:
    """The long table of a ``kind`` ("labels"/"qrels" or "run") file that is not TREC
    text, its columns renamed to slotwise's (``names`` first, then the peers'), and the
    line of each row (None for Parquet and Arrow files, whose rows are counted). A file
    that cannot be read is an :class:`~engine.errors.InputError` naming it, and the
    line where a text file goes wrong."""
    shard = source if isinstance(source, Shard) else shard_of(source)
    table, lines = table_of(shard, fmt)
    return column_names.canonical(table, kind, shard.name, names), lines


def table_of(
    source: Shard | str | os.PathLike[str], fmt: str | None = None
) -> tuple[pa.Table, np.ndarray | None]:
    """A table file (Parquet, Arrow, CSV, TSV, JSONL; ``fmt``, else told by its content)
    with its columns as named, and the line of each row (None: counted)."""
    shard = source if isinstance(source, Shard) else shard_of(source)
    fmt = fmt or format_of(shard)
    try:
        if fmt == sniff.PARQUET:
            import pyarrow.parquet

            table, lines = pyarrow.parquet.read_table(shards.open_file(shard)), None
        elif fmt == sniff.ARROW:
            import pyarrow.feather

            table, lines = pyarrow.feather.read_table(shards.open_file(shard)), None
        elif fmt in (sniff.CSV, sniff.TSV):
            table, lines = _delimited(shard, "\t" if fmt == sniff.TSV else ",")
        elif fmt == sniff.JSONL:
            table, lines = _jsonl(shard)
        else:
            message = "TREC text where a table (Parquet, Arrow, CSV, TSV, JSONL) is read"
            raise InputError([Problem(message, source=shard.name)])
    except (OSError, pa.ArrowInvalid) as error:
        message = f"cannot read {fmt} file: {_reason(error)}"
        raise InputError([Problem(message, source=shard.name)]) from None
    shards.unchanged(shard)
    return table, lines


def _reason(error: Exception) -> str:
    return getattr(error, "strerror", None) or str(error)


def _text(shard: Shard) -> bytes:
    with shards.open_stream(shard) as stream:
        data = bytes(stream.read())
    return data.removeprefix(b"\xef\xbb\xbf")


def _lines(data: bytes) -> np.ndarray:
    """The number of each line of ``data`` that is not empty (a row of the table)."""
    raw = np.frombuffer(data, np.uint8)
    if not raw.size:
        return np.zeros(0, np.int64)
    breaks = np.flatnonzero(raw == ord("\n"))
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [raw.size]))
    carriage = (ends > starts) & (raw[np.maximum(ends - 1, 0)] == ord("\r"))
    filled = (ends - starts - carriage) > 0
    return np.flatnonzero(filled).astype(np.int64) + 1


def _delimited(shard: Shard, delimiter: str) -> tuple[pa.Table, np.ndarray]:
    """A CSV or TSV file with a header line; ids as text as written (``007`` stays
    ``007``), labels and scores as numbers (as text when one is not, which the label and
    score readers then name), an empty cell missing. A line with too many or too few
    fields is named."""
    import pyarrow.csv as csv

    data = _text(shard)
    lines = _lines(data)[1:]  # the header's line is no row
    parse = csv.ParseOptions(delimiter=delimiter, newlines_in_values=False)
    reason = ""
    for types in (_NUMBER_TYPES, _TEXT_TYPES):
        convert = csv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=True)
        try:
            table = csv.read_csv(
                pa.BufferReader(data), parse_options=parse, convert_options=convert
            )
        except pa.ArrowInvalid as error:
            reason = str(error)
            continue
        return table, lines
    raise _worded(shard, reason, data, delimiter)


def _worded(shard: Shard, reason: str, data: bytes, delimiter: str) -> InputError:
    """pyarrow's reason, with the first line whose number of fields is not the header's
    (when one is: what pyarrow's reason most often is)."""
    rows = data.split(b"\n")
    sep = delimiter.encode()
    width = rows[0].count(sep) if rows else 0
    line = next(
        (n for n, row in enumerate(rows[1:], 2) if row.strip() and row.count(sep) != width),
        None,
    )
    return InputError([Problem(f"cannot read the file: {reason}", source=shard.name, line=line)])


def _jsonl(shard: Shard) -> tuple[pa.Table, np.ndarray | None]:
    """One JSON object per line, read by pyarrow; a line that is not one, or a column
    whose values change type, named by its line (read again line by line). A file that
    is one object of objects, ``{q_id: {doc_id: score}}`` (ranx's ``Qrels.save`` and
    ``Run.save`` as JSON, pytrec_eval's dicts), is their rows (numbered, not lined)."""
    import pyarrow.json as pajson

    data = _text(shard)
    nested = _nested(data)
    if nested is not None:
        return nested, None
    lines = _lines(data)
    try:
        return pajson.read_json(pa.BufferReader(data)), lines
    except pa.ArrowInvalid:
        pass
    return _jsonl_by_line(shard, data), lines


def _nested(data: bytes) -> pa.Table | None:
    """``{q_id: {doc_id: score}}`` as a table of ``q_id``, ``doc_id`` and ``score`` (the
    scores as written, for the label and score readers to check); None for any other
    JSON (JSONL's lines are more than one document)."""
    import orjson

    try:
        found = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(found, dict) or not found or not all(type(v) is dict for v in found.values()):
        return None
    inner = found.values()
    sizes = np.fromiter(map(len, inner), dtype=np.int64, count=len(found))
    scores = list(itertools.chain.from_iterable(map(dict.values, inner)))
    try:
        values = pa.array(scores)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        values = pa.array([_cell(score) for score in scores], pa.string())
    return pa.table(
        {
            "q_id": pa.array(list(found), pa.string()).take(
                np.repeat(np.arange(len(found)), sizes)
            ),
            "doc_id": pa.array(list(itertools.chain.from_iterable(inner)), pa.string()),
            "score": values,
        }
    )


def _jsonl_by_line(shard: Shard, data: bytes) -> pa.Table:
    """The table of JSONL lines read one by one: each object's values as text (numbers
    as written, a null missing), which the label and score readers then check; each
    line that is not a JSON object is a problem."""
    rows: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = parse_json(raw.decode("utf-8"), shard.name, number)
        except InputError as error:
            problems += error.problems
            continue
        except UnicodeDecodeError as error:
            problems.append(
                Problem(f"not UTF-8 text: {error.reason}", source=shard.name, line=number)
            )
            continue
        if not isinstance(record, dict):
            problems.append(Problem("a line is a JSON object", source=shard.name, line=number))
            continue
        rows.append({key: _cell(value) for key, value in record.items()})
    if problems:
        raise InputError(problems, summary=f"malformed JSONL {shard.name}")
    names = list(dict.fromkeys(key for row in rows for key in row))
    return pa.table(
        {name: pa.array([row.get(name) for row in rows], pa.string()) for name in names}
    )


def _cell(value: Any) -> str | None:
    """A JSON value as text: a string as it is, a number as written, a null missing;
    anything else as JSON (which no id column or number reader takes)."""
    if value is None or isinstance(value, str):
        return value
    import json

    return json.dumps(value) if isinstance(value, bool | list | dict) else str(value)


def to_trec(source: str | os.PathLike[str], kind: str, target: str | os.PathLike[str]) -> str:
    """Write a qrels or run table (``kind``) as the TREC text of the same rows, values as
    written (numbers in their shortest form), for readers of TREC text alone (``slotwise
    trec-eval``); a run's tag is its ``tag`` column's last value, else the file's name.
    Returns the tag (qrels: ""). A missing value, or an id with whitespace (which TREC
    text cannot hold), is an :class:`~engine.errors.InputError` naming the row."""
    import pyarrow.compute as pc

    from engine.io.columns import string_bytes
    from engine.io.files import base_name
    from engine.io.writer import AtomicFile

    table, lines = read(source, kind)
    name = os.fspath(source)
    value = "relevance" if kind == "qrels" else "score"
    needed = ["query_id", "doc_id", value]
    missing = [column for column in needed if column not in table.column_names]
    if missing:
        message = (
            f"a {kind} for trec-eval needs columns {', '.join(needed)} (the peers' names too); "
            f"missing {', '.join(missing)} (found {', '.join(table.column_names)})"
        )
        raise InputError([Problem(message, source=name)], summary=f"invalid {kind}")
    fields = [pc.utf8_trim_whitespace(table.column(c).cast(pa.string())) for c in needed]
    for column, text in zip(needed, fields, strict=True):
        bad = pc.or_(pc.is_null(text), pc.match_substring_regex(text, r"^$|\s"))
        rows = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
        if rows.size:
            row = int(rows[0])
            place = f"line {int(lines[row])}" if lines is not None else f"row {row}"
            message = f"{place}: {column} is missing, empty or holds whitespace"
            raise InputError([Problem(message, source=name)], summary=f"invalid {kind}")
    count = table.num_rows
    if kind == "qrels":
        columns = [fields[0], pa.repeat("0", count), fields[1], fields[2]]
        tag = ""
    else:
        tags = table.column("tag").cast(pa.string()) if "tag" in table.column_names else None
        tag = (tags[-1].as_py() if tags is not None and count else None) or base_name(name)
        tag = "".join(tag.split()) or "run"  # one field
        ranks = pc.cast(pa.array(np.arange(1, count + 1)), pa.string())
        columns = [fields[0], pa.repeat("Q0", count), fields[1], ranks, fields[2]]
        columns.append(pa.repeat(tag, count))
    text = pc.binary_join_element_wise(*columns, pa.repeat("", count), " ")
    with AtomicFile(target, binary=True) as handle:
        for chunk in pa.chunked_array([text]).chunks:  # each line ends with the separator
            handle.write(string_bytes(pc.replace_substring_regex(chunk, " $", "\n")))
    return tag
