"""slotwise's threads: results in order, and BLAS kept to the calling thread while they
run (else each of them starts a BLAS thread per core and the cores are oversubscribed)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from engine import cores
from engine.evaluation.executors import ThreadExecutor


def _blas_threads(_: object) -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def _allow(monkeypatch: pytest.MonkeyPatch, cpus: int) -> None:
    """Let this process run on ``cpus`` CPUs, as ``taskset`` or a container would."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(cpus)), raising=False)


def test_the_cores_are_those_the_process_may_use(monkeypatch) -> None:
    """A process allowed fewer CPUs than the machine has (taskset, a container's cpuset)
    starts a thread per CPU it may use, not per CPU of the machine."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    _allow(monkeypatch, 3)
    assert cores.available() == 3
    assert ThreadExecutor().workers == 3
    threads = set(cores.on_cores(lambda _: threading.current_thread().name, list(range(40))))
    assert 1 <= len(threads) <= 3
    _allow(monkeypatch, 1)
    assert set(cores.on_cores(lambda _: threading.current_thread(), [0, 1])) == {
        threading.current_thread()
    }


@pytest.fixture
def blas() -> list[int]:
    found = _blas_threads(None)
    if not found:
        pytest.skip("numpy has no BLAS that threadpoolctl sees")
    return found


def test_on_cores_keeps_order_and_blas_on_its_thread(monkeypatch, blas) -> None:
    _allow(monkeypatch, 2)
    assert list(cores.on_cores(lambda x: x * x, list(range(50)))) == [x * x for x in range(50)]
    inside = list(cores.on_cores(_blas_threads, [0, 1, 2]))
    assert inside == [[1] * len(blas)] * 3
    assert _blas_threads(None) == blas  # as it was, once the threads are done


def test_thread_executor_keeps_blas_on_its_thread(blas) -> None:
    inside = list(ThreadExecutor(workers=2).map(_blas_threads, [0, 1, 2]))
    assert inside == [[1] * len(blas)] * 3
    assert _blas_threads(None) == blas


@pytest.mark.parametrize("cpus", [1, 2])
def test_bootstrap_is_the_same_whatever_the_threads(monkeypatch, blas, cpus) -> None:
    """The bootstrap's intervals are the same, bit for bit, on one core or several and
    whatever BLAS threads the caller allows: its matrix products run on one BLAS thread
    (a product split over BLAS threads can round differently: OpenBLAS on AMD EPYC
    changes a few units in the last place)."""
    from threadpoolctl import threadpool_limits

    from engine.evaluation.statistics import BLOCK, Bootstrap

    rng = np.random.default_rng(3)
    values = rng.random((5 * BLOCK + 7, 4))  # blocks, and a partial one for intervals()

    def intervals(workers: int, blas_threads: int) -> tuple[bytes, list]:  # type: ignore[type-arg]
        _allow(monkeypatch, workers)
        bootstrap = Bootstrap(4)
        with threadpool_limits(blas_threads, user_api="blas"):
            bootstrap.add(values[:BLOCK])  # one block: on the calling thread
            bootstrap.add(values[BLOCK:])
            return bootstrap._sums.tobytes(), bootstrap.intervals()

    alone = intervals(1, 1)
    assert intervals(cpus, 4) == alone
    assert intervals(cpus, 1) == alone
