"""Where results go: per-sample rows written as they are scored, from the columns (orjson
for JSON and JSONL, Arrow's writers for CSV and Parquet), and the results document
around them. A file is written under a temporary name and renamed over the target only
when the evaluation succeeds.

The JSON document (``schemas/results.schema.json``) is written in this order: ``schema``,
``dataset``, ``metrics``, ``samples`` (one compact row per line), then ``summary``,
``diagnostics``, ``provenance`` and, when present, ``reports`` and ``outputs`` — the
same bytes whether the rows were scored in one chunk or streamed in many.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs
import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from engine.io.files import RESULT_FORMATS
from engine.io.writer import AtomicFile

__all__ = ["RowChunk", "Sink", "open_sink"]

FloatArray = npt.NDArray[np.float64]


@attrs.frozen
class RowChunk:
    """Consecutive per-sample rows: ids, one value column per metric label (NaN = NA),
    and optionally per-label details, per-sample errors and metadata (JSON text)."""

    ids: pa.Array
    values: Mapping[str, FloatArray]
    details: Mapping[str, Sequence[Any]] = attrs.field(factory=dict)
    errors: Mapping[str, str] = attrs.field(factory=dict)
    metadata: pa.Array | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def json_rows(self) -> pa.Array:
        """One compact JSON object per sample, built column by column: ``{"id",
        "scores"}`` plus ``details``, ``error`` and ``metadata`` where the sample has them."""
        count = len(self.ids)
        parts: list[Any] = ['{"id":', _json_strings(self.ids), ',"scores":{']
        for index, (label, values) in enumerate(self.values.items()):
            parts += [
                ("," if index else "") + orjson.dumps(label).decode() + ":",
                _json_numbers(values),
            ]
        parts.append("}")
        if self.details:
            found = [
                {label: rows[i] for label, rows in self.details.items() if rows[i] is not None}
                for i in range(count)
            ]
            parts.append(
                _optional(',"details":', [orjson.dumps(d).decode() if d else None for d in found])
            )
        if self.errors:
            errors = [self.errors.get(i) for i in self.ids.to_pylist()]
            parts.append(
                _optional(
                    ',"error":', [None if e is None else orjson.dumps(e).decode() for e in errors]
                )
            )
        if self.metadata is not None:
            parts.append(_optional(',"metadata":', self.metadata))
        parts.append("}")
        return _concatenated(parts, count)

    def table(self, id_column: str) -> pa.Table:
        """The ids and one float column per label, NA as null."""
        arrays = [self.ids] + [pa.array(v, mask=np.isnan(v)) for v in self.values.values()]
        return pa.Table.from_arrays(arrays, names=[id_column, *self.values])


class Sink:
    """Writes a results document or per-sample rows to a file (atomically) or a stream."""

    def __init__(self, target: str | os.PathLike[str] | IO[Any] | None, fmt: str) -> None:
        if fmt not in RESULT_FORMATS:
            raise ValueError(f"results are written as {', '.join(RESULT_FORMATS)}, not {fmt!r}")
        self.format = fmt
        self.path = None if target is None or hasattr(target, "write") else Path(target)  # type: ignore[arg-type]
        self._file = AtomicFile(self.path, binary=True) if self.path is not None else None
        stream: Any = target if hasattr(target, "write") else sys.stdout
        self.handle: IO[bytes] = (
            self._file.handle if self._file else getattr(stream, "buffer", stream)
        )
        self._rows = 0
        self._writer: Any = None

    def start(self, header: Mapping[str, Any]) -> None:
        """Before the rows: the document's leading keys (json only)."""
        if self.format == "json":
            text = orjson.dumps(dict(header), option=orjson.OPT_INDENT_2)
            self.handle.write(text[:-2] + b',\n  "samples": [')

    def write(self, chunk: RowChunk) -> None:
        if not len(chunk):
            return
        if self.format in ("json", "jsonl"):
            rows = chunk.json_rows()
            if self.format == "jsonl":
                self.handle.write(_joined(rows, "\n") + b"\n")
            else:
                self.handle.write(
                    (b"\n    " if self._rows == 0 else b",\n    ") + _joined(rows, ",\n    ")
                )
        else:
            self._table(chunk.table("id"))
        self._rows += len(chunk)

    def _table(self, table: pa.Table) -> None:
        if self.format == "csv":
            if self._rows == 0:
                self.handle.write(_csv_lines([pa.array(table.column_names)], header=True))
            self.handle.write(_csv_lines([table.column(0).combine_chunks(), *table.columns[1:]]))
            return
        import pyarrow.parquet

        if self._writer is None:
            self._writer = pyarrow.parquet.ParquetWriter(self.handle, table.schema)
        self._writer.write_table(table)

    def finish(self, trailer: Mapping[str, Any], labels: Sequence[str] = ()) -> None:
        """After the rows: the document's remaining keys (json), then close the file."""
        if self.format == "json":
            text = orjson.dumps(dict(trailer), option=orjson.OPT_INDENT_2)
            self.handle.write((b"\n  ]," if self._rows else b"],") + b"\n  " + text[4:])
            self.handle.write(b"\n")
        elif self.format in ("csv", "parquet") and self._rows == 0:
            empty = RowChunk(pa.array([], pa.string()), {label: np.zeros(0) for label in labels})
            self._table(empty.table("id"))
        if self._writer is not None:
            self._writer.close()
        if self._file is not None:
            self._file.commit()
        else:
            self.handle.flush()

    def abort(self) -> None:
        """Leave nothing behind (a file target keeps its previous content)."""
        if self._file is not None:
            self._file.abort()


def open_sink(target: str | os.PathLike[str] | IO[Any] | None, fmt: str | None = None) -> Sink:
    """A sink for ``target``, its format from ``fmt`` or the target's suffix."""
    if fmt is None:
        suffix = (
            Path(str(target)).suffix.lower().lstrip(".")
            if target is not None and not hasattr(target, "write")
            else ""
        )
        fmt = suffix if suffix in RESULT_FORMATS else "jsonl"
    return Sink(target, fmt)


def _csv_field(values: Any) -> pa.Array:
    """Values as CSV fields: numbers as their shortest text, null as empty, text quoted
    only where it must be (a comma, a quote or a line break), as Python's csv does."""
    import pyarrow.compute as pc

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if not pa.types.is_string(values.type):
        return pc.fill_null(pc.cast(values, pa.string()), "")
    special = pc.match_substring_regex(values, r'[,"\r\n]')
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(values, '"', '""'), '"', "")
    return pc.if_else(special, quoted, values)


def _csv_lines(columns: Sequence[Any], header: bool = False) -> bytes:
    """Rows of CSV text (``\\n`` line ends) from columns of equal length (or, for the
    header, one column of names)."""
    import pyarrow.compute as pc

    from engine.io.columns import string_bytes

    if header:
        return (",".join(_csv_field(columns[0]).to_pylist()) + "\n").encode()
    fields = [_csv_field(column) for column in columns]
    line = pc.binary_join_element_wise(*fields, ",") if len(fields) > 1 else fields[0]
    return bytes(string_bytes(pc.binary_join_element_wise(line, pa.repeat("", len(line)), "\n")))


def _concatenated(parts: Sequence[Any], count: int) -> pa.Array:
    """Row by row, the concatenation of string columns and constant strings."""
    import pyarrow.compute as pc

    columns = [pa.repeat(part, count) if isinstance(part, str) else part for part in parts]
    return pc.binary_join_element_wise(*columns, "")


def _joined(rows: pa.Array, separator: str) -> bytes:
    """The rows' text joined by ``separator``, as UTF-8 bytes."""
    import pyarrow.compute as pc

    from engine.io.columns import list_array, string_bytes

    joined = pc.binary_join(list_array([0, len(rows)], rows), separator)
    return bytes(string_bytes(joined))


def _json_strings(strings: pa.Array) -> pa.Array:
    """Each string as a JSON string literal (escaped by orjson where it has to be)."""
    import pyarrow.compute as pc

    plain = pc.binary_join_element_wise('"', strings, '"', "")
    escape = pc.match_substring_regex(strings, r'[\x00-\x1f"\\]')
    if not pc.any(escape).as_py():
        return plain
    escaped = [orjson.dumps(text).decode() for text in strings.filter(escape).to_pylist()]
    positions = np.flatnonzero(escape.to_numpy(zero_copy_only=False))
    texts = np.asarray(plain.to_pylist(), dtype=object)
    texts[positions] = escaped
    return pa.array(texts.tolist(), pa.string())


def _json_numbers(values: FloatArray) -> pa.Array:
    """Each float as a JSON number (shortest round-trip text), ``null`` for NaN or an
    infinity."""
    import pyarrow.compute as pc

    finite = np.isfinite(values)
    text = pc.cast(pa.array(np.where(finite, values, 0.0)), pa.string())
    return pc.if_else(pa.array(finite), text, "null")


def _optional(key: str, texts: Any) -> pa.Array:
    """``key`` + JSON text for the rows that have a value, else nothing."""
    import pyarrow.compute as pc

    column = texts if isinstance(texts, pa.Array) else pa.array(texts, pa.string())
    return pc.fill_null(pc.binary_join_element_wise(key, column, ""), "")
