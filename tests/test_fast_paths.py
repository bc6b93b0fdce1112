"""The columnar input paths: TREC files read by pyarrow and by the line reader agree, dict
sources agree with the general outputs path, and anything the fast path has not fully
checked goes to the path that words the problem."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from conftest import qrels_of, run_of

import engine
from engine.errors import InputError
from engine.io import sources, trec
from engine.io.columns import ContentHash
from engine.io.documents import parse_samples, raw_samples
from engine.io.frames import labels_from_dicts, run_from_dicts
from engine.testing import make_batch

METRICS = ["retrieval-ndcg-at-k@10", "retrieval-map", "retrieval-mrr", "retrieval-recall-at-k@5"]


class TestScoredDicts:
    def test_descending_scores_keep_their_order(self) -> None:
        """Strictly descending scores keep mapping order."""
        assert run_of(run_from_dicts({"q": {"b": 3.0, "a": 2, "c": 1.5}})) == {"q": ["b", "a", "c"]}

    @pytest.mark.parametrize(
        ("scored", "expected"),
        [
            ({"a": 1.0, "b": 2.0, "c": 0.5}, ["b", "a", "c"]),
            ({"a": 1.0, "b": 1.0, "c": 2.0}, ["c", "b", "a"]),
            ({"c": 1.0, "b": 1.0}, ["c", "b"]),
        ],
    )
    def test_other_orders_are_ranked_as_trec_eval_ranks(
        self, scored: dict[str, float], expected: list[str]
    ) -> None:
        """Unsorted or tied scores: score descending, then doc id descending; an empty
        ranking stays empty."""
        assert run_of(run_from_dicts({"q": scored, "e": {}})) == {"q": expected, "e": []}

    @pytest.mark.parametrize(
        "run",
        [
            {"q": {"a": float("nan")}},
            {"q": {"a": True}},
            {"q": {"a": "1"}},
            {"q": {"": 1.0}},
            {1: {"a": 1.0}},
        ],
    )
    def test_bad_runs_are_input_errors(self, run: dict) -> None:  # type: ignore[type-arg]
        """Bad scores, ids or shapes are reported, never scored."""
        assert run_from_dicts(run) is None
        with pytest.raises(InputError):
            sources.read_outputs(run)


def _both(tmp_path: Path, name: str, lines: list[str]) -> tuple[Path, Path, Path]:
    """The same lines with single spaces, with tabs, and with runs of blanks."""
    canon, tabs, spaced = (tmp_path / f"{name}.{kind}" for kind in ("canon", "tabs", "spaced"))
    canon.write_text("\n".join(lines) + "\n")
    tabs.write_text("\n".join(x.replace(" ", "\t") for x in lines) + "\n")
    spaced.write_text("\n\n".join("  " + x.replace(" ", " \t ") for x in lines))
    return canon, tabs, spaced


class TestTrecReaders:
    def test_columnar_and_line_readers_agree(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Canonical files (read by pyarrow), tab-separated ones and ones with runs of
        blanks (the line reader) read alike."""
        rng = np.random.default_rng(7)
        pairs = rng.choice(5 * 100, size=300, replace=False)  # each document once per query
        lines = [f"q{p // 100} Q0 d{p % 100} 0 {rng.integers(4) / 2} t" for p in pairs]
        qrels = [f"q{i % 7} 0 d{i} {i % 3}" for i in range(50)]  # queries not contiguous
        runs = [run_of(trec.read_run(p)) for p in _both(tmp_path, "run", lines)]
        assert runs[0] == runs[1] == runs[2]
        judged = [qrels_of(trec.read_qrels(p)) for p in _both(tmp_path, "qrels", qrels)]
        assert judged[0] == judged[1] == judged[2]
        assert list(judged[0]) == [f"q{i}" for i in range(7)]
        canon = tmp_path / "run.canon"
        monkeypatch.setattr(trec, "_by_line", None)  # the canonical file never needs it
        assert run_of(trec.read_run(canon)) == runs[0]

    def test_run_order(self, tmp_path: Path) -> None:
        """Interleaved queries keep their first appearance; the rank column is ignored."""
        path = tmp_path / "r"
        path.write_text("q2 Q0 d1 1 2 t\nq1 Q0 d3 1 5 t\nq2 Q0 d2 2 2 t\nq1 Q0 d4 2 9.5 t\n")
        assert run_of(trec.read_run(path)) == {"q2": ["d2", "d1"], "q1": ["d4", "d3"]}

    @pytest.mark.parametrize(
        "text", ["q1 Q0 d1 1 2\n", "q1 Q0 d1\n", "q1 Q0 d1 1 x t\n", "q1 Q0 d1 1 inf t"]
    )
    def test_malformed_lines_are_reported(self, tmp_path: Path, text: str) -> None:
        """A malformed line makes the columnar reader step aside; the error names the line."""
        path = tmp_path / "bad.run"
        path.write_text("q0 Q0 d1 1 2 t\n" + text)
        with pytest.raises(InputError) as caught:
            trec.read_run(path)
        assert caught.value.problems[0].line == 2

    def test_repeated_documents_are_errors_naming_the_lines(self, tmp_path: Path) -> None:
        """A canonical run naming a document twice for a query: the columnar reader finds
        the repeat, the line reader names both lines (trec_eval refuses such a run)."""
        path = tmp_path / "dup.run"
        path.write_text("q1 Q0 d1 1 3 t\nq2 Q0 d1 1 3 t\nq1 Q0 d1 2 2 t\n")
        with pytest.raises(InputError) as caught:
            trec.read_run(path)
        (problem,) = caught.value.problems
        assert (problem.line, problem.sample_id) == (3, "q1")
        assert "the first at line 1" in problem.message

    def test_doc_ids_tie_break_as_text(self, tmp_path: Path) -> None:
        """Tied scores: doc id descending as strings ("d9" before "d10")."""
        path = tmp_path / "tie.run"
        path.write_text("q Q0 d10 1 1 t\nq Q0 d9 2 1 t\nq Q0 d2 3 5 t\n")
        assert run_of(trec.read_run(path)) == {"q": ["d2", "d9", "d10"]}

    def test_empty_files(self, tmp_path: Path) -> None:
        """A file without a query scores nothing: refused, naming the file (as trec_eval)."""
        (tmp_path / "e").write_text("")
        for read, kind in ((trec.read_run, "run"), (trec.read_qrels, "qrels")):
            with pytest.raises(InputError, match=f"e: no {kind} line: the file holds no query"):
                read(tmp_path / "e")

    def test_qrels_judging_twice_is_reported(self, tmp_path: Path) -> None:
        path = tmp_path / "twice.qrels"
        path.write_text("q 0 a 1\nq 0 b 1\nq 0 a 0\n")
        with pytest.raises(InputError) as caught:
            trec.read_qrels(path)
        assert caught.value.problems[0].line == 3

    def test_non_ascii_ids(self, tmp_path: Path) -> None:
        """UTF-8 ids are read as they are; only ASCII whitespace separates fields, as in
        trec_eval (a no-break space belongs to the id)."""
        path = tmp_path / "utf8.run"
        path.write_text("qé Q0 dö 1 2 t\nqé Q0 d™ 2 1 t\n", encoding="utf-8")
        assert run_of(trec.read_run(path)) == {"qé": ["dö", "d™"]}
        path.write_text("q Q0 a\u00a0b 1 2 t\nq Q0 c  2 1 t\n", encoding="utf-8")
        assert run_of(trec.read_run(path)) == {"q": ["a\u00a0b", "c"]}

    def test_invalid_utf8_is_an_input_error(self, tmp_path: Path) -> None:
        path = tmp_path / "latin1.run"
        path.write_bytes("q Q0 d\xe9 1 2 t\n".encode("latin-1"))
        with pytest.raises(InputError, match="not UTF-8"):
            trec.read_run(path)

    @pytest.mark.parametrize("block", [64, 200, 1 << 20])
    def test_streamed_blocks_never_split_a_query(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
    ) -> None:
        """Read in small blocks, a grouped run gives the same queries as read whole."""
        monkeypatch.setattr(trec, "_BLOCK", block)
        lines = [f"q{q} Q0 d{d} {d} {20 - d} t" for q in range(30) for d in range(q % 7 + 1)]
        path = tmp_path / "grouped.run"
        path.write_text("\n".join(lines) + "\n")
        streamed: dict[str, list[str]] = {}
        for part in trec.stream_run(path):
            found = run_of(part)
            assert not set(found) & set(streamed)
            streamed.update(found)
        assert streamed == run_of(trec.read_run(path))

    def test_sparse_qrels_stream_in_blocks_of_queries(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A block holds about ``_BLOCK_QUERIES`` queries however short their lines are:
        after a first read, the read size follows the bytes a query takes."""
        monkeypatch.setattr(trec, "_BLOCK_QUERIES", 10)
        monkeypatch.setattr(trec, "_FIRST_READ", 400)
        path = tmp_path / "sparse.qrels"
        text = "".join(f"{1000 + q} 0 {q * 7} 1\n" for q in range(500))  # a line a query
        path.write_text(text)
        sizes = [len(block) for block in trec.stream_qrels(path)]
        assert sum(sizes) == 500
        assert sizes[0] == text[:400].count("\n") - 1  # the last query may go on: held back
        assert all(9 <= size <= 11 for size in sizes[1:-1])  # 10 queries' bytes, give or take a cut


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
        trec.write_qrels(tmp_path / "x.qrels", labels_from_dicts(qrels))
        with (tmp_path / "x.run").open("w") as handle:
            for q, scored in run.items():
                handle.writelines(f"{q} Q0 {d} 0 {s} t\n" for d, s in scored.items())
        from_files = eng.evaluate_trec(tmp_path / "x.qrels", tmp_path / "x.run", METRICS)
        general = (
            eng.dataset(samples=raw_samples(labels_from_dicts(qrels)))
            .with_metrics(METRICS)
            .evaluate(run_of(run_from_dicts(run)))
        )
        assert run_of(run_from_dicts(run))["q0"] == ["d2", "d3", "d1"]
        for label in from_dicts.labels:
            np.testing.assert_array_equal(from_dicts.scores[label], general.scores[label])
            np.testing.assert_array_equal(from_files.scores[label], general.scores[label])
        assert from_dicts.dataset_hash == from_files.dataset_hash == general.dataset_hash


class TestPeerObjects:
    @pytest.mark.slow
    def test_ranx_qrels_and_run_give_pytrec_evals_numbers(self) -> None:
        """ranx's Qrels and Run are read as the dicts they hold (ties included)."""
        ranx = pytest.importorskip("ranx")
        import pytrec_eval

        rng = np.random.default_rng(3)
        qrels = {
            f"q{i}": {f"d{j}": int(rng.integers(0, 3)) for j in range(0, 30, 3)} for i in range(20)
        }
        run = {f"q{i}": {f"d{j}": float(rng.integers(0, 5)) for j in range(25)} for i in range(20)}
        results = engine.Engine(config={}).evaluate_trec(
            ranx.Qrels(qrels), ranx.Run(run), ["retrieval-ndcg-at-k@10", "retrieval-map"]
        )
        expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map"}).evaluate(run)
        for row in results.per_sample():
            assert row["scores"]["retrieval-ndcg-at-k@10"] == pytest.approx(
                expected[row["id"]]["ndcg_cut_10"], abs=1e-12
            )
            assert row["scores"]["retrieval-map"] == pytest.approx(
                expected[row["id"]]["map"], abs=1e-12
            )


class TestCompile:
    def test_ragged_and_duplicate_rankings(self) -> None:
        """Rankings of unequal length and with repeats take the general layout; the width
        is the longest ranking as given (repeats included), which a streamed first pass
        can count without deduplicating."""
        samples = [
            {"id": "a", "expected_output": {"x": 1}},
            {"id": "b", "expected_output": {"y": 2}},
        ]
        batch = make_batch(samples, {"a": ["x", "z", "x"], "b": ["y"]})
        assert batch.doc_codes.shape == (2, 3)
        assert batch.lengths.tolist() == [2, 1]
        assert batch.duplicates_dropped.tolist() == [1, 0]
        assert batch.positions.tolist() == [[0, 1, -1], [0, -1, -1]]
        expected = [[1.0, np.nan, np.nan], [2.0, np.nan, np.nan]]
        np.testing.assert_array_equal(batch.ranked_labels, expected)

    def test_rectangular_rankings(self) -> None:
        """Equal-length rankings without repeats: the same arrays, without scattering."""
        samples = [{"id": "a", "expected_output": {"x": 1}}, {"id": "b", "expected_output": {}}]
        batch = make_batch(samples, {"a": ["x", "y"], "b": ["y", "x"]})
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


class TestQrelsDicts:
    def test_same_samples_and_hash_as_the_raw_path(self) -> None:
        """Samples read from pytrec_eval-shaped dicts equal those parsed from raw samples,
        and hash alike."""
        for qrels in (
            {"q1": {"a": 2, "b": 0.5}, "q2": {"c": -1}},
            {"q": {"relevance": 1.0, "x": 0}},
        ):
            direct = labels_from_dicts(qrels)
            assert direct is not None
            parsed = parse_samples((s, None) for s in raw_samples(direct))
            assert (
                qrels_of(direct)
                == qrels_of(parsed)
                == {q: {d: float(v) for d, v in m.items()} for q, m in qrels.items()}
            )
            hashes = []
            for columns in (direct, parsed):
                digest = ContentHash()
                digest.update(columns)
                hashes.append(digest.hexdigest())
            assert hashes[0] == hashes[1]

    @pytest.mark.parametrize("entries", [1, 3, 1 << 16])
    def test_the_hash_is_sha256_of_the_canonical_lines(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: int
    ) -> None:
        """A dataset's hash, written out by hand (engine.io.columns.ContentHash): a line per
        sample, its fields joined by U+001F, labels sorted by document id as ``doc=label``
        joined by U+001E, an absent field U+0000, the line ended by U+001D and a newline.
        The same from dicts and from a qrels file whose lines are not sorted, and whatever
        number of labels the lines are hashed a slice at a time."""
        monkeypatch.setattr("engine.io.columns._HASH_ENTRIES", entries)
        field, item, end, absent = "\x1f", "\x1e", "\x1d\n", "\x00"
        rest = field + field.join([absent] * 7)  # utility grades answers groups k input meta
        lines = f"q1{field}a=0.5{item}b=2{item}c10=1{rest}{end}q2{field}x=3{rest}{end}"
        expected = "sha256:" + hashlib.sha256(lines.encode()).hexdigest()
        qrels = {"q1": {"b": 2, "c10": 1, "a": 0.5}, "q2": {"x": 3}}
        (tmp_path / "q.txt").write_text("q1 0 c10 1\nq1 0 b 2\nq2 0 x 3\nq1 0 a 0.5\n")
        eng = engine.Engine(config={})
        assert eng.dataset(qrels).hash == expected
        assert eng.dataset(trec.read_qrels(tmp_path / "q.txt")).hash == expected

    @pytest.mark.parametrize(
        ("labels", "text"),
        [
            ({"b": 9, "a": 0, "c": 4}, "a=0\x1eb=9\x1ec=4"),  # whole labels 0-9 only
            ({"a": -0.0, "b": 1}, "a=-0\x1eb=1"),
            ({"a": 10, "b": 1}, "a=10\x1eb=1"),
            ({"a": -1, "b": 1}, "a=-1\x1eb=1"),
            ({"a": 1e20, "b": 2.5}, "a=1e+20\x1eb=2.5"),
        ],
    )
    def test_labels_are_hashed_as_their_text(self, labels: dict, text: str) -> None:  # type: ignore[type-arg]
        """Each label is written as Arrow writes the number (``-0`` kept, whole numbers
        without a point, large ones with an exponent), whichever labels a dataset has."""
        rest = "\x1f" + "\x1f".join(["\x00"] * 7)
        line = f"q\x1f{text}{rest}\x1d\n"
        expected = "sha256:" + hashlib.sha256(line.encode()).hexdigest()
        assert engine.Engine(config={}).dataset({"q": labels}).hash == expected

    @pytest.mark.parametrize(
        "qrels",
        [
            {"q": {"a": float("nan")}},
            {"": {"a": 1}},
            {},
            {"q": {"a": 1, "b": True}},  # a bool among ints (ints read the fast way)
            {"q": {"a": 0, "b": False, "c": 2}},
            {"q": {"a": 1, "b": True, "c": 2.5}},  # as many bytes as three 32-bit ints
            {"q": {"a": True}},
            {"q": {"a": 1, "b": "2"}},
            {"q": {"a": 1, "b": None}},
        ],
    )
    def test_invalid_qrels_are_reported(self, qrels: dict) -> None:  # type: ignore[type-arg]
        assert labels_from_dicts(qrels) is None
        with pytest.raises(InputError):
            sources.dataset_columns(qrels)

    @pytest.mark.parametrize(
        "labels",
        [
            [0, 1, 3, 2, 0],
            [-1, 0, -(2**31), 2**31 - 1],  # the ends of 32 bits
            [1, 2**31, -(2**31) - 1, 2**53],  # beyond them: read as Arrow reads them
            [1, 2.5, 0],  # an int first, a float later
            [2, np.int64(3), np.int32(-4)],  # numpy ints
        ],
    )
    def test_whole_labels_are_read_exactly(self, labels: list) -> None:  # type: ignore[type-arg]
        """Integer labels, which take the quicker reader when they fit in 32 bits, read as
        the numbers they are, whatever else is among them."""
        qrels = {"q": {f"d{i}": label for i, label in enumerate(labels)}, "r": {"x": 7}}
        direct = labels_from_dicts(qrels)
        assert direct is not None
        expected = {q: {d: float(v) for d, v in m.items()} for q, m in qrels.items()}
        assert qrels_of(direct) == expected
