"""Input files as they arrive (a UTF-8 byte-order mark is ignored; ``.gz``, ``.bz2``,
``.xz`` and ``.zst`` are decompressed by suffix), YAML/JSON/JSONL parsing with
line-numbered errors."""

from __future__ import annotations

import functools
import io
import json
import lzma
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, ClassVar

from engine.errors import InputError, Problem
from engine.io.grammar import NUMBER, exceeded, limit, written_number

__all__ = [
    "COMPRESSIONS",
    "RESULT_FORMATS",
    "arrow_input",
    "base_name",
    "format_suffix",
    "magic_codec",
    "open_binary",
    "open_text",
    "parse_json",
    "parse_yaml",
    "read_document",
    "read_jsonl",
    "read_text",
]

#: File-name suffix -> codec; the suffix before it names the format (``run.trec.gz``).
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}

#: The formats per-sample results are written in (:mod:`engine.io.sinks`).
RESULT_FORMATS = ("json", "jsonl", "csv", "parquet")

_WRITTEN = "tag:yaml.org,2002:written-number"  # a YAML number that keeps its text
_SCAN = 1 << 24  # bytes of a JSON text whose brackets are counted at a time


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


class _Checked(io.RawIOBase):
    """A file's bytes (decompressed by ``codec``, None: as they are) read under the limits
    of :mod:`engine.io.grammar`: lines of at most ``limit("line")`` bytes (when ``lines``),
    at most ``limit("ratio")`` decompressed bytes per compressed one (past the first 16
    MiB), and a truncated or corrupt compressed stream an error naming the file."""

    def __init__(self, inner: Any, path: Path, codec: str | None, lines: bool) -> None:
        self._inner, self._path, self._codec = inner, path, codec
        self._line = limit("line") if lines else 0
        self._allowed = (limit("ratio") * path.stat().st_size + (1 << 24)) if codec else 0
        self._read = self._since = 0  # bytes read; bytes since the last line break
        self._breaks = 0  # line breaks read

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._codec is None

    def seek(self, offset: int, whence: int = 0) -> int:
        position: int = self._inner.seek(offset, whence)
        return position

    def close(self) -> None:
        self._inner.close()
        super().close()

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._inner.read(len(buffer))
        except (EOFError, OSError, ValueError, lzma.LZMAError) as error:
            if self._codec is None:
                raise
            message = f"truncated or corrupt {self._codec} stream: {error}"
            raise InputError([Problem(message, source=str(self._path))]) from None
        size = len(data)
        buffer[:size] = data
        self._read += size
        if self._codec and self._read > self._allowed:
            raise exceeded("ratio", str(self._path), found=f"{self._read} bytes so far")
        if self._line:
            self._lines(data)
        return size

    def _lines(self, data: bytes) -> None:
        """Check the lines ``data`` ends or holds, a piece of at most one limit at a time
        (a line within a piece is no longer than the piece)."""
        for start in range(0, len(data), self._line):
            piece = data[start : start + self._line]
            first = piece.find(b"\n")
            if first < 0:
                self._since += len(piece)
            elif self._since + first <= self._line:
                self._breaks += piece.count(b"\n")
                self._since = len(piece) - piece.rfind(b"\n") - 1
                continue
            if self._since > self._line or first >= 0:
                line = self._breaks + 1
                raise exceeded("line", str(self._path), line)


def open_binary(path: str | os.PathLike[str], *, lines: bool = True) -> IO[bytes]:
    """The file's bytes, decompressed according to its suffix, read under the limits of
    :mod:`engine.io.grammar` (the line length only when ``lines``)."""
    path = Path(path)
    codec = COMPRESSIONS.get(path.suffix.lower()) or magic_codec(path)
    try:
        return io.BufferedReader(_Checked(_opened(path, codec), path, codec, lines), 1 << 16)
    except OSError as error:
        raise _unreadable(path, error) from None


def magic_codec(path: str | os.PathLike[str]) -> str | None:
    """The codec of a regular file that starts as a gzip, bz2, xz or zstd stream does,
    whatever its name (None for any other file, and for a pipe, read once)."""
    import stat

    from engine.io.sniff import codec

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            return codec(handle.read(8))
    except OSError:
        return None


def _opened(path: Path, codec: str | None) -> Any:
    """The file's bytes as the codec decompresses them."""
    if codec == "gzip":  # (gzip, bz2 and tempfile imported when used: 5 ms of --help)
        import gzip

        return gzip.open(path, "rb")
    if codec == "bz2":
        import bz2

        return bz2.open(path, "rb")
    if codec == "xz":
        return lzma.open(path, "rb")
    if codec == "zstd":
        import pyarrow

        return pyarrow.CompressedInputStream(pyarrow.OSFile(str(path)), "zstd")
    return io.FileIO(path, "rb")


def arrow_input(path: str | os.PathLike[str]) -> Any:
    """A pyarrow input stream of the decompressed file (see :func:`open_binary`), for
    pyarrow's readers of lines (CSV, TREC)."""
    import pyarrow

    return pyarrow.PythonFile(open_binary(path), mode="r")


def open_text(path: str | os.PathLike[str], *, lines: bool = True) -> IO[str]:
    """The file as UTF-8 text (a leading byte-order mark dropped), decompressed by suffix
    and read as :func:`open_binary` reads it."""
    binary = open_binary(path, lines=lines)
    return io.TextIOWrapper(binary, encoding="utf-8-sig", newline=None)  # type: ignore[arg-type]


def read_text(path: str | os.PathLike[str], *, lines: bool = True) -> str:
    """The whole file as text (see :func:`open_text`); unreadable or non-UTF-8 files are
    an :class:`InputError`."""
    path = Path(path)
    try:
        with open_text(path, lines=lines) as handle:
            return handle.read()
    except OSError as error:
        raise _unreadable(path, error) from None
    except UnicodeDecodeError as error:
        raise InputError([Problem(f"not UTF-8 text: {error.reason}", source=str(path))]) from None


def read_document(path: Path) -> Any:
    """Parse a whole YAML (``.yaml``/``.yml``) or JSON file as the grammar reads it
    (:func:`parse_yaml`, :func:`parse_json`)."""
    if format_suffix(path) in (".yaml", ".yml"):
        return parse_yaml(read_text(path), str(path))
    return parse_json(read_text(path, lines=False), str(path))


def parse_json(text: str, source: str, line: int | None = None) -> Any:
    """A JSON document (or a JSONL line: ``line``), each number that ``str`` would write
    otherwise keeping its text (:func:`~engine.io.grammar.written_number`); a key twice
    in an object, or nesting deeper than ``limit("depth")``, is an error naming it."""
    _check_depth(text, source, line)
    try:
        return json.loads(
            text,
            parse_int=written_number,
            parse_float=written_number,
            object_pairs_hook=_object,
        )
    except json.JSONDecodeError as error:
        message = f"malformed JSON: {error.msg} (column {error.colno})"
        at = error.lineno if line is None else line
        raise InputError([Problem(message, source=source, line=at)]) from None
    except _RepeatedKey as error:
        message = f"the key {error.args[0]!r} appears twice in one object"
        raise InputError([Problem(message, source=source, line=line)]) from None


class _RepeatedKey(ValueError):
    """A JSON object or YAML mapping has a key twice (the key)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        raise _RepeatedKey(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return found


def _check_depth(text: str, source: str, line: int | None) -> None:
    """Nesting deeper than ``limit("depth")`` is an error naming it. The brackets are
    counted in C, blocks at a time, and again outside strings only when that count is over
    the limit; a text with fewer brackets than the limit is not looked at."""
    most = limit("depth")
    if text.count("[") + text.count("{") <= most:
        return
    data = text.encode()
    if _deepest(data)[0] <= most:
        return
    import re

    bare = re.sub(rb'"(?:[^"\\]|\\.)*"', b'""', data)
    depth, offset = _deepest(bare)
    if depth > most:
        raise exceeded("depth", source, line or bare.count(b"\n", 0, offset) + 1)


def _deepest(data: bytes) -> tuple[int, int]:
    """The deepest nesting of ``[``/``{`` in ``data``, and the offset where it is reached."""
    import numpy as np

    steps = np.zeros(256, np.int8)
    steps[[ord("["), ord("{")]], steps[[ord("]"), ord("}")]] = 1, -1
    depth = deepest = at = 0
    for start in range(0, len(data), _SCAN):
        block = np.frombuffer(data, np.uint8, min(_SCAN, len(data) - start), start)
        running = np.cumsum(steps[block], dtype=np.int32) + depth
        top = int(running.argmax())
        if running[top] > deepest:
            deepest, at = int(running[top]), start + top
        depth = int(running[-1])
    return deepest, at


def parse_yaml(text: str, source: str) -> Any:
    """A YAML document read by the grammar: only :data:`~engine.io.grammar.NUMBER`s are
    numbers (each keeping its text, as JSON's), ``true``/``false`` booleans and
    ``null``/``~``/nothing null (YAML 1.2's core schema), any other plain scalar the text
    written (``010``'s digits, ``0x1F``, ``1_000``, ``1:20``, ``yes``, dates); a key twice
    in a mapping, nesting deeper than ``limit("depth")`` or aliases repeating more than
    ``limit("aliases")`` nodes is an error naming the line."""
    import yaml  # here: reading TREC files and JSON does not import it

    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, source)
        return loader.construct_document(node)
    except RecursionError:
        raise exceeded("depth", source) from None
    except _RepeatedKey as error:
        key, line = error.args
        message = f"the key {key!r} appears twice in one mapping"
        raise InputError([Problem(message, source=source, line=line)]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(error, "problem", None) or str(error)
        if "nesting depth" in problem:  # libyaml's own limit, under ours unless raised
            raise exceeded("depth", source, line) from None
        raise InputError(
            [Problem(f"malformed YAML: {problem}", source=source, line=line)]
        ) from None
    finally:
        loader.dispose()


def _check_nodes(root: Any, source: str) -> None:
    """The limits on a composed YAML document: its depth, and the nodes its aliases
    repeat (an alias repeats its node and everything under it, counted once per alias,
    so aliases of aliases, a "billion laughs", are counted as they would expand)."""
    import yaml

    most, repeats = limit("depth"), limit("aliases")
    sizes: dict[int, int] = {}  # the nodes under each collection, itself included

    def size(node: Any) -> int:
        if id(node) not in sizes:
            sizes[id(node)] = 1  # (a node that holds itself: counted once)
            children = node.value if isinstance(node, yaml.CollectionNode) else ()
            pairs = (
                (c for pair in children for c in pair)
                if isinstance(node, yaml.MappingNode)
                else children
            )
            sizes[id(node)] = 1 + sum(size(child) for child in pairs)
        return sizes[id(node)]

    seen: set[int] = set()
    stack = [(root, 1)]
    repeated = 0
    while stack:
        node, depth = stack.pop()
        if depth > most:
            raise exceeded("depth", source, node.start_mark.line + 1)
        if id(node) in seen:  # an alias: what it repeats is counted, not walked again
            repeated += size(node) if isinstance(node, yaml.CollectionNode) else 1
            if repeated > repeats:
                raise exceeded("aliases", source, node.start_mark.line + 1)
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack += [(child, depth + 1) for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            stack += [(child, depth + 1) for child in node.value]


@functools.cache
def _yaml_loader() -> Any:
    """A safe YAML loader (libyaml's parser where there is one) whose plain scalars are
    resolved as :func:`parse_yaml` says, and whose mappings refuse a key twice."""
    import re

    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc,valid-type]
        yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, Any]]]] = {}

        def construct_written_number(self, node: Any) -> Any:
            return written_number(node.value)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            keys: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                if key_node.tag == _WRITTEN:  # a key is an id: its text, 007 not 7
                    key_node.tag = "tag:yaml.org,2002:str"
                key = self.construct_object(key_node, deep=True)
                try:
                    repeated = key in keys
                except TypeError:  # an unhashable key: the constructor words it
                    continue
                if repeated:
                    raise _RepeatedKey(key, key_node.start_mark.line + 1)
                keys.add(key)
            return super().construct_mapping(node, deep=deep)

    Loader.add_constructor(_WRITTEN, Loader.construct_written_number)
    resolvers = [
        ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
        (_WRITTEN, rf"^(?:{NUMBER.pattern})$", "-+.0123456789"),
        ("tag:yaml.org,2002:merge", r"^(?:<<)$", ["<"]),
    ]
    for tag, pattern, first in resolvers:
        Loader.add_implicit_resolver(tag, re.compile(pattern), list(first))
    return Loader


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
    """Yield (line number, parsed object) for each non-blank line, each read as
    :func:`parse_json` reads it; all malformed lines are reported together."""
    problems: list[Problem] = []
    try:
        with open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield number, parse_json(line, str(path), number)
                except InputError as error:
                    problems += error.problems
    except OSError as error:
        raise _unreadable(path, error) from None
    except UnicodeDecodeError as error:
        raise InputError([Problem(f"not UTF-8 text: {error.reason}", source=str(path))]) from None
    if problems:
        raise InputError(problems, summary=f"malformed JSONL in {path}")
