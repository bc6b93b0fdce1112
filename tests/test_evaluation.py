"""Evaluate and run end to end: the seed's worked example, run(system), results files."""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import time

import jsonschema
import numpy as np
import pytest

import engine
from engine.io.schemas import load_schema, validator

SEED = [
    {
        "id": "q-1",
        "input": {"question": "What is our refund window?"},
        "expected_output": ["doc-3", "doc-9"],
    }
]
SEED_RUN = {"q-1": ["doc-7", "doc-3", "doc-1", "doc-9", "doc-2"]}


class TestSeedExample:
    def test_worked_example(self, eng):
        """Rel {doc-3, doc-9}, k=5, [doc-7, doc-3, doc-1, doc-9, doc-2]: the course's numbers."""
        results = (
            eng.dataset(samples=SEED)
            .with_metrics(
                [
                    "retrieval-hit-at-k",
                    "retrieval-recall-at-k",
                    "retrieval-mrr",
                    "retrieval-ndcg-at-k",
                ]
            )
            .evaluate(SEED_RUN)
        )
        means = {label: s["mean"] for label, s in results.summary().items()}
        assert means["retrieval-hit-at-k"] == 1.0
        assert means["retrieval-recall-at-k"] == 1.0
        assert means["retrieval-mrr"] == 0.5
        # hits at ranks 2 and 4 over the ideal ranks 1 and 2 (binary gains)
        ndcg = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
        assert means["retrieval-ndcg-at-k"] == pytest.approx(ndcg, abs=1e-12)

    def test_k_from_config_and_metadata(self, tmp_path):
        """k: the metric's k is k for every sample; left open, metadata.k beats config
        default_k."""
        eng = engine.Engine(config={"metrics": {"retrieval": {"default_k": 1}}})
        samples = [dict(SEED[0]), {**SEED[0], "id": "q-2", "metadata": {"k": 2}}]
        run = {"q-1": SEED_RUN["q-1"], "q-2": SEED_RUN["q-1"]}
        results = (
            eng.dataset(samples=samples)
            .with_metrics(["retrieval-hit-at-k", "retrieval-recall-at-k@4"])
            .evaluate(run)
        )
        assert results.scores["retrieval-hit-at-k"].tolist() == [
            0.0,
            1.0,
        ]  # k=1 misses doc-3 at rank 2
        assert results.scores["retrieval-recall-at-k@4"].tolist() == [
            1.0,
            1.0,
        ]  # @4 is 4, metadata.k = 2 aside
        assert results.metrics[0].params["k"] == 1

    def test_answer_containment_details(self, eng):
        """Containment folds case and whitespace and records the matched rank."""
        samples = [{"id": "a", "expected_output": {"answers": ["thirty  days"]}}]
        outputs = {
            "a": {
                "retrieved": [
                    {"id": "x", "text": "Nope."},
                    {"id": "y", "text": "Refunds within\nThirty days."},
                ]
            }
        }
        results = (
            eng.dataset(samples=samples)
            .with_metrics(["answer-containment-at-k", "answer-containment-at-k@1"])
            .evaluate(outputs)
        )
        row = results.per_sample()[0]
        assert row["scores"] == {"answer-containment-at-k": 1.0, "answer-containment-at-k@1": 0.0}
        assert row["details"]["answer-containment-at-k"] == {"matched_rank": 2}


class TestRun:
    def test_run_calls_system_concurrently_and_keeps_outputs(self, eng):
        """run() calls the system for every sample on a pool and keeps outputs to re-score."""
        samples = [
            {"id": f"q-{i}", "input": {"n": i}, "expected_output": [f"d{i}"]} for i in range(20)
        ]
        active, peak, lock = 0, 0, threading.Lock()

        def system(question):
            nonlocal active, peak
            with lock:
                active += 1
                peak = max(peak, active)
            time.sleep(0.01)
            with lock:
                active -= 1
            return ["other", f"d{question['n']}"] if question["n"] % 2 else [f"d{question['n']}"]

        evaluation = eng.dataset(samples=samples).with_metrics(["retrieval-mrr"])
        results = evaluation.run(system, concurrency=4, progress=False)
        assert peak > 1
        assert results.scores["retrieval-mrr"].tolist() == [
            1.0 if i % 2 == 0 else 0.5 for i in range(20)
        ]
        assert results.outputs is not None and len(results.outputs) == 20
        rescored = (
            eng.dataset(samples=samples).with_metrics(["retrieval-hit-at-k@1"]).evaluate(results)
        )
        assert rescored.summary()["retrieval-hit-at-k@1"]["mean"] == 0.5

    def test_failures_are_recorded(self, eng):
        """A failing call or an invalid output becomes an error row with NA scores."""
        samples = [{"id": str(i), "input": i, "expected_output": ["d"]} for i in range(4)]

        def system(i):
            if i == 1:
                raise TimeoutError("upstream timed out")
            return {"retrieved": "d"} if i == 2 else ["d"]

        results = (
            eng.dataset(samples=samples).with_metrics(["retrieval-mrr"]).run(system, progress=False)
        )
        values = results.scores["retrieval-mrr"]
        assert values[0] == 1.0 and values[3] == 1.0 and np.isnan(values[1]) and np.isnan(values[2])
        assert results.summary()["retrieval-mrr"] == {
            "mean": 1.0,
            "n": 2,
            "na": 2,
            "errors": 2,
            "error_rate": 0.5,
            "ci": [1.0, 1.0],
        }
        assert results.diagnostics.errors["1"] == "TimeoutError: upstream timed out"
        assert results.diagnostics.errors["2"].startswith("invalid output")
        assert results.diagnostics.missing_outputs == ()
        assert results.per_sample()[1]["error"] == "TimeoutError: upstream timed out"

    def test_on_error_raise(self, eng):
        """on_error='raise' stops at the first failure with the original exception."""
        dataset = eng.dataset(samples=[{"id": "a", "input": 1}])

        def system(_):
            raise KeyError("boom")

        with pytest.raises(KeyError):
            dataset.with_metrics(["retrieval-mrr"]).run(system, on_error="raise", progress=False)


def _ranking(question: dict) -> list[str]:
    """Odd questions rank a distractor first: MRR 0.5; even ones 1."""
    n = question["n"]
    return ["other", f"d{n}"] if n % 2 else [f"d{n}"]


class TestAsyncRun:
    """``async def`` systems, awaited concurrently, with the same results as sync ones."""

    def evaluation(self, eng):
        samples = [
            {"id": f"q-{i}", "input": {"n": i}, "expected_output": [f"d{i}"]} for i in range(12)
        ]
        return eng.dataset(samples=samples).with_metrics(["retrieval-mrr"])

    def test_same_results_as_a_sync_system(self, eng):
        async def system(question):
            await asyncio.sleep(0.001)
            return _ranking(question)

        awaited = self.evaluation(eng).run(system, progress=False)
        threaded = self.evaluation(eng).run(_ranking, progress=False)
        assert awaited.per_sample() == threaded.per_sample()
        assert awaited.summary() == threaded.summary()
        assert awaited.outputs == threaded.outputs

    def test_concurrency_bounds_calls_in_flight(self, eng):
        active, peak = 0, 0

        async def system(question):
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1
            return _ranking(question)

        self.evaluation(eng).run(system, concurrency=3, progress=False)
        assert peak == 3

    def test_callable_object_with_async_call(self, eng):
        class Retriever:
            async def __call__(self, question):
                return _ranking(question)

        results = self.evaluation(eng).run(Retriever(), progress=False)
        assert results.summary()["retrieval-mrr"]["mean"] == 0.75  # (6 x 1 + 6 x 0.5) / 12

    def test_errors_are_recorded_or_raised(self, eng):
        async def system(question):
            if question["n"] == 3:
                raise TimeoutError("upstream timed out")
            return {"retrieved": "bad"} if question["n"] == 4 else _ranking(question)

        results = self.evaluation(eng).run(system, progress=False)
        assert results.diagnostics.errors["q-3"] == "TimeoutError: upstream timed out"
        assert results.diagnostics.errors["q-4"].startswith("invalid output")
        assert results.summary()["retrieval-mrr"]["na"] == 2
        with pytest.raises(TimeoutError):
            self.evaluation(eng).run(system, on_error="raise", progress=False)

    def test_arun_inside_a_running_loop(self, eng):
        """In a running loop (a notebook, a web server): ``await arun``, for async and
        plain systems alike; ``run`` says to use it."""

        async def system(question):
            return _ranking(question)

        async def main():
            evaluation = self.evaluation(eng)
            awaited = await evaluation.arun(system, progress=False)
            threaded = await evaluation.arun(_ranking, progress=False)
            with pytest.raises(RuntimeError, match=r"await evaluation\.arun"):
                evaluation.run(system, progress=False)
            return awaited, threaded

        awaited, threaded = asyncio.run(main())
        assert awaited.per_sample() == threaded.per_sample()
        assert awaited.summary()["retrieval-mrr"]["mean"] == 0.75


class TestResults:
    def _results(self, eng):
        samples = [
            *SEED,
            {"id": "q-2", "expected_output": []},
            {"id": "q-3", "expected_output": ["a"]},
        ]
        return (
            eng.dataset(samples=samples, name="seed")
            .with_metrics(["retrieval-mrr", "retrieval-ndcg-at-k@10"])
            .evaluate({"q-1": SEED_RUN["q-1"], "q-2": ["a"]}, missing="empty")
        )

    def test_json_conforms_to_schema(self, eng, tmp_path):
        """to_json writes a document valid against results.schema.json."""
        path = tmp_path / "out" / "results.json"
        self._results(eng).to_json(path)
        document = json.loads(path.read_text())
        validator("results").validate(document)
        assert document["schema"] == "slotwise.results/v1"
        assert document["dataset"]["name"] == "seed" and document["dataset"]["samples"] == 3
        assert document["diagnostics"]["no_relevant"] == ["q-2"]
        assert document["diagnostics"]["missing_outputs"] == ["q-3"]
        assert document["summary"]["retrieval-mrr"]["missing_outputs"] == 1
        assert document["provenance"]["missing_outputs"] == "empty"
        assert document["metrics"][1]["params"] == {
            "k": 10,
            "gain": "linear",
            "gains": None,
            "levels": "labels",
            "judged_only": False,
        }
        assert document["metrics"][1]["distribution"] == "slotwise"
        assert document["samples"][0]["scores"]["retrieval-mrr"] == 0.5
        assert list(tmp_path.joinpath("out").iterdir()) == [path]  # no temporary file left behind

    def test_na_is_null(self, eng):
        """NA values are JSON null, counted in na, and excluded from the mean."""
        import attrs

        @attrs.frozen
        class OddNA(engine.MetricBase):
            """NA for every other sample."""

            alias = "odd-na-test"

            def score(self, batch):
                return np.where(
                    np.arange(len(batch)) % 2 == 1, np.nan, np.arange(len(batch), dtype=float)
                )

        eng.register_metric(OddNA)
        samples = [{"id": str(i)} for i in range(5)]
        document = json.loads(
            eng.dataset(samples=samples)
            .with_metrics(["odd-na-test"])
            .evaluate({str(i): [] for i in range(5)})
            .to_json()
        )
        assert [s["scores"]["odd-na-test"] for s in document["samples"]] == [
            0.0,
            None,
            2.0,
            None,
            4.0,
        ]
        assert document["summary"]["odd-na-test"] == {
            "mean": 2.0,
            "n": 3,
            "na": 2,
            "errors": 0,  # NA, but nothing failed
            "error_rate": 0.0,
            "ci": [0.0, 4.0],  # bootstrap of the non-NA values 0, 2, 4
        }

    def test_csv(self, eng):
        """to_csv has one row per sample and an empty cell for NA."""
        text = self._results(eng).to_csv()
        lines = text.splitlines()
        assert lines[0] == "id,retrieval-mrr,retrieval-ndcg-at-k@10"
        assert lines[1].startswith("q-1,0.5,")
        assert len(lines) == 4

    def test_schema_is_valid_json_schema(self):
        """Every shipped schema is itself a valid JSON Schema 2020-12 document."""
        for name in ("sample", "dataset", "outputs", "results", "config"):
            jsonschema.Draft202012Validator.check_schema(load_schema(name))


class TestScoreFailures:
    def test_plugin_raising_in_score_is_named(self, eng):
        """A metric that raises inside score() is that metric's failure, named with its
        label and distribution: its values NA with the reason, the others' returned."""
        import attrs

        @attrs.frozen
        class Exploding(engine.MetricBase):
            """Raises."""

            alias = "exploding-test"

            def score(self, batch):
                raise ZeroDivisionError("oops")

        eng.register_metric(Exploding)
        results = (
            eng.dataset(samples=SEED)
            .with_metrics(["exploding-test", "retrieval-mrr"])
            .evaluate(SEED_RUN)
        )
        reason = results.diagnostics.metric_errors["exploding-test"]
        assert re.search(
            r"'exploding-test' \(distribution <in-process>\).*ZeroDivisionError: oops", reason
        )
        summary = results.summary()
        assert summary["exploding-test"]["mean"] is None
        assert summary["exploding-test"]["error"] == reason
        assert summary["exploding-test"]["errors"] == len(SEED)
        assert np.isnan(results.values("exploding-test")).all()
        assert (
            summary["retrieval-mrr"]["n"] == len(SEED) and summary["retrieval-mrr"]["errors"] == 0
        )
        assert results.failed

    def test_wrong_shape_is_rejected(self, eng):
        """A metric returning the wrong shape is an error, not a silently wrong number."""
        import attrs

        @attrs.frozen
        class Short(engine.MetricBase):
            """Wrong shape."""

            alias = "short-test"

            def score(self, batch):
                return np.zeros(len(batch) + 1)

        eng.register_metric(Short)
        results = eng.dataset(samples=SEED).with_metrics(["short-test"]).evaluate(SEED_RUN)
        assert "expected one float per sample" in results.diagnostics.metric_errors["short-test"]
        assert results.summary()["short-test"]["mean"] is None


class TestReports:
    def test_metric_report_reaches_results_and_json(self, eng):
        """A metric's summarize() output is kept per label and written to the JSON."""
        import attrs

        @attrs.frozen
        class Counted(engine.MetricBase):
            """Counts positive values."""

            alias = "counted-test"

            def score(self, batch):
                return batch.lengths.astype(float)

            def summarize(self, batch, values):
                return {"positive": int((values > 0).sum()), "ids": batch.sample_ids}

        eng.register_metric(Counted)
        samples = [{"id": "a"}, {"id": "b"}]
        results = (
            eng.dataset(samples=samples)
            .with_metrics(["counted-test"])
            .evaluate({"a": ["x", "y"], "b": []})
        )
        assert results.reports == {"counted-test": {"positive": 1, "ids": ["a", "b"]}}
        document = json.loads(results.to_json())
        validator("results").validate(document)
        assert document["reports"]["counted-test"]["positive"] == 1


def test_atomic_write_keeps_usual_permissions(tmp_path):
    """Results files get the umask's permissions (not mkstemp's 0600), or keep the old file's."""
    import os
    import stat

    from engine.io.writer import atomic_write

    old_umask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.json"
        atomic_write(fresh, "{}")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
        kept = tmp_path / "kept.json"
        kept.write_text("old")
        kept.chmod(0o640)
        atomic_write(kept, "new")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "new"
    finally:
        os.umask(old_umask)
