"""Columnar I/O: long-format Parquet/Arrow labels and runs load like any dataset and
outputs; per-sample results export to a DataFrame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine
from engine import columnar
from engine.errors import InputError

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

LABELS = {"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "c"], "relevance": [2, 0, 1]}
RUN = {"query_id": ["q1", "q1", "q2", "q2"], "doc_id": ["b", "a", "c", "d"], "rank": [1, 2, 2, 1]}
METRICS = ["retrieval-mrr", "retrieval-ndcg-at-k@10"]


class TestColumnar:
    @pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
    def test_files_score_like_json(self, tmp_path: Path, suffix: str) -> None:
        """A Parquet/Arrow dataset and run give the same scores as the JSON equivalents."""
        columnar.write_frame(pd.DataFrame(LABELS), tmp_path / f"labels{suffix}")
        columnar.write_frame(pd.DataFrame(RUN), tmp_path / f"run{suffix}")
        eng = engine.Engine(config={})
        results = (
            eng.dataset(tmp_path / f"labels{suffix}")
            .with_metrics(METRICS)
            .evaluate(tmp_path / f"run{suffix}")
        )
        expected = (
            eng.dataset(
                samples=[
                    {"id": "q1", "expected_output": {"a": 2, "b": 0}},
                    {"id": "q2", "expected_output": {"c": 1}},
                ]
            )
            .with_metrics(METRICS)
            .evaluate({"q1": ["b", "a"], "q2": ["d", "c"]})
        )
        for label in METRICS:
            np.testing.assert_array_equal(results.scores[label], expected.scores[label])
        frame = columnar.results_to_frame(results)
        assert frame["query_id"].tolist() == ["q1", "q2"]
        assert frame["retrieval-mrr"].tolist() == [0.5, 0.5]

    def test_scores_rank_as_trec_eval(self) -> None:
        """A run with scores: score descending, ties by doc id descending."""
        frame = pd.DataFrame(
            {"query_id": ["q"] * 3, "doc_id": ["a", "c", "b"], "score": [1.0, 1.0, 2.0]}
        )
        assert columnar.run_to_outputs(frame) == {"q": ["b", "c", "a"]}

    def test_missing_columns_are_named(self) -> None:
        """A frame without the needed columns is an InputError naming them."""
        with pytest.raises(InputError, match="missing relevance"):
            columnar.labels_to_samples(pd.DataFrame({"query_id": ["q"], "doc_id": ["a"]}))

    def test_bad_labels_are_validated(self, tmp_path: Path) -> None:
        """Labels go through the sample schema: a non-finite label is reported."""
        columnar.write_frame(
            pd.DataFrame({"query_id": ["q"], "doc_id": ["a"], "relevance": [float("nan")]}),
            tmp_path / "bad.parquet",
        )
        with pytest.raises(InputError):
            engine.Engine(config={}).dataset(tmp_path / "bad.parquet")


class TestWriters:
    def test_samples_and_outputs_round_trip(self, tmp_path: Path) -> None:
        """Samples and outputs written as frames read back to the same samples and rankings."""
        samples = [
            {
                "id": "q1",
                "expected_output": {
                    "relevance": {"a": 2, "b": 0},
                    "utility": {"a": 0.5, "z": -0.25},
                },
            },
            {"id": "q2", "expected_output": {"relevance": ["c"], "utility": {"c": 1}}},
        ]
        outputs = {"q1": ["b", "a", "z"], "q2": {"retrieved": [{"id": "d"}, {"id": "c"}]}}
        labels = columnar.samples_to_frame(samples)
        assert sorted(zip(labels["query_id"], labels["doc_id"], strict=True)) == [
            ("q1", "a"),
            ("q1", "b"),
            ("q1", "z"),
            ("q2", "c"),
        ]
        row = labels[(labels["query_id"] == "q1") & (labels["doc_id"] == "z")].iloc[0]
        assert np.isnan(row["relevance"]) and row["utility"] == -0.25
        columnar.write_frame(labels, tmp_path / "labels.parquet")
        columnar.write_frame(columnar.outputs_to_frame(outputs), tmp_path / "run.parquet")
        eng = engine.Engine(config={})
        dataset = eng.dataset(tmp_path / "labels.parquet")
        assert dataset.samples[0].relevance == {"a": 2.0, "b": 0.0}
        assert dataset.samples[0].utility == {"a": 0.5, "z": -0.25}
        assert dataset.samples[1].relevance == {"c": 1.0} and dataset.samples[1].utility == {
            "c": 1.0
        }
        results = dataset.with_metrics(["retrieval-mrr", "udcg@3"]).evaluate(
            tmp_path / "run.parquet"
        )
        # q1 ranks [b, a, z]: first relevant (a, label 2) at rank 2; q2 ranks [d, c]: c at rank 2
        assert results.scores["retrieval-mrr"].tolist() == [0.5, 0.5]
        # q1 udcg: u = [nan->0, 0.5, -0.25] over m = 3 -> sigmoid(0.5/3 - (1/3)(0.25)/3)
        expected = 1 / (1 + np.exp(-(0.5 / 3 - (1 / 3) * 0.25 / 3)))
        assert results.scores["udcg@3"][0] == pytest.approx(expected, abs=1e-12)

    def test_results_to_parquet_from_the_cli(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`run --format parquet --output F` writes per-sample scores; without --output it is a usage error."""
        from engine.cli import main

        monkeypatch.chdir(tmp_path)
        columnar.write_frame(pd.DataFrame(LABELS), tmp_path / "labels.parquet")
        columnar.write_frame(pd.DataFrame(RUN), tmp_path / "run.parquet")
        argv = [
            "run",
            "labels.parquet",
            "--outputs",
            "run.parquet",
            "--metrics",
            "retrieval-mrr",
            "--format",
            "parquet",
        ]
        assert main([*argv, "--output", "scores.parquet"]) == 0
        frame = pd.read_parquet(tmp_path / "scores.parquet")
        # q1 ranks [b, a]: a (label 2) at rank 2; q2 ranks [d, c]: c at rank 2
        assert frame["query_id"].tolist() == ["q1", "q2"] and frame["retrieval-mrr"].tolist() == [
            0.5,
            0.5,
        ]
        assert main(argv) == 2
        assert not list(tmp_path.glob(".*partial"))
