"""Inputs in several files (shards): a directory, a glob or a list of files, on the local
disk or on any filesystem pyarrow reaches (``s3://``, ``gs://``, ``hdfs://`` natively,
any other scheme through fsspec, e.g. ``az://`` or ``memory://``).

A sharded input is its files in order: a list in the order given, a directory's files
(every level below it, names starting with ``.`` or ``_`` skipped, as Spark and Arrow
skip ``_SUCCESS`` and ``.crc`` files) and a glob's matches sorted by path. Its rows are
the rows of its files one after the other, so one file cut into shards at any lines is
the same input. A :class:`Shard` is one file, or a byte range of an uncompressed one,
named by a URI any process resolves the same way: a worker reads its shard itself.

A local directory is walked following its symbolic links, each directory entered once: a
link back up the tree (a cycle), or a second way into a directory, is refused naming the
link, and a file listed twice (a link to a file also listed, or given twice) is refused,
so each file is read once. A shard keeps the size and modification time it was listed
with, and a file whose size or time differs when it is read (it changed in between, or
while it was read) is refused, naming it, before any number is made of it.
"""

from __future__ import annotations

import fnmatch
import functools
import io
import itertools
import os
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import attrs
import pyarrow as pa

from engine.errors import InputError, MissingDependencyError, Problem
from engine.io import sniff
from engine.io.files import COMPRESSIONS

if TYPE_CHECKING:  # pyarrow's filesystems (S3, GCS, HDFS, ssl) are imported when a shard is found
    import pyarrow.fs as pafs

__all__ = [
    "Shard",
    "Spec",
    "is_sharded",
    "lines_before",
    "open_file",
    "open_stream",
    "read_lines",
    "resolve",
    "split",
    "unchanged",
]

#: A sharded input as given: a path or URI (a file, a directory, a glob), or a list of them.
Spec = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]

_MAGIC = frozenset("*?[")


@attrs.frozen
class Shard:
    """One file of a sharded input (``root``: the URI or path it was found from, which
    names its filesystem; ``path``: its path on that filesystem; ``size`` and ``mtime_ns``
    as listed, None where the filesystem does not tell), or the whole lines of its bytes
    from ``start`` to ``end`` (None: the end)."""

    root: str
    path: str
    size: int | None = None
    mtime_ns: int | None = None
    start: int = 0
    end: int | None = None

    @property
    def name(self) -> str:
        """The file as problems name it."""
        scheme = self.root.split("://", 1)[0] if "://" in self.root else ""
        return f"{scheme}://{self.path.lstrip('/')}" if scheme else self.path

    @property
    def nbytes(self) -> int:
        """The bytes it covers (0 when the file's size is unknown)."""
        return (self.end if self.end is not None else self.size or 0) - self.start

    @property
    def compressed(self) -> bool:
        return PurePosixPath(self.path).suffix.lower() in COMPRESSIONS


def is_sharded(spec: Any) -> bool:
    """Whether ``spec`` names a sharded input rather than one local file: a list of
    files, a directory, a glob or a URI."""
    if isinstance(spec, list | tuple):
        return bool(spec) and all(isinstance(item, str | os.PathLike) for item in spec)
    if not isinstance(spec, str | os.PathLike):
        return False
    text = os.fspath(spec)
    if "://" in text:
        return True
    if os.path.isdir(text):
        return True
    return not os.path.exists(text) and bool(_MAGIC & set(text))


def resolve(spec: Spec) -> tuple[Shard, ...]:
    """The files of a sharded input, in order (see the module docstring); none is an
    :class:`~engine.errors.InputError` naming what was looked for."""
    import pyarrow.fs as pafs

    items = [spec] if isinstance(spec, str | os.PathLike) else list(spec)
    found: list[Shard] = []
    for item in items:
        root = os.fspath(item)
        system, path = filesystem(root)
        if _MAGIC & set(PurePosixPath(path).name) or any(_MAGIC & set(p) for p in _parts(path)):
            infos = _glob(system, path)
        else:
            info = system.get_file_info(path)
            if info.type == pafs.FileType.Directory:
                infos = _listed(system, path)
            elif info.type == pafs.FileType.File:
                infos = [info]
            else:
                raise InputError([Problem("no such file or directory", source=root)])
        if not infos:
            raise InputError([Problem("no file matches", source=root)])
        found += [Shard(root, info.path, info.size, info.mtime_ns) for info in infos]
    if not found:
        raise InputError([Problem("an empty list of files")])
    _once(found)
    return tuple(found)


_TWICE = "a file or directory reached twice"


def _once(found: Sequence[Shard]) -> None:
    """Refuse a file listed twice (a link to a file also listed, a file given twice)."""
    first: dict[str, str] = {}
    for shard in found:
        key = os.path.realpath(shard.path) if "://" not in shard.root else shard.name
        if key in first:
            message = f"the same file as {first[key]}: each file is read once"
            raise InputError([Problem(message, source=shard.name)], summary=_TWICE)
        first[key] = shard.name


def split(shards: Sequence[Shard], size: int) -> tuple[Shard, ...]:
    """The shards with each uncompressed file of more than ``size`` bytes cut into byte
    ranges of about ``size`` (each range reads the whole lines that start in it)."""
    found = []
    for shard in shards:
        if shard.compressed or shard.size is None or shard.size <= size:
            found.append(shard)
            continue
        count = -(-shard.size // size)
        bounds = [shard.size * part // count for part in range(count + 1)]
        found += [
            attrs.evolve(shard, start=start, end=end) for start, end in itertools.pairwise(bounds)
        ]
    return tuple(found)


@functools.cache
def filesystem(root: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of a path or URI, and the path on it: pyarrow's own filesystems
    (local, S3, GCS, HDFS), else fsspec's."""
    import pyarrow.fs as pafs

    if "://" not in root:
        return pafs.LocalFileSystem(), os.path.abspath(root)
    try:
        return pafs.FileSystem.from_uri(root)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    try:
        import fsspec
    except ImportError as error:
        raise MissingDependencyError(f"reading {root}", "fsspec", error) from error
    system, path = fsspec.core.url_to_fs(root)
    return pafs.PyFileSystem(pafs.FSSpecHandler(system)), path


def _parts(path: str) -> list[str]:
    return path.split("/")


def _glob(system: pafs.FileSystem, pattern: str) -> list[pafs.FileInfo]:
    """The files whose paths match ``pattern`` segment by segment (``*`` does not cross
    ``/``), sorted."""
    parts = _parts(pattern)
    fixed = next(i for i, part in enumerate(parts) if _MAGIC & set(part))
    base = "/".join(parts[:fixed]) or "/"
    wanted = len(parts)
    return [
        info
        for info in _files(system, base, hidden=True)
        if len(found := _parts(info.path)) == wanted
        and all(fnmatch.fnmatchcase(a, b) for a, b in zip(found, parts, strict=True))
    ]


def _listed(system: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    """The files below a directory, sorted, hidden names (``.``, ``_``) skipped."""
    return _files(system, path.rstrip("/") or "/", hidden=False)


def _files(system: pafs.FileSystem, base: str, *, hidden: bool) -> list[pafs.FileInfo]:
    """The files below ``base`` (none when it is not a directory), every level, sorted by
    path; with ``hidden`` False, none below a name starting with ``.`` or ``_``."""
    import pyarrow.fs as pafs

    if isinstance(system, pafs.LocalFileSystem):
        paths = _walk(base, hidden=hidden)
        return list(system.get_file_info(paths)) if paths else []
    try:
        listed = system.get_file_info(pafs.FileSelector(base, recursive=True))
    except (FileNotFoundError, OSError):
        return []
    depth = len(_parts(base.rstrip("/")))
    return sorted(
        (
            info
            for info in listed
            if info.type == pafs.FileType.File
            and (hidden or not any(part[:1] in "._" for part in _parts(info.path)[depth:]))
        ),
        key=lambda info: info.path,
    )


def _walk(base: str, *, hidden: bool) -> list[str]:
    """The files below a local directory, sorted, its symbolic links followed and each
    directory entered once: the tree itself first, then what its links lead to, so a
    link that reaches a directory already entered (up the tree: a cycle) is found as
    such, an :class:`~engine.errors.InputError` naming it."""
    if not os.path.isdir(base):
        return []
    entered: dict[tuple[int, int], str] = {}
    files: list[str] = []
    folders: list[tuple[str, str]] = [(base, "")]  # each folder, and the last link to it
    linked: list[tuple[str, str]] = []
    while folders or linked:
        folder, link = folders.pop() if folders else linked.pop()
        found = os.stat(folder)
        key = (found.st_dev, found.st_ino)
        if key in entered:
            first = entered[key]
            how = "a cycle" if folder.startswith(first + "/") else "its files would be read twice"
            message = f"following this symbolic link reaches {first} again ({how})"
            raise InputError([Problem(message, source=link)], summary=_TWICE)
        entered[key] = folder
        try:
            entries = list(os.scandir(folder))
        except OSError as error:
            raise InputError([Problem(f"cannot list: {error.strerror}", source=folder)]) from None
        for entry in entries:
            if not hidden and entry.name[:1] in "._":
                continue
            if entry.is_dir() and entry.is_symlink():
                linked.append((entry.path, entry.path))
            elif entry.is_dir():
                folders.append((entry.path, link))
            elif entry.is_file():
                files.append(entry.path)
    return sorted(files)


# -- reading -----------------------------------------------------------------------------


def _unreadable(shard: Shard, error: Exception) -> InputError:
    reason = getattr(error, "strerror", None) or str(error)
    return InputError([Problem(f"cannot read file: {reason}", source=shard.name)])


def unchanged(shard: Shard) -> None:
    """Refuse the shard (an :class:`~engine.errors.InputError` naming its file) when its
    file's size or modification time is not what it was listed with: it changed since,
    and its numbers would be of neither version (what the filesystem does not tell is
    not compared)."""
    import pyarrow.fs as pafs

    system, _ = filesystem(shard.root)
    try:
        info = system.get_file_info(shard.path)
    except OSError as error:
        raise _unreadable(shard, error) from None
    summary = "a file changed after it was listed"
    if info.type != pafs.FileType.File:
        problem = Problem("the file is gone since it was listed", source=shard.name)
        raise InputError([problem], summary=summary)
    for what, listed, now in (
        ("size", shard.size, info.size),
        ("modification time (ns)", shard.mtime_ns, info.mtime_ns),
    ):
        if listed is not None and now is not None and listed != now:
            message = f"the file changed since it was listed: its {what} was {listed}, is {now}"
            raise InputError([Problem(message, source=shard.name)], summary=summary)


def open_file(shard: Shard) -> Any:
    """The shard's file for random access (Parquet, Arrow files), refused if it changed
    since it was listed."""
    unchanged(shard)
    system, _ = filesystem(shard.root)
    try:
        return system.open_input_file(shard.path)
    except OSError as error:
        raise _unreadable(shard, error) from None


def open_stream(shard: Shard) -> Any:
    """The shard's whole file as a pyarrow input stream, decompressed by its suffix (or,
    without one, by its first bytes); refused if it changed since it was listed."""
    unchanged(shard)
    system, _ = filesystem(shard.root)
    codec = COMPRESSIONS.get(PurePosixPath(shard.path).suffix.lower())
    try:
        if codec is None:  # compressed all the same, as its first bytes tell?
            with system.open_input_stream(shard.path, compression=None) as head:
                codec = sniff.codec(bytes(head.read(8)))
        raw = system.open_input_stream(shard.path, compression=None)
        if codec is None:
            return raw
        if codec == "xz":  # not an Arrow codec: Python's lzma behind Arrow's file interface
            import lzma

            return pa.PythonFile(lzma.open(raw), mode="r")
        return pa.CompressedInputStream(raw, codec)
    except OSError as error:
        raise _unreadable(shard, error) from None


def read_lines(shard: Shard) -> bytes:
    """The whole lines of the shard (of its byte range: those that start in it), ending
    with a line break."""
    try:
        if shard.start == 0 and shard.end is None:
            data = open_stream(shard).read()
        else:
            data = _range(shard)
    except OSError as error:
        raise _unreadable(shard, error) from None
    if data.startswith(b"\xef\xbb\xbf") and shard.start == 0:
        data = data[3:]  # a byte-order mark
    return data if not data or data.endswith(b"\n") else data + b"\n"


_READ_ON = 1 << 16  # bytes read past a range's end at a time, to its last line's end


def _range(shard: Shard) -> bytes:
    with open_file(shard) as handle:
        start = shard.start
        if start > 0:  # the line that starts before the range belongs to the one before
            handle.seek(start - 1)
            head = handle.read(1)
            start = start if head == b"\n" else -1
        end = shard.end if shard.end is not None else handle.size()
        if start < 0:
            handle.seek(shard.start)
            found = handle.read(end - shard.start)
            cut = found.find(b"\n")
            if cut < 0:  # no line starts in this range
                return b""
            data = found[cut + 1 :]
        else:
            handle.seek(start)
            data = handle.read(end - start)
        if data and not data.endswith(b"\n"):
            tail = io.BytesIO()
            while chunk := handle.read(_READ_ON):
                cut = chunk.find(b"\n")
                tail.write(chunk if cut < 0 else chunk[: cut + 1])
                if cut >= 0:
                    break
            data += tail.getvalue()
        return bytes(data)


def lines_before(shard: Shard) -> int:
    """How many lines of the file come before the shard's first line (to number the
    lines of a problem: read only when there is one)."""
    if shard.start == 0:
        return 0
    count = 0
    with open_file(shard) as handle:
        left = shard.start
        while left > 0:
            chunk = handle.read(min(left, 1 << 24))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
        handle.seek(shard.start - 1)
        if handle.read(1) != b"\n":
            count += 1  # the range starts inside a line, which belongs to the range before
    return count
