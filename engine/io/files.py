"""Input files as they arrive (a UTF-8 byte-order mark is ignored; ``.gz``, ``.bz2``,
``.xz`` and ``.zst`` are decompressed by suffix), YAML/JSON/JSONL parsing with
line-numbered errors."""

from __future__ import annotations

import io
import json
import lzma
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from engine.errors import InputError, Problem

__all__ = [
    "COMPRESSIONS",
    "RESULT_FORMATS",
    "arrow_input",
    "base_name",
    "format_suffix",
    "open_binary",
    "open_text",
    "read_document",
    "read_jsonl",
    "read_text",
]

#: File-name suffix -> codec; the suffix before it names the format (``run.trec.gz``).
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}

#: The formats per-sample results are written in (:mod:`engine.io.sinks`).
RESULT_FORMATS = ("json", "jsonl", "csv", "parquet")


def format_suffix(path: str | os.PathLike[str]) -> str:
    """The lower-case suffix that names the file's format, past any compression suffix:
    ``.jsonl`` for ``data.jsonl.gz``."""
    path = Path(path)
    if path.suffix.lower() in COMPRESSIONS:
        path = path.with_suffix("")
    return path.suffix.lower()


def base_name(path: str | os.PathLike[str]) -> str:
    """The file's name without its format and compression suffixes: ``run`` for
    ``run.trec.gz``."""
    path = Path(path)
    if path.suffix.lower() in COMPRESSIONS:
        path = path.with_suffix("")
    return path.stem


def _unreadable(path: Path, error: OSError) -> InputError:
    return InputError([Problem(f"cannot read file: {error.strerror or error}", source=str(path))])


def open_binary(path: str | os.PathLike[str]) -> IO[bytes]:
    """The file's bytes, decompressed according to its suffix."""
    path = Path(path)
    codec = COMPRESSIONS.get(path.suffix.lower())
    try:
        if codec == "gzip":  # (gzip, bz2 and tempfile imported when used: 5 ms of --help)
            import gzip

            return gzip.open(path, "rb")  # type: ignore[return-value]
        if codec == "bz2":
            import bz2

            return bz2.open(path, "rb")
        if codec == "xz":
            return lzma.open(path, "rb")
        if codec == "zstd":
            import pyarrow

            stream = pyarrow.CompressedInputStream(pyarrow.OSFile(str(path)), "zstd")
            return io.BufferedReader(stream)  # type: ignore[arg-type]  # lines need a buffer
        return path.open("rb")
    except OSError as error:
        raise _unreadable(path, error) from None


def arrow_input(path: str | os.PathLike[str]) -> Any:
    """A pyarrow input stream of the decompressed file, for pyarrow's readers."""
    import pyarrow

    path = Path(path)
    codec = COMPRESSIONS.get(path.suffix.lower())
    try:
        if codec is None:
            return pyarrow.OSFile(str(path))
        if codec == "xz":  # not an Arrow codec: Python's lzma behind Arrow's file interface
            return pyarrow.PythonFile(open_binary(path), mode="r")
        return pyarrow.CompressedInputStream(pyarrow.OSFile(str(path)), codec)
    except OSError as error:
        raise _unreadable(path, error) from None


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """The file as UTF-8 text (a leading byte-order mark dropped), decompressed by suffix."""
    return io.TextIOWrapper(open_binary(path), encoding="utf-8-sig", newline=None)  # type: ignore[arg-type]


def read_text(path: str | os.PathLike[str]) -> str:
    """The whole file as text; unreadable or non-UTF-8 files are an :class:`InputError`."""
    path = Path(path)
    try:
        with open_text(path) as handle:
            return handle.read()
    except OSError as error:
        raise _unreadable(path, error) from None
    except (UnicodeDecodeError, EOFError, lzma.LZMAError) as error:
        reason = getattr(error, "reason", None) or str(error)
        raise InputError([Problem(f"not UTF-8 text: {reason}", source=str(path))]) from None


def read_document(path: Path) -> Any:
    """Parse a whole YAML (``.yaml``/``.yml``) or JSON file."""
    text = read_text(path)
    if format_suffix(path) in (".yaml", ".yml"):
        import yaml  # here: reading TREC files and JSON does not import it

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            problem = getattr(error, "problem", None) or str(error)
            raise InputError(
                [Problem(f"malformed YAML: {problem}", source=str(path), line=line)]
            ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            [
                Problem(
                    f"malformed JSON: {error.msg} (column {error.colno})",
                    source=str(path),
                    line=error.lineno,
                )
            ]
        ) from None


def yaml_lines(text: str, pointers: Iterable[str]) -> dict[str, int]:
    """The 1-based line of the YAML node at each JSON pointer (of its deepest existing
    ancestor when the pointer goes further than the document), for error messages."""
    import yaml

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    found = {}
    for pointer in pointers:
        node = root
        for part in filter(None, pointer.split("/")):
            key = part.replace("~1", "/").replace("~0", "~")
            child = None
            if isinstance(node, yaml.MappingNode):
                child = next((v for k, v in node.value if k.value == key), None)
            elif isinstance(node, yaml.SequenceNode) and key.isdigit():
                child = node.value[int(key)] if int(key) < len(node.value) else None
            if child is None:
                break
            node = child
        if node is not None:
            found[pointer] = node.start_mark.line + 1
    return found


def read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-blank line; all malformed lines
    are reported together."""
    problems = []
    try:
        with open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as error:
                    problems.append(
                        Problem(
                            f"malformed JSON: {error.msg} (column {error.colno})",
                            source=str(path),
                            line=number,
                        )
                    )
    except OSError as error:
        raise _unreadable(path, error) from None
    except (UnicodeDecodeError, EOFError, lzma.LZMAError) as error:
        reason = getattr(error, "reason", None) or str(error)
        raise InputError([Problem(f"not UTF-8 text: {reason}", source=str(path))]) from None
    if problems:
        raise InputError(problems, summary=f"malformed JSONL in {path}")
