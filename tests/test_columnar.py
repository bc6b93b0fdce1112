"""Columnar I/O: long-format Parquet/Arrow labels and runs, pandas and polars frames load
like any dataset and outputs; per-sample results export to Arrow, pandas and Parquet; bad
columnar input is reported with its row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import engine
from engine.errors import InputError
from engine.io import frames, sources

pd = pytest.importorskip("pandas")

LABELS = {"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "c"], "relevance": [2, 0, 1]}
RUN = {"query_id": ["q1", "q1", "q2", "q2"], "doc_id": ["b", "a", "c", "d"], "rank": [1, 2, 2, 1]}
METRICS = ["retrieval-mrr", "retrieval-ndcg-at-k@10"]


class TestColumnar:
    @pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
    def test_files_score_like_json(self, tmp_path: Path, suffix: str) -> None:
        """A Parquet/Arrow dataset and run give the same scores as the JSON equivalents."""
        frames.write_table(pa.table(LABELS), tmp_path / f"labels{suffix}")
        frames.write_table(pa.table(RUN), tmp_path / f"run{suffix}")
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
        assert results.dataset_hash == expected.dataset_hash
        frame = results.to_pandas()
        assert frame["id"].tolist() == ["q1", "q2"]
        assert frame["retrieval-mrr"].tolist() == [0.5, 0.5]

    def test_frames_score_like_files(self) -> None:
        """pandas and polars frames are sources like files."""
        polars = pytest.importorskip("polars")
        eng = engine.Engine(config={})
        for make in (pd.DataFrame, polars.DataFrame):
            results = eng.dataset(make(LABELS)).with_metrics(METRICS).evaluate(make(RUN))
            assert results.scores["retrieval-mrr"].tolist() == [0.5, 0.5]

    def test_scores_rank_as_trec_eval(self) -> None:
        """A run with scores: score descending, ties by doc id descending."""
        frame = pd.DataFrame(
            {"query_id": ["q"] * 3, "doc_id": ["a", "c", "b"], "score": [1.0, 1.0, 2.0]}
        )
        outputs = sources.read_outputs(frame)
        assert frames.run_table(outputs)["doc_id"].to_pylist() == ["b", "c", "a"]

    def test_missing_columns_are_named(self) -> None:
        """A frame without the needed columns is an InputError naming them."""
        with pytest.raises(InputError, match="missing relevance"):
            sources.dataset_columns(pd.DataFrame({"query_id": ["q"], "doc_id": ["a"]}))
        with pytest.raises(InputError, match="missing rank"):
            sources.read_outputs(pa.table({"query_id": ["q"], "doc_id": ["a"]}))

    @pytest.mark.parametrize(
        ("table", "message", "row"),
        [
            (
                {"query_id": ["q", "q"], "doc_id": ["a", "b"], "relevance": [1.0, float("nan")]},
                "not a finite number",
                1,
            ),
            ({"query_id": ["q", "q"], "doc_id": ["a", ""], "relevance": [1, 2]}, "empty doc_id", 1),
            (
                {"query_id": ["q", ""], "doc_id": ["a", "b"], "relevance": [1, 2]},
                "empty query_id",
                1,
            ),
            (
                {"query_id": ["q", "q"], "doc_id": ["a", "a"], "relevance": [1, 2]},
                "two relevance labels",
                1,
            ),
            (
                {"query_id": ["q", "q"], "doc_id": ["a", "b"], "relevance": ["1", "high"]},
                "not a number",
                1,
            ),
        ],
    )
    def test_bad_labels_name_the_row(
        self, tmp_path: Path, table: dict, message: str, row: int
    ) -> None:  # type: ignore[type-arg]
        """Bad columnar labels are validated vectorised; every problem names its row."""
        frames.write_table(pa.table(table), tmp_path / "bad.parquet")
        with pytest.raises(InputError, match=message) as caught:
            engine.Engine(config={}).dataset(tmp_path / "bad.parquet")
        assert f"row {row}:" in str(caught.value.problems[0])
        assert caught.value.problems[0].source == str(tmp_path / "bad.parquet")

    @pytest.mark.parametrize(
        ("table", "message"),
        [
            (
                {"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": ["1.5", "x"]},
                "score is not a number",
            ),
            (
                {"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0, None]},
                "score is missing",
            ),
            (
                {"query_id": ["q", "q"], "doc_id": ["a", "b"], "rank": [1, 0]},
                "rank must be a positive integer",
            ),
        ],
    )
    def test_bad_runs_name_the_row(self, table: dict, message: str) -> None:  # type: ignore[type-arg]
        with pytest.raises(InputError, match=message) as caught:
            sources.read_outputs(pa.table(table))
        assert "row 1:" in str(caught.value.problems[0])


class TestWriters:
    def test_samples_and_outputs_round_trip(self, tmp_path: Path) -> None:
        """Samples and outputs written as tables read back to the same samples and rankings."""
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
        eng = engine.Engine(config={})
        labels = eng.dataset(samples=samples).to_arrow()
        rows = sorted(
            zip(
                labels["query_id"].to_pylist(),
                labels["doc_id"].to_pylist(),
                labels["relevance"].to_pylist(),
                labels["utility"].to_pylist(),
                strict=True,
            )
        )
        assert rows == [
            ("q1", "a", 2.0, 0.5),
            ("q1", "b", 0.0, None),
            ("q1", "z", None, -0.25),
            ("q2", "c", 1.0, 1.0),
        ]
        frames.write_table(labels, tmp_path / "labels.parquet")
        frames.write_table(
            frames.run_table(sources.read_outputs(outputs)), tmp_path / "run.parquet"
        )
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
        frames.write_table(pa.table(LABELS), tmp_path / "labels.parquet")
        frames.write_table(pa.table(RUN), tmp_path / "run.parquet")
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
        assert frame["id"].tolist() == ["q1", "q2"] and frame["retrieval-mrr"].tolist() == [
            0.5,
            0.5,
        ]
        assert main(argv) == 2
        assert not list(tmp_path.glob(".*tmp"))

    def test_bad_columnar_input_exits_2(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The CLI names the file and row of bad columnar input and exits 2."""
        from engine.cli import main

        monkeypatch.chdir(tmp_path)
        frames.write_table(pa.table(LABELS), tmp_path / "labels.parquet")
        frames.write_table(
            pa.table({"query_id": ["q1"], "doc_id": ["a"], "score": [float("nan")]}),
            tmp_path / "run.parquet",
        )
        assert (
            main(
                ["run", "labels.parquet", "--outputs", "run.parquet", "--metrics", "retrieval-mrr"]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert (
            "run.parquet" in err
            and "row 0: score is not a finite number" in err
            and "Traceback" not in err
        )
