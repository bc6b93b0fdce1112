"""Work spread over the machine's cores: threads, for work that releases the GIL (numpy,
Arrow), with results in the items' order.

While slotwise's threads run, BLAS (numpy's ``@``) runs each call on its calling thread:
a BLAS that starts a thread per core for each call of each of slotwise's threads would
put several threads on every core, and they wait on each other (the bootstrap took three
times as long so on two cores). A BLAS that splits a product over threads may also round
it differently (OpenBLAS on AMD EPYC: a few units in the last place), so work on one
thread keeps BLAS to one thread too."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from threadpoolctl import ThreadpoolController

T = TypeVar("T")
R = TypeVar("R")


_LIMIT: list[int] = []  # the CPUs of the task this process runs (see :func:`limited`)


def available() -> int:
    """How many CPUs this process may run on: its affinity where the OS keeps one (a
    container or ``taskset`` may allow fewer than the machine has), else every CPU; at
    most the CPUs of the task it runs (:func:`limited`)."""
    if hasattr(os, "sched_getaffinity"):
        found = len(os.sched_getaffinity(0))
    else:
        found = os.cpu_count() or 1
    return min(found, *_LIMIT) if _LIMIT else found


@contextlib.contextmanager
def limited(cpus: int) -> Iterator[None]:
    """Work on at most ``cpus`` CPUs meanwhile, slotwise's threads and Arrow's (a Ray
    task given one CPU on a node of many does not start a thread per CPU of the node)."""
    import pyarrow

    before = pyarrow.cpu_count()
    _LIMIT.append(max(1, cpus))
    pyarrow.set_cpu_count(available())
    try:
        yield
    finally:
        _LIMIT.pop()
        pyarrow.set_cpu_count(before)


def one_blas_thread() -> Any:
    """A context in which BLAS calls run on their calling thread alone (the libraries are
    found once: looking them up took 1 ms a call)."""
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


_CONTROLLER: list[ThreadpoolController] = []  # the BLAS libraries loaded, found once


def on_cores(work: Callable[[T], R], items: Sequence[T], name: str = "slotwise") -> Iterator[R]:
    """``work`` of each item, in order, computed on a thread per core when there are
    several items (one thread: in this one). BLAS runs on one thread either way, so a
    matrix product gives the same bits however many cores there are."""
    workers = min(available(), len(items))
    with one_blas_thread():
        if workers < 2:
            yield from map(work, items)
            return
        with ThreadPoolExecutor(workers, thread_name_prefix=name) as pool:
            yield from pool.map(work, items)
