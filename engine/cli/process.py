"""What the command line sets up in its process: Arrow's allocator and glibc's heaps,
pyarrow's look for pandas put off until something imports pandas (engine.lazy_pandas),
a stdout whose every write is checked (engine.io.writer), and a quick exit
(docs/scale.md)."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from typing import NoReturn

from engine.io.writer import check_stdout
from engine.lazy_pandas import defer_pandas

__all__ = ["exit_with", "give_back_freed", "prepare", "return_freed_blocks"]


def prepare() -> None:
    """Set up this process for a command, before any work (again: no harm)."""
    _use_the_system_allocator()
    _one_heap()
    defer_pandas()
    check_stdout()  # a full disk under `> out.json` is an error, not a file cut short


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
