"""What the command line sets up in its process: Arrow's allocator and glibc's heaps,
pyarrow's look for pandas put off until something imports pandas, and a quick exit
(docs/scale.md)."""

from __future__ import annotations

import contextlib
import gc
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

__all__ = ["exit_with", "give_back_freed", "prepare", "return_freed_blocks"]


def prepare() -> None:
    """Set up this process for a command, before any work (again: no harm)."""
    _use_the_system_allocator()
    _one_heap()
    _defer_pandas()


def exit_with(code: int) -> NoReturn:
    """End the program with ``code``, the objects alive now left out of the garbage
    collections the interpreter makes as it shuts down: a process that ends has no cycle
    worth collecting, and those passes over every object took 35-40 ms of each command's
    exit here (60 ms to 24 ms from the command's end to the process's, deep qrels)."""
    gc.freeze()
    sys.exit(code)


def _use_the_system_allocator() -> None:
    """Arrow's buffers from the C library's allocator, unless ``ARROW_DEFAULT_MEMORY_POOL``
    names one: Arrow's default (mimalloc) keeps the pages its reader and scoring threads
    freed, 100-170 MiB more peak memory on deep qrels for no gain in time (docs/scale.md)."""
    import pyarrow as pa

    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa.set_memory_pool(pa.system_memory_pool())


def _one_heap() -> None:
    """No more malloc heaps (glibc's arenas) than the process has: glibc gives each new
    thread a heap of its own, and what one heap frees the others never reuse. Sharing
    them, what the file readers free serves the join and scoring (peak RSS of ``run``:
    deep qrels 30-60 MiB lower, a 10 M-line run about 90 MiB; no slower, and ``--stream``
    faster). ``MALLOC_ARENA_MAX`` in the environment still decides."""
    if "MALLOC_ARENA_MAX" not in os.environ:
        _mallopt(_M_ARENA_MAX, 1)


def return_freed_blocks() -> None:
    """Have glibc give every freed block of 8 MiB or more (a stream's read blocks, and the
    like) back to the system at once, as ``MALLOC_MMAP_THRESHOLD_=8388608`` would: by
    default it keeps them for reuse, its heap fragments, and a stream of millions of
    queries grows slowly. Smaller blocks, a chunk's arrays among them, are reused: giving
    back every block of 128 KiB or more made each of them a fresh mapping, twice as slow
    (docs/scale.md)."""
    _mallopt(_M_MMAP_THRESHOLD, 8 << 20)


def give_back_freed() -> None:
    """Give the system the pages of every block freed so far (glibc's ``malloc_trim``):
    glibc keeps what scoring freed inside its heap, and what is laid out after it (the
    results' rows, CIs) would come on top (peak RSS of ``run`` on deep qrels, 16
    alternated runs: 227 -> 223 MiB median; a few ms)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _mallopt(option: int, value: int) -> None:
    """glibc's ``mallopt``; nothing to do with another C library."""
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(option, value)


_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8  # glibc's malloc.h


def _defer_pandas() -> None:
    """pyarrow imports pandas (0.2-0.35 s and 35 MiB of a fresh process) at its first
    conversion of a list or numpy array, only to ask whether the input is a pandas object;
    before pandas is imported, none can be. So while pandas is not imported, pyarrow is
    told it is absent, and the moment something imports it (a plugin, ``to_pandas``),
    pyarrow is told again: every conversion after that treats pandas objects as pyarrow
    does by default. Nothing to do once pandas is imported, or while it is watched for."""
    if "pandas" in sys.modules or any(isinstance(f, _PandasWatch) for f in sys.meta_path):
        return
    import pyarrow as pa

    watch = _PandasWatch()
    sys.meta_path.insert(0, watch)
    try:
        pa.array([0])  # pyarrow looks for pandas now, once, and finds none
    finally:
        watch.blocking = False


class _PandasWatch(importlib.abc.MetaPathFinder):
    """Refuses ``import pandas`` while :attr:`blocking`; afterwards finds pandas as the
    other finders do, and once it has been executed, has pyarrow look for it again."""

    blocking = True

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "pandas":
            return None
        if self.blocking:
            raise ModuleNotFoundError("pandas is not looked for yet", name=name)
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = None if spec is None else spec.loader
        if loader is not None:
            execute = loader.exec_module

            def exec_module(module: ModuleType) -> None:
                execute(module)
                _tell_pyarrow()

            loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _tell_pyarrow() -> None:
    """pyarrow's integration with pandas, now that pandas is imported: a conversion to
    pandas has pyarrow import it again (pyarrow's own check of its version included)."""
    import pyarrow as pa

    with contextlib.suppress(ImportError):  # a pandas pyarrow refuses: as it would have
        pa.array([0]).to_pandas()
