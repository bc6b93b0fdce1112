"""Executors: chunks scored locally, in threads or on a Ray cluster give identical results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import engine
from engine.evaluation.executors import (
    LocalExecutor,
    RayExecutor,
    ThreadExecutor,
    on_its_cpus,
    resolve_executor,
)

METRICS = ["retrieval-ndcg-at-k@10", "retrieval-map", "retrieval-err-at-k"]


def _data(count: int) -> tuple[list[dict[str, object]], dict[str, list[str]]]:
    samples = [
        {"id": f"q{i}", "expected_output": {f"d{(i * j) % 17}": j % 4 for j in range(1, i % 7 + 2)}}
        for i in range(count)
    ]
    outputs = {
        f"q{i}": [f"d{(i + j) % 17}" for j in range(i % 11 + 1)] for i in range(count) if i % 13
    }
    return samples, outputs


class TestResolve:
    @pytest.mark.parametrize("spec", [None, "local"])
    def test_local(self, spec: str | None) -> None:
        """None and 'local' are the in-process executor."""
        assert isinstance(resolve_executor(spec), LocalExecutor)

    def test_threads_by_name(self) -> None:
        """'threads' is a pool of one thread per CPU; fewer than one worker is refused."""
        executor = resolve_executor("threads")
        assert isinstance(executor, ThreadExecutor)
        assert executor.workers >= 1
        with pytest.raises(ValueError, match="at least 1"):
            ThreadExecutor(0)

    def test_ray_by_name(self) -> None:
        """'ray' is a Ray executor (Ray is imported only when it runs)."""
        assert isinstance(resolve_executor("ray"), RayExecutor)

    def test_unknown(self) -> None:
        """An unknown executor name is a clear error."""
        with pytest.raises(ValueError, match="unknown executor 'spark'"):
            resolve_executor("spark")

    def test_missing_ray_names_the_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without Ray installed the error names the install command."""
        monkeypatch.setitem(sys.modules, "ray", None)
        with pytest.raises(ImportError, match=r"pip install 'slotwise\[ray\]'"):
            list(RayExecutor().map(str, [1]))

    def test_engine_takes_an_executor_object(self) -> None:
        """Engine(executor=...) accepts any object with map(fn, tasks)."""

        class Counting(LocalExecutor):
            name = "counting"
            calls = 0

            def map(self, fn, tasks):  # type: ignore[no-untyped-def]
                Counting.calls += 1
                return super().map(fn, tasks)

        eng = engine.Engine(config={}, executor=Counting())
        samples, outputs = _data(200)
        chunked = eng.dataset(samples=samples).with_metrics(METRICS).evaluate(outputs)
        local = engine.Engine(config={}).dataset(samples=samples).with_metrics(METRICS)
        whole = local.evaluate(outputs)
        assert Counting.calls == 1
        assert chunked.aggregates == whole.aggregates


class TestThreads:
    def test_identical_to_local(self) -> None:
        """Chunks scored by 4 threads give the local executor's values, means, intervals
        and diagnostics, bit for bit, in dataset order."""
        samples, outputs = _data(3000)
        local = engine.Engine(config={}).dataset(samples=samples).with_metrics(METRICS)
        threads = engine.Engine(config={}, executor=ThreadExecutor(4)).dataset(samples=samples)
        expected = local.evaluate(outputs, chunk_size=64)
        got = threads.with_metrics(METRICS).evaluate(outputs, chunk_size=64)
        assert got.ids.equals(expected.ids)
        for label in expected.labels:
            assert (got.scores[label].view(np.int64) == expected.scores[label].view(np.int64)).all()
        assert got.summary() == expected.summary() == local.evaluate(outputs).summary()
        assert got.diagnostics == expected.diagnostics

    def test_a_failing_chunk_raises(self) -> None:
        """An exception in a worker thread reaches the caller."""

        def fail(task: int) -> int:
            raise RuntimeError(f"chunk {task}")

        with pytest.raises(RuntimeError, match="chunk 0"):
            list(ThreadExecutor(2).map(fail, range(5)))


@pytest.mark.slow
class TestRay:
    def test_in_memory_identical(self, ray_cluster: None, tmp_path: Path) -> None:
        """Partitions scored on Ray give the local executor's per-sample values and aggregates."""
        samples, outputs = _data(3000)
        local = engine.Engine(config={}).dataset(samples=samples).with_metrics(METRICS)
        remote = engine.Engine(config={}, executor="ray").dataset(samples=samples)
        expected = local.evaluate(outputs, chunk_size=256)
        got = remote.with_metrics(METRICS).evaluate(outputs, chunk_size=256)
        for label in expected.labels:
            assert (got.scores[label].view(np.int64) == expected.scores[label].view(np.int64)).all()
            assert got.aggregates[label] == expected.aggregates[label]
        whole = local.evaluate(outputs)
        assert got.aggregates == whole.aggregates
        assert got.summary() == whole.summary()  # confidence intervals too
        assert got.diagnostics == expected.diagnostics

    def test_stream_identical(self, ray_cluster: None, tmp_path: Path) -> None:
        """A streamed evaluation on Ray writes the local executor's rows and summary."""
        samples, outputs = _data(2000)
        dataset, run = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
        dataset.write_text("".join(json.dumps(s) + "\n" for s in samples))
        run.write_text(
            "".join(json.dumps({"id": k, "actual_output": v}) + "\n" for k, v in outputs.items())
        )
        results = {}
        for name in ("local", "ray"):
            results[name] = engine.Engine(config={}, executor=name).evaluate_stream(
                METRICS,
                dataset=dataset,
                outputs=run,
                chunk_size=128,
                scores=tmp_path / f"{name}.jsonl",
            )
        assert results["ray"].summary() == results["local"].summary()
        assert (tmp_path / "ray.jsonl").read_text() == (tmp_path / "local.jsonl").read_text()
        assert results["ray"].provenance["executor"] == "ray"

    def test_a_worker_scores_without_importing_pandas(self, ray_cluster: None) -> None:
        """A Ray task converts arrays as scoring does and pandas stays unimported (pyarrow's
        first conversion imports it otherwise: 0.9 s of a worker's first chunk here); once
        something imports pandas, pyarrow sees it."""
        import ray

        def converts() -> tuple[bool, int]:
            import pyarrow as pa

            pa.array(np.arange(3))
            before = "pandas" in sys.modules
            import pandas as pd

            return before, pa.array(pd.Series([1.0, float("nan")])).null_count

        pytest.importorskip("pandas")
        before, nulls = ray.get(ray.remote(on_its_cpus(converts)).remote())
        assert before is False
        assert nulls == 1  # NaN read as null: pyarrow treats the Series as pandas does
