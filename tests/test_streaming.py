"""Chunked and streamed evaluation give the in-memory path's numbers and documents, bit for
bit (confidence intervals included)."""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import engine
from engine import StreamingError
from engine.errors import InputError, MetricRequirementError
from engine.evaluation.metric import MetricBase
from engine.evaluation.statistics import Tally, exact_parts
from engine.io import sources, trec
from engine.io.frames import labels_from_dicts, run_from_dicts

METRICS = [
    "retrieval-ndcg-at-k@10",
    "retrieval-ndcg-at-k",
    "retrieval-map",
    "retrieval-mrr",
    "retrieval-err-at-k",
    "retrieval-recall-at-k@5",
]


def _data(count: int, seed: int = 1) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Samples with 1-12 graded labels and rankings of 1-30 ids (repeats included); every
    97th sample has no output and one output names no sample."""
    rng = random.Random(seed)
    samples, outputs = [], {}
    for i in range(count):
        judged = rng.sample(range(40), rng.randint(1, 12))
        top = 3 if i == count - 1 else 2  # the largest label only at the very end
        samples.append(
            {"id": f"q{i}", "expected_output": {f"d{j}": rng.randint(0, top) for j in judged}}
        )
        if i % 97:
            outputs[f"q{i}"] = [f"d{j}" for j in rng.choices(range(40), k=rng.randint(1, 30))]
    outputs["not-a-sample"] = ["d1"]
    return samples, outputs


def _write_jsonl(directory: Path, samples: list[Any], outputs: dict[str, Any]) -> tuple[Path, Path]:
    dataset, run = directory / "dataset.jsonl", directory / "outputs.jsonl"
    dataset.write_text("".join(json.dumps(s) + "\n" for s in samples))
    run.write_text(
        "".join(json.dumps({"id": k, "actual_output": v}) + "\n" for k, v in outputs.items())
    )
    return dataset, run


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.int64)


class TestExactParts:
    @pytest.mark.parametrize("seed", range(5))
    def test_parts_sum_to_fsum(self, seed: int) -> None:
        """The parts of any values sum (fsum) to the values' fsum, however they are split."""
        rng = np.random.default_rng(seed)
        values = (rng.random(5000) ** 7 * rng.choice([1e-12, 1.0, 1e6], 5000)).tolist()
        expected = math.fsum(values)
        assert math.fsum(exact_parts(values)) == expected
        pieces = [values[i : i + 333] for i in range(0, len(values), 333)]
        rng.shuffle(pieces)
        parts = [p for piece in pieces for p in exact_parts(piece)]
        assert math.fsum(parts) == expected
        assert math.fsum(exact_parts(parts)) == expected

    def test_tally_matches_aggregate(self) -> None:
        """Tallies added and merged in any order give MetricBase.aggregate's mean."""
        rng = np.random.default_rng(3)
        values = rng.random(10_000) / 3
        values[::11] = np.nan
        left, right = Tally(), Tally()
        for start in range(0, values.size, 640):
            (left if start % 1280 else right).add(values[start : start + 640])
        right.merge(left)
        assert right.mean == MetricBase().aggregate(values)
        assert (right.n, right.na) == (int((~np.isnan(values)).sum()), int(np.isnan(values).sum()))


class TestChunked:
    @pytest.mark.parametrize("chunk_size", [1, 100, 4096, 100_000])
    def test_identical_to_one_batch(self, eng: engine.Engine, chunk_size: int) -> None:
        """Per-sample values, aggregates and diagnostics equal the in-memory path's."""
        samples, outputs = _data(3000)
        evaluation = eng.dataset(samples=samples).with_metrics(METRICS)
        whole = evaluation.evaluate(outputs)
        chunked = evaluation.evaluate(outputs, chunk_size=chunk_size)
        for label in whole.labels:
            assert (_bits(chunked.scores[label]) == _bits(whole.scores[label])).all(), label
            assert chunked.aggregates[label] == whole.aggregates[label]
        assert chunked.diagnostics == whole.diagnostics
        assert chunked.per_sample() == whole.per_sample()

    @pytest.mark.parametrize(("cores", "size"), [(1, None), (2, 1536), (4, 1024)])
    def test_big_enough_work_is_shared_by_the_cores(
        self, monkeypatch: pytest.MonkeyPatch, cores: int, size: int | None
    ) -> None:
        """Without chunk_size, 3,000 rankings of 300 (900,000 ranked documents: three
        times the 2**18 worth splitting; 129,000 judged, under the 2**17 a chunk holds)
        make a chunk per core, at most three, of a
        multiple of 64 samples (1,500 -> 1,536; 1,000 -> 1,024); the provenance says
        so and the numbers are one chunk's."""
        monkeypatch.setattr("os.sched_getaffinity", lambda _: set(range(cores)), raising=False)
        qrels = {f"q{q}": {f"d{q}-{d}": d % 3 for d in range(0, 600, 14)} for q in range(3000)}
        run = {f"q{q}": {f"d{q}-{d}": 1.0 / (d + 1) for d in range(300)} for q in range(3000)}
        eng = engine.Engine(config={})
        results = eng.evaluate_trec(qrels, run, ["retrieval-map", "retrieval-ndcg-at-k@10"])
        assert results.provenance.get("chunk_size") == size
        whole = eng.dataset(qrels).with_metrics(["retrieval-map", "retrieval-ndcg-at-k@10"])
        one = whole.evaluate(run_from_dicts(run), chunk_size=3000)
        assert results.per_sample() == one.per_sample()
        assert results.aggregates == one.aggregates

    def test_deep_pools_are_scored_in_chunks_of_few_labels(self) -> None:
        """Without chunk_size, 600 queries of 500 judged documents (300,000 labels, more
        than twice the 2**17 a chunk holds) and 100 ranked (too few to share): three
        chunks of 200, rounded to 256; the numbers are one chunk's."""
        qrels = {f"q{q}": {f"d{q}-{d}": d % 4 for d in range(500)} for q in range(600)}
        run = {f"q{q}": {f"d{q}-{d}": 1.0 / (d + 1) for d in range(0, 300, 3)} for q in range(600)}
        metrics = ["retrieval-map", "retrieval-ndcg-at-k@10"]
        eng = engine.Engine(config={})
        results = eng.evaluate_trec(qrels, run, metrics)
        assert results.provenance.get("chunk_size") == 256
        one = eng.dataset(qrels).with_metrics(metrics).evaluate(run_from_dicts(run), chunk_size=600)
        assert results.per_sample() == one.per_sample()
        assert results.aggregates == one.aggregates

    def test_chunk_size_is_validated(self, eng: engine.Engine) -> None:
        """A chunk size that is not a positive integer is refused."""
        evaluation = eng.dataset(samples=_data(10)[0]).with_metrics(METRICS)
        with pytest.raises(ValueError, match="chunk_size"):
            evaluation.evaluate(_data(10)[1], chunk_size=0)


class TestStreamJsonl:
    @pytest.mark.parametrize("chunk_size", [64, 1000])
    def test_same_numbers_and_rows(
        self, eng: engine.Engine, tmp_path: Path, chunk_size: int
    ) -> None:
        """The streamed results document equals the in-memory one except for the CIs."""
        samples, outputs = _data(2500)
        dataset, run = _write_jsonl(tmp_path, samples, outputs)
        whole = eng.dataset(str(dataset)).with_metrics(METRICS).evaluate(run)
        streamed = eng.evaluate_stream(
            METRICS, dataset=dataset, outputs=run, chunk_size=chunk_size,
            scores=tmp_path / "scores.json",
        )  # fmt: skip
        expected = whole.to_dict()
        document = json.loads((tmp_path / "scores.json").read_text())
        assert document["summary"] == expected["summary"] == streamed.summary()
        assert list(document) == list(expected)
        for key in ("schema", "dataset", "metrics", "samples", "summary", "diagnostics"):
            assert document[key] == expected[key], key
        assert streamed.to_dict()["summary"] == expected["summary"]

    def test_csv_and_jsonl_rows(self, eng: engine.Engine, tmp_path: Path) -> None:
        """Rows written as CSV or JSONL equal the in-memory per-sample output."""
        samples, outputs = _data(700)
        dataset, run = _write_jsonl(tmp_path, samples, outputs)
        whole = eng.dataset(str(dataset)).with_metrics(METRICS).evaluate(run)
        for name in ("rows.csv", "rows.jsonl"):
            eng.evaluate_stream(METRICS, dataset=dataset, outputs=run, scores=tmp_path / name)
        assert (tmp_path / "rows.csv").read_text() == whole.to_csv()
        rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
        assert rows == whole.per_sample()

    def test_err_gets_the_dataset_wide_max_grade(self, eng: engine.Engine, tmp_path: Path) -> None:
        """ERR without max_grade uses the largest label of the whole dataset (first pass)."""
        samples, outputs = _data(500)  # label 3 only in the last sample
        dataset, run = _write_jsonl(tmp_path, samples, outputs)
        whole = eng.dataset(str(dataset)).with_metrics(["retrieval-err-at-k"]).evaluate(run)
        streamed = eng.evaluate_stream(
            ["retrieval-err-at-k"], dataset=dataset, outputs=run, chunk_size=64
        )
        assert (
            streamed.summary()["retrieval-err-at-k"]["mean"]
            == whole.aggregates["retrieval-err-at-k"]
        )

    def test_outputs_out_of_order_beyond_the_window(
        self, eng: engine.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An output far from its sample's place is an error, never a wrong number."""
        monkeypatch.setattr(sources, "_LINES_PER_BLOCK", 50)
        samples, outputs = _data(300)
        reordered = dict(reversed(list(outputs.items())))
        dataset, run = _write_jsonl(tmp_path, samples, reordered)
        with pytest.raises(StreamingError, match="sort the outputs"):
            eng.evaluate_stream(METRICS, dataset=dataset, outputs=run, chunk_size=64)
        assert not list(tmp_path.glob(".*"))  # no temporary file left behind

    def test_repeated_sample_ids_are_refused(self, eng: engine.Engine, tmp_path: Path) -> None:
        """A sample id repeated in another block of the stream is an input error."""
        samples, outputs = _data(5000)
        samples[4500]["id"] = "q3"
        dataset, run = _write_jsonl(tmp_path, samples, outputs)
        with pytest.raises(InputError, match="repeated sample ids") as caught:
            eng.evaluate_stream(METRICS, dataset=dataset, outputs=run)
        assert caught.value.problems[0].sample_id == "q3"

    def test_requirements_reported(self, eng: engine.Engine, tmp_path: Path) -> None:
        """Samples lacking what a metric needs are reported as in memory."""
        samples, outputs = _data(100)
        dataset, run = _write_jsonl(tmp_path, samples, outputs)
        with pytest.raises(MetricRequirementError):
            eng.evaluate_stream(["udcg"], dataset=dataset, outputs=run)

    def test_custom_aggregate_refused(self, eng: engine.Engine, tmp_path: Path) -> None:
        """A metric with its own aggregate() cannot be merged over chunks: a clear error."""

        @attrs.frozen
        class Median(MetricBase):
            alias = "test-median"

            def score(self, batch: Any) -> np.ndarray:
                return np.ones(len(batch))

            def aggregate(self, values: np.ndarray) -> float:
                return float(np.nanmedian(values))

        eng.register_metric(Median)
        dataset, run = _write_jsonl(tmp_path, *_data(10))
        with pytest.raises(StreamingError, match="test-median"):
            eng.evaluate_stream(["test-median"], dataset=dataset, outputs=run)


class TestStreamTrec:
    def test_same_as_evaluate_trec(self, eng: engine.Engine, tmp_path: Path) -> None:
        """TREC qrels and run streamed give evaluate_trec's aggregates."""
        samples, outputs = _data(1500)
        qrels = {s["id"]: s["expected_output"] for s in samples}
        trec.write_qrels(tmp_path / "q.qrels", labels_from_dicts(qrels))
        ranked = {k: list(dict.fromkeys(v)) for k, v in outputs.items()}
        trec.write_run(tmp_path / "r.run", sources.read_outputs(ranked))
        whole = eng.evaluate_trec(tmp_path / "q.qrels", tmp_path / "r.run", METRICS)
        streamed = eng.evaluate_stream(
            METRICS, qrels=tmp_path / "q.qrels", run=tmp_path / "r.run", chunk_size=64
        )
        assert streamed.summary() == whole.summary()
        assert streamed.dataset_hash == whole.dataset_hash

    def test_split_query_refused(
        self, eng: engine.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A query whose qrels lines fall in different blocks cannot be streamed: a clear
        error, never a wrong number."""
        monkeypatch.setattr(trec, "_BLOCK", 16)
        (tmp_path / "q.qrels").write_text("a 0 d1 1\nb 0 d2 1\na 0 d3 1\n")
        (tmp_path / "r.run").write_text("a Q0 d1 1 2 t\nb Q0 d2 1 2 t\n")
        with pytest.raises(InputError, match="repeated sample ids"):
            eng.evaluate_stream(METRICS, qrels=tmp_path / "q.qrels", run=tmp_path / "r.run")

    def test_malformed_lines_keep_their_numbers(self, eng: engine.Engine, tmp_path: Path) -> None:
        """Every malformed line is reported with its line number."""
        (tmp_path / "q.qrels").write_text("a 0 d1 1\na 0 d2 x\nb 0 d2\n")
        (tmp_path / "r.run").write_text("a Q0 d1 1 2 t\n")
        with pytest.raises(InputError) as caught:
            eng.evaluate_stream(METRICS, qrels=tmp_path / "q.qrels", run=tmp_path / "r.run")
        assert [p.line for p in caught.value.problems] == [2, 3]


class TestStreamColumnar:
    def test_parquet_same_numbers(self, eng: engine.Engine, tmp_path: Path) -> None:
        """Parquet labels and runs streamed give the in-memory aggregates."""
        pandas = pytest.importorskip("pandas")
        pytest.importorskip("pyarrow")
        samples, outputs = _data(800)
        labels = [
            (s["id"], d, g) for s in samples for d, g in s["expected_output"].items()
        ]  # fmt: skip
        ranked = [
            (q, d, r) for q, docs in outputs.items() for r, d in enumerate(dict.fromkeys(docs), 1)
        ]
        pandas.DataFrame(labels, columns=["query_id", "doc_id", "relevance"]).to_parquet(
            tmp_path / "labels.parquet"
        )
        pandas.DataFrame(ranked, columns=["query_id", "doc_id", "rank"]).to_parquet(
            tmp_path / "run.parquet"
        )
        whole = (
            eng.dataset(str(tmp_path / "labels.parquet"))
            .with_metrics(METRICS)
            .evaluate(tmp_path / "run.parquet")
        )
        streamed = eng.evaluate_stream(
            METRICS,
            dataset=tmp_path / "labels.parquet",
            outputs=tmp_path / "run.parquet",
            chunk_size=128,
        )
        assert streamed.summary() == whole.summary()


def _tiny_trec(directory: Path, queries: int) -> tuple[Path, Path]:
    """``queries`` queries with 1-3 judged and 1-3 ranked documents each."""
    qrels, run = [], []
    for i in range(queries):
        n = i % 3 + 1
        qrels.append("".join(f"q{i} 0 d{j} {(i + j) % 3}\n" for j in range(n)))
        run.append("".join(f"q{i} Q0 d{j + i % 2} {j + 1} {3 - j} t\n" for j in range(n)))
    (directory / "q.qrels").write_text("".join(qrels))
    (directory / "r.run").write_text("".join(run))
    return directory / "q.qrels", directory / "r.run"


class TestScale:
    @pytest.mark.slow
    @pytest.mark.parametrize("queries", [200_000, 2_000_000])
    def test_many_queries(self, eng: engine.Engine, tmp_path: Path, queries: int) -> None:
        """Hundreds of thousands and millions of tiny queries stream through with the
        in-memory aggregates."""
        qrels, run = _tiny_trec(tmp_path, queries)
        streamed = eng.evaluate_stream(
            ["retrieval-ndcg-at-k@10", "retrieval-map"], qrels=qrels, run=run,
            chunk_size=65536, progress=False,
        )  # fmt: skip
        assert streamed.samples == queries
        whole = eng.evaluate_trec(qrels, run, ["retrieval-ndcg-at-k@10", "retrieval-map"])
        assert streamed.summary() == whole.summary()
        assert all(stats["n"] == queries for stats in streamed.summary().values())

    @pytest.mark.slow
    def test_memory_stays_bounded(
        self, eng: engine.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Peak traced memory of a stream barely grows with the dataset (benchmarks/run.py
        measures the process's peak RSS at a million queries)."""
        metrics = ["retrieval-ndcg-at-k@10", "retrieval-map"]
        monkeypatch.setattr(sources, "_LINES_PER_BLOCK", 256)  # below both dataset sizes

        def peak(action: Any) -> int:
            tracemalloc.start()
            try:
                action()
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

        peaks = {}
        for count in (2_000, 8_000):
            directory = tmp_path / str(count)
            directory.mkdir()
            dataset, run = _write_jsonl(directory, *_data(count))
            options = {"dataset": dataset, "outputs": run, "scores": directory / "rows.jsonl"}
            peaks[count] = peak(
                lambda: eng.evaluate_stream(metrics, chunk_size=512, **options)  # noqa: B023
            )
        assert peaks[8_000] < 1.25 * peaks[2_000], peaks


def test_public_api() -> None:
    """Streaming is part of the public API: the engine's method and the default engine's."""
    assert {"evaluate_stream", "StreamingError"} <= set(engine.__all__)
    assert callable(engine.Engine.evaluate_stream)
