"""Where what a command makes goes out, and the one careful writer of it.

A regular file is written under a temporary name beside it (beside a symlink's target)
and renamed over it, so readers see the old file or the new one, never a part; a FIFO, a
device or an open descriptor (``/dev/stdout``) is written in place, its node kept. Every
write is whole or raises: Python's buffered writers report a short write on a full disk
and drop the rest, silently, so each goes through :class:`_WholeWrites`, and a failure
(disk full, read-only, quota, file size limit) is an :class:`~engine.errors.OutputError`
naming the path, the temporary file removed. While :func:`guarding_inputs` is on (a
command of the CLI), an output that is a file the command reads is refused."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from engine.errors import OutputError

__all__ = [
    "STDOUT",
    "AtomicFile",
    "atomic_write",
    "check_stdout",
    "guarding_inputs",
    "note_inputs",
    "refuse_inputs",
]

#: How an error names standard output.
STDOUT = "standard output"

#: Paths that name an open descriptor: written in place, appended to.
_DESCRIPTORS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/")

#: The files the running command reads, by (device, inode); None when nothing guards.
_inputs: dict[tuple[int, int], str] | None = None


@contextlib.contextmanager
def guarding_inputs() -> Iterator[None]:
    """While on, :func:`note_inputs` remembers files and no output may be one of them."""
    global _inputs
    _inputs = {}
    try:
        yield
    finally:
        _inputs = None


def note_inputs(*paths: str | os.PathLike[str] | None) -> None:
    """Remember files the command reads (no-op outside :func:`guarding_inputs`)."""
    if _inputs is None:
        return
    for path in (p for p in paths if p is not None):
        with contextlib.suppress(OSError, ValueError):  # none (a name, a URI): nothing to keep
            info = os.stat(path)
            if stat.S_ISREG(info.st_mode):
                _inputs.setdefault((info.st_dev, info.st_ino), str(path))


def refuse_inputs(path: str | os.PathLike[str] | None) -> None:
    """Raise :class:`OutputError` when ``path`` is (links to) a file the command reads."""
    if not _inputs or path is None:
        return
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # none yet
        return
    found = _inputs.get((info.st_dev, info.st_ino))
    if found is not None:
        raise OutputError(path, f"it is the input {found} (the same file): write elsewhere")


class _WholeWrites(io.FileIO):
    """A file descriptor whose every write is whole or raises :class:`OutputError`
    (a closed pipe stays a :class:`BrokenPipeError`, for the CLI's quiet exit)."""

    def __init__(self, fd: int, name: str | os.PathLike[str], closefd: bool = True) -> None:
        super().__init__(fd, "wb", closefd=closefd)
        self.label = str(name)

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        try:
            while view:
                view = view[super().write(view) or 0 :]
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(self.label, error) from None
        return size

    def close(self) -> None:
        try:
            super().close()
        except OSError as error:
            raise OutputError(self.label, error) from None


class AtomicFile:
    """The output at ``path``: a regular file written under a temporary name and renamed
    over it (its symlink's target) by :meth:`commit`; a FIFO, a device or ``/dev/stdout``
    written in place. :meth:`abort` (or leaving a ``with`` block on an exception) removes
    the temporary file. Failures are :class:`OutputError` naming ``path``."""

    def __init__(self, path: str | os.PathLike[str], *, binary: bool = False) -> None:
        import tempfile

        self.path = Path(path)
        self._temp: str | None = None
        refuse_inputs(self.path)
        try:
            if _in_place(self.path):
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            else:
                self._target = Path(os.path.realpath(self.path))
                self._target.parent.mkdir(parents=True, exist_ok=True)
                fd, self._temp = tempfile.mkstemp(
                    prefix=f".{self._target.name}.", suffix=".tmp", dir=self._target.parent
                )
                os.chmod(fd, _mode_for(self._target))  # mkstemp makes 0600: the usual ones
        except OSError as error:
            self.abort()
            raise OutputError(self.path, error) from None
        buffered = io.BufferedWriter(_WholeWrites(fd, self.path))
        self.handle: IO[Any] = (
            buffered if binary else io.TextIOWrapper(buffered, encoding="utf-8", newline="")
        )

    def commit(self) -> None:
        try:
            self.handle.flush()
            if self._temp is not None:
                os.fsync(self.handle.fileno())
            self.handle.close()
            if self._temp is not None:
                os.replace(self._temp, self._target)
        except OSError as error:
            self.abort()
            raise OutputError(self.path, error) from None
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        handle = getattr(self, "handle", None)
        if handle is not None and not handle.closed:
            with contextlib.suppress(OSError, OutputError):
                handle.close()
        if self._temp is not None:
            Path(self._temp).unlink(missing_ok=True)

    def __enter__(self) -> IO[Any]:
        return self.handle

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``path`` whole (see :class:`AtomicFile`)."""
    with AtomicFile(path, binary=isinstance(data, bytes)) as handle:
        handle.write(data)


def check_stdout() -> None:
    """Have ``sys.stdout`` write whole or raise (the interpreter's own stream only; a
    test's capture is left as it is)."""
    if sys.stdout is None or sys.stdout is not sys.__stdout__:
        return
    stream: Any = sys.stdout
    stream.flush()
    raw = _WholeWrites(stream.fileno(), STDOUT, closefd=False)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=stream.line_buffering,
    )


def _in_place(path: Path) -> bool:
    """Whether ``path`` is written where it is: not a regular file, or an open descriptor."""
    if str(path.absolute()).startswith(_DESCRIPTORS):
        return True
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except OSError:  # none yet (or unreachable: creating it says why)
        return False


def _mode_for(target: Path) -> int:
    """The existing file's permissions, or what a plain ``open()`` would give (0666 - umask)."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
