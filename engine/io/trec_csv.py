"""TREC files as pyarrow's CSV reader parses them, and parses started ahead.

This module imports pyarrow and little else, so that a command line can start parsing
the files it names (:func:`read_ahead`) while the rest of slotwise is imported, some
0.1 s of a fresh process; :func:`parse_file` then takes the table parsed ahead, if the
file is unchanged since. :mod:`engine.io.trec` turns the tables into columns.
"""

from __future__ import annotations

import os
import stat
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as csv

from engine.errors import InputError
from engine.io import sniff
from engine.io.files import arrow_input, open_binary

__all__ = ["FIELDS", "ID", "parse", "parse_file", "parse_options", "read_ahead", "read_options"]

#: Each kind of file's fields, and the one that holds its number.
FIELDS = {
    "qrels": (("query", "iteration", "doc", "label"), "label"),
    "run": (("query", "q0", "doc", "rank", "score", "tag"), "score"),
}
#: Query ids as pyarrow reads them: dictionary-encoded block by block.
ID = pa.dictionary(pa.int32(), pa.string())
#: Bytes per block of pyarrow's CSV reader, whose blocks are parsed in parallel (4 MiB
#: blocks held 20-80 MiB more in flight reading a 10 M-line run, and were no faster).
_CSV_BLOCK = 1 << 20

#: The parses started ahead, by file and kind: the file's identity and times when it
#: started, and the table to come.
_AHEAD: dict[tuple[str, str], tuple[tuple[int, ...], Future[pa.Table | None]]] = {}


def read_options(kind: str) -> csv.ReadOptions:
    return csv.ReadOptions(column_names=list(FIELDS[kind][0]), block_size=_CSV_BLOCK)


def parse_options(delimiter: str) -> csv.ParseOptions:
    return csv.ParseOptions(
        delimiter=delimiter,
        quote_char=False,
        escape_char=False,
        double_quote=False,
        newlines_in_values=False,
        ignore_empty_lines=True,
    )


def parse(source: Any, kind: str, delimiter: str) -> pa.Table | None:
    """The query, doc and number columns of a ``kind`` file ("qrels" or "run"), or None
    when pyarrow cannot parse it (the line reader then reads it or words why)."""
    number = FIELDS[kind][1]
    try:
        return csv.read_csv(
            source,
            read_options=read_options(kind),
            parse_options=parse_options(delimiter),
            convert_options=csv.ConvertOptions(
                include_columns=["query", "doc", number],
                column_types={"query": ID, "doc": pa.string(), number: pa.float64()},
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, OSError, InputError):
        return None


def delimiter(first_line: bytes) -> str:
    """A space, or a tab when the first line separates its fields with tabs only."""
    return "\t" if b"\t" in first_line and b" " not in first_line.strip() else " "


def parse_file(path: Path, kind: str) -> pa.Table | None:
    """:func:`parse` of a whole file, decompressed by its suffix: the table parsed ahead
    when there is one and the file is unchanged since."""
    ahead = _AHEAD.pop(_key(path, kind), None)
    if ahead is not None and ahead[0] == _identity(path):
        return ahead[1].result()
    return _parse_now(path, kind)


def read_ahead(path: str, kind: str) -> None:
    """Start :func:`parse_file` of a regular file on a thread of its own, for the next
    :func:`parse_file` of it to take. The thread is not a daemon: a process that never
    takes the table waits for it before it ends (pyarrow's threads do not survive the
    interpreter's end)."""
    identity = _identity(Path(path))
    if identity is None:
        return  # not a regular file (a pipe is read once): read when asked, as always
    with open(path, "rb") as handle:
        head = handle.read(sniff.HEAD)
    if sniff.codec(head) is None and sniff.sniff(head, path) != sniff.TREC:
        return  # a table (Parquet, CSV, ...): not TREC text's to parse
    table: Future[pa.Table | None] = Future()

    def parse_ahead() -> None:
        try:
            table.set_result(_parse_now(Path(path), kind))
        except Exception as error:  # raised to whoever takes it
            table.set_exception(error)

    _AHEAD[_key(Path(path), kind)] = (identity, table)
    threading.Thread(target=parse_ahead, name=f"slotwise-ahead-{kind}").start()


def _parse_now(path: Path, kind: str) -> pa.Table | None:
    with open_binary(path) as handle:
        first = handle.readline(1 << 16)
    return parse(arrow_input(path), kind, delimiter(first))


def _key(path: Path, kind: str) -> tuple[str, str]:
    return os.path.abspath(path), kind


def _identity(path: Path) -> tuple[int, ...] | None:
    """The file's device, inode, size and modification time; None when it is not a
    regular file."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns
