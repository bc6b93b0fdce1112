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
