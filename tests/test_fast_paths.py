"""The fast input paths give exactly what the general paths give, and hand anything they
have not fully checked to the general path (which words the problem)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine
from engine import trec
from engine.batch import Batch
from engine.errors import InputError
from engine.records import Output, Sample

METRICS = ["retrieval-ndcg-at-k@10", "retrieval-map", "retrieval-mrr", "retrieval-recall-at-k@5"]


class TestRankScored:
    def test_descending_scores_keep_their_order(self) -> None:
        """Strictly descending scores keep mapping order."""
        assert trec.rank_scored({"q": {"b": 3.0, "a": 2, "c": 1.5}}) == {"q": ["b", "a", "c"]}

    @pytest.mark.parametrize(
        "scored",
        [{"a": 1.0, "b": 2.0, "c": 0.5}, {"a": 1.0, "b": 1.0, "c": 2.0}, {"c": 1.0, "b": 1.0}],
    )
    def test_other_orders_are_ranked_as_trec_eval_ranks(self, scored: dict[str, float]) -> None:
        """Unsorted or tied scores: score descending, then doc id descending."""
        assert trec.rank_scored({"q": scored, "e": {}}) == {
            "q": trec.rank_by_score(scored.items()),
            "e": [],
        }

    @pytest.mark.parametrize(
        "run",
        [
            {"q": {"a": float("nan")}},
            {"q": {"a": True}},
            {"q": {"a": "1"}},
            {"q": {"": 1.0}},
            {"q": ["a"]},
            {1: {"a": 1.0}},
        ],
    )
    def test_bad_runs_are_input_errors(self, run: dict) -> None:  # type: ignore[type-arg]
        """Bad scores, ids or shapes are reported, never scored."""
        with pytest.raises(InputError):
            trec.rank_scored(run)


class TestBulkReaders:
    def test_bulk_and_line_readers_agree(self, tmp_path: Path) -> None:
        """Canonical files (bulk path) and the same content with tabs (line path) read alike."""
        run_lines = ["q2 Q0 d1 1 2 t", "q1 Q0 d3 1 5 t", "q2 Q0 d2 2 2 t", "q1 Q0 d4 2 9.5 t"]
        qrels_lines = ["q1 0 d3 1", "q2 0 d1 2", "q1 0 d9 0"]
        for name, lines in (("run", run_lines), ("qrels", qrels_lines)):
            (tmp_path / f"{name}.canon").write_text("\n".join(lines) + "\n")
            (tmp_path / f"{name}.tabs").write_text("\n".join(x.replace(" ", "\t") for x in lines))
        assert trec.read_run(tmp_path / "run.canon") == trec.read_run(tmp_path / "run.tabs")
        assert trec.read_run(tmp_path / "run.canon") == {"q2": ["d2", "d1"], "q1": ["d4", "d3"]}
        assert trec.read_qrels(tmp_path / "qrels.canon") == trec.read_qrels(tmp_path / "qrels.tabs")

    @pytest.mark.parametrize(
        "text", ["q1 Q0 d1 1 2\n", "q1 Q0 d1 1 2 t x\n", "q1 Q0 d1 1 x t\n", "q1 Q0 d1 1 inf t"]
    )
    def test_malformed_lines_are_still_reported(self, tmp_path: Path, text: str) -> None:
        """A malformed line makes the bulk reader step aside; the error names the line."""
        path = tmp_path / "bad.run"
        path.write_text("q0 Q0 d1 1 2 t\n" + text)
        with pytest.raises(InputError) as caught:
            trec.read_run(path)
        assert caught.value.problems[0].line == 2

    def test_extra_whitespace_is_legal(self, tmp_path: Path) -> None:
        """Two spaces or a trailing blank line: the line reader takes them, as before."""
        path = tmp_path / "spaced.run"
        path.write_text("q1  Q0 d1 1 2 t\n\n")
        assert trec.read_run(path) == {"q1": ["d1"]}

    def test_repeated_documents_are_kept_and_counted(self, tmp_path: Path) -> None:
        """A run naming a document twice keeps both lines, as before."""
        path = tmp_path / "dup.run"
        path.write_text("q1 Q0 d1 1 3 t\nq1 Q0 d1 2 2 t\n")
        assert trec.read_run(path) == {"q1": ["d1", "d1"]}


class TestEvaluateTrec:
    def test_same_results_as_the_dataset_path(self, tmp_path: Path) -> None:
        """Dicts, files and the general dataset path give identical scores."""
        rng = np.random.default_rng(3)
        qrels = {
            f"q{i}": {f"d{j}": int(rng.integers(0, 3)) for j in rng.choice(30, 5)}
            for i in range(40)
        }
        run = {
            f"q{i}": {
                f"d{j}": float(s)
                for s, j in zip(range(20, 0, -1), rng.choice(30, 20, replace=False), strict=True)
            }
            for i in range(40)
        }
        run["q0"] = {"d1": 1.0, "d2": 3.0, "d3": 1.0}  # needs sorting, with a tie
        eng = engine.Engine(config={})
        from_dicts = eng.evaluate_trec(qrels, run, METRICS)
        trec.write_qrels(tmp_path / "x.qrels", qrels)
        with (tmp_path / "x.run").open("w") as handle:
            for q, scored in run.items():
                handle.writelines(f"{q} Q0 {d} 0 {s} t\n" for d, s in scored.items())
        from_files = eng.evaluate_trec(tmp_path / "x.qrels", tmp_path / "x.run", METRICS)
        general = (
            eng.dataset(samples=trec.qrels_to_samples(qrels))
            .with_metrics(METRICS)
            .evaluate({q: trec.rank_by_score(s.items()) for q, s in run.items()})
        )
        for label in from_dicts.labels:
            np.testing.assert_array_equal(from_dicts.scores[label], general.scores[label])
            np.testing.assert_array_equal(from_files.scores[label], general.scores[label])


class TestCompile:
    def test_ragged_and_duplicate_rankings(self) -> None:
        """Rankings of unequal length and with repeats take the general layout."""
        samples = [Sample(id="a", relevance={"x": 1.0}), Sample(id="b", relevance={"y": 2.0})]
        outputs = [Output(retrieved=("x", "z", "x")), Output(retrieved=("y",))]
        batch = Batch.compile(samples, outputs)
        assert batch.doc_codes.shape == (2, 2)
        assert batch.duplicates_dropped.tolist() == [1, 0]
        assert batch.positions.tolist() == [[0, 1], [0, -1]]
        np.testing.assert_array_equal(batch.ranked_labels, [[1.0, np.nan], [2.0, np.nan]])

    def test_rectangular_rankings(self) -> None:
        """Equal-length rankings without repeats: the same arrays, without scattering."""
        samples = [Sample(id="a", relevance={"x": 1.0}), Sample(id="b", relevance={})]
        batch = Batch.compile(samples, [Output(retrieved=("x", "y")), Output(retrieved=("y", "x"))])
        assert batch.positions.tolist() == [[0, 1], [0, 1]]
        assert batch.lengths.tolist() == [2, 2]
        np.testing.assert_array_equal(batch.ranked_labels, [[1.0, np.nan], [np.nan, np.nan]])

    def test_outputs_with_item_dicts_take_the_general_path(self) -> None:
        """A list of {id, text} items is not a bare list of ids."""
        results = (
            engine.Engine(config={})
            .dataset(samples=[{"id": "a", "expected_output": ["x"]}])
            .with_metrics(["retrieval-mrr"])
            .evaluate({"a": [{"id": "y", "text": "t"}, "x"]})
        )
        assert results.scores["retrieval-mrr"].tolist() == [0.5]


class TestColumnarTrec:
    """The bulk readers go from columns to ranked lists without per-line objects; these
    check them against the line reader on awkward content, across block boundaries."""

    def _both(self, tmp_path: Path, name: str, lines: list[str]) -> tuple[Path, Path]:
        canon, tabs = tmp_path / f"{name}.canon", tmp_path / f"{name}.tabs"
        canon.write_text("\n".join(lines) + "\n")
        tabs.write_text("\n".join(x.replace(" ", "\t") for x in lines) + "\n")
        return canon, tabs

    @pytest.mark.parametrize("block", [16, 64, 1 << 25])
    def test_shuffled_tied_and_repeated_runs(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
    ) -> None:
        """Interleaved queries, tied and repeated scores, repeated documents and small
        blocks: the bulk reader ranks exactly as the line reader does."""
        monkeypatch.setattr(trec, "_BLOCK_BYTES", block)
        rng = np.random.default_rng(7)
        lines = [
            f"q{rng.integers(5)} Q0 d{rng.integers(12)} 0 {rng.integers(4) / 2} t"
            for _ in range(300)
        ]
        canon, tabs = self._both(tmp_path, "run", lines)
        assert trec._bulk_run(canon) is not None
        assert trec.read_run(canon) == trec.read_run(tabs)
        qrels = [f"q{i % 7} 0 d{i} {i % 3}" for i in range(50)]  # queries not contiguous
        canon, tabs = self._both(tmp_path, "qrels", qrels)
        assert trec._bulk_qrels(canon) is not None
        assert trec.read_qrels(canon) == trec.read_qrels(tabs)
        assert list(trec.read_qrels(canon)) == [f"q{i}" for i in range(7)]

    def test_doc_ids_tie_break_as_text(self, tmp_path: Path) -> None:
        """Tied scores: doc id descending as strings ("d9" before "d10")."""
        path = tmp_path / "tie.run"
        path.write_text("q Q0 d10 1 1 t\nq Q0 d9 2 1 t\nq Q0 d2 3 5 t\n")
        assert trec.read_run(path) == {"q": ["d2", "d9", "d10"]}

    def test_empty_files(self, tmp_path: Path) -> None:
        (tmp_path / "e").write_text("")
        assert trec.read_run(tmp_path / "e") == {} and trec.read_qrels(tmp_path / "e") == {}

    def test_qrels_judging_twice_is_reported(self, tmp_path: Path) -> None:
        path = tmp_path / "twice.qrels"
        path.write_text("q 0 a 1\nq 0 b 1\nq 0 a 0\n")
        with pytest.raises(InputError) as caught:
            trec.read_qrels(path)
        assert caught.value.problems[0].line == 3

    def test_non_ascii_ids(self, tmp_path: Path) -> None:
        """UTF-8 ids are read in bulk; Unicode whitespace is left to the line reader,
        which splits on it, as before."""
        path = tmp_path / "utf8.run"
        path.write_text("qé Q0 dö 1 2 t\nqé Q0 d™ 2 1 t\n", encoding="utf-8")
        assert trec._bulk_run(path) == trec.read_run(path) == {"qé": ["dö", "d™"]}
        path.write_text("q Q0 a\u00a0b 1 2 t\n", encoding="utf-8")
        assert trec._bulk_run(path) is None
        with pytest.raises(InputError):
            trec.read_run(path)


class TestQrelsSamples:
    def test_same_samples_and_hash_as_the_raw_path(self) -> None:
        """Samples built directly equal those parsed from raw dicts (and hash alike)."""
        from engine.dataset import content_hash, parse_samples

        for qrels in (
            {"q1": {"a": 2, "b": 0.5}, "q2": {"c": -1}},
            {"q": {"relevance": 1.0, "x": 0}},  # long form on the raw path
        ):
            direct = trec.qrels_samples(qrels)
            parsed = parse_samples((s, None) for s in trec.qrels_to_samples(qrels))
            assert direct == parsed
            assert content_hash(direct) == content_hash(parsed)

    @pytest.mark.parametrize("qrels", [{"q": {"a": float("nan")}}, {"": {"a": 1}}, {}])
    def test_invalid_qrels_are_reported(self, qrels: dict) -> None:  # type: ignore[type-arg]
        with pytest.raises(InputError):
            trec.qrels_samples(qrels)

    def test_output_objects_pass_through_load_outputs(self) -> None:
        from engine.outputs import load_outputs

        outputs = {"q": Output(retrieved=("a", "b"))}
        assert load_outputs(outputs) == outputs
