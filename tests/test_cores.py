"""slotwise's threads: results in order, and BLAS kept to the calling thread while they
run (else each of them starts a BLAS thread per core and the cores are oversubscribed)."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from engine import cores
from engine.evaluation.executors import ThreadExecutor


def _blas_threads(_: object) -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@pytest.fixture
def blas() -> list[int]:
    found = _blas_threads(None)
    if not found:
        pytest.skip("numpy has no BLAS that threadpoolctl sees")
    return found


def test_on_cores_keeps_order_and_blas_on_its_thread(monkeypatch, blas) -> None:
    monkeypatch.setattr(cores.os, "cpu_count", lambda: 2)
    assert list(cores.on_cores(lambda x: x * x, list(range(50)))) == [x * x for x in range(50)]
    inside = list(cores.on_cores(_blas_threads, [0, 1, 2]))
    assert inside == [[1] * len(blas)] * 3
    assert _blas_threads(None) == blas  # as it was, once the threads are done


def test_thread_executor_keeps_blas_on_its_thread(blas) -> None:
    inside = list(ThreadExecutor(workers=2).map(_blas_threads, [0, 1, 2]))
    assert inside == [[1] * len(blas)] * 3
    assert _blas_threads(None) == blas


def test_bootstrap_sums_are_blas_thread_independent() -> None:
    """The bootstrap's weighted sums (a matrix product) are the same, bit for bit, with
    one BLAS thread as with several: each sum is one dot product either way."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(3)
    weights = rng.integers(0, 6, size=(1000, 1024)).astype(np.float64)
    values = rng.random((1024, 10))
    with threadpool_limits(1, user_api="blas"):
        alone = weights @ values
    with threadpool_limits(4, user_api="blas"):
        several = weights @ values
    np.testing.assert_array_equal(alone.view(np.int64), several.view(np.int64))
