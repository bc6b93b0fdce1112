"""Where what a command makes goes out: files written under a temporary name and renamed
over the target, so readers see the old file or the new one, never a part."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

__all__ = ["AtomicFile", "atomic_write"]


class AtomicFile:
    """A file written under a temporary name beside ``path`` and renamed over it by
    :meth:`commit`, so readers see the old file or the new one, never a part;
    :meth:`abort` (or leaving a ``with`` block on an exception) removes the partial file."""

    def __init__(self, path: str | os.PathLike[str], *, binary: bool = False) -> None:
        import tempfile

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self._temp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        os.chmod(self._temp, _mode_for(self.path))  # mkstemp makes 0600: keep the usual ones
        self.handle: IO[Any] = (
            os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
        )

    def commit(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self._temp, self.path)

    def abort(self) -> None:
        if not self.handle.closed:
            self.handle.close()
        Path(self._temp).unlink(missing_ok=True)

    def __enter__(self) -> IO[Any]:
        return self.handle

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :class:`AtomicFile`)."""
    with AtomicFile(path, binary=isinstance(data, bytes)) as handle:
        handle.write(data)


def _mode_for(target: Path) -> int:
    """The existing file's permissions, or what a plain ``open()`` would give (0666 - umask)."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
