"""engine.io.trec: reading and writing TREC qrels and runs; converting them to samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import qrels_of, run_of

import engine
from engine.cli import main
from engine.errors import InputError
from engine.io import fingerprints as fingerprint
from engine.io import frames, schemas, sources
from engine.io.documents import raw_outputs, raw_samples
from engine.io.frames import labels_from_dicts, run_from_dicts
from engine.io.trec import read_qrels, read_run, write_qrels, write_run


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


class TestReadQrels:
    """read_qrels parses 'qid iter docid rel' lines."""

    def test_graded_labels_by_query(self, tmp_path: Path) -> None:
        """Labels keep their grade; negative labels are kept as given; blank lines skipped."""
        path = _write(tmp_path / "q.txt", "1 0 a 2\n1 0 b 0\n\n2 0 a -1\n2\t0\tc\t1\n")
        assert qrels_of(read_qrels(path)) == {"1": {"a": 2.0, "b": 0.0}, "2": {"a": -1.0, "c": 1.0}}

    def test_every_malformed_line_is_reported(self, tmp_path: Path) -> None:
        """Wrong field counts, non-numeric labels and duplicates are all collected."""
        path = _write(tmp_path / "q.txt", "1 0 a 1\n1 0 b\n1 0 c x\n1 0 a 2\n1 0 d nan\n")
        with pytest.raises(InputError) as caught:
            read_qrels(path)
        problems = caught.value.problems
        assert [p.line for p in problems] == [2, 3, 4, 5]
        assert all(p.source == str(path) for p in problems)
        assert "4 fields" in problems[0].message
        assert "document 'a' has two relevance labels (the first at line 1)" in problems[2].message

    def test_comments_and_extra_whitespace(self, tmp_path: Path) -> None:
        """'#' lines are comments, as in trec_eval's qrels.test.with-comments; a doc id
        may contain '#'; a fifth field is still malformed, as trec_eval says."""
        path = _write(tmp_path / "q.txt", "# judged 2026\n1   0\ta#b 2\n#1 0 c 1\n")
        assert qrels_of(read_qrels(path)) == {"1": {"a#b": 2.0}}
        bad = _write(tmp_path / "bad.txt", "1 0 a 2 extra\n")
        with pytest.raises(InputError, match="expected 4 fields"):
            read_qrels(bad)

    def test_missing_file_is_an_input_error(self, tmp_path: Path) -> None:
        """An unreadable file raises InputError, not OSError."""
        with pytest.raises(InputError):
            read_qrels(tmp_path / "absent")


class TestReadRun:
    """read_run orders each query's documents as trec_eval does."""

    def test_score_descending_ignoring_the_rank_column(self, tmp_path: Path) -> None:
        """The rank column says b first; the scores say a first."""
        path = _write(tmp_path / "r.txt", "1 Q0 b 1 0.5 t\n1 Q0 a 2 0.9 t\n2 Q0 z 1 1 t\n")
        assert run_of(read_run(path)) == {"1": ["a", "b"], "2": ["z"]}

    def test_ties_broken_by_docid_descending(self, tmp_path: Path) -> None:
        """Equal scores: larger doc id (string order, so 'd9' > 'd10') first."""
        path = _write(tmp_path / "r.txt", "q Q0 d10 1 1.0 t\nq Q0 d9 2 1.0 t\nq Q0 d2 3 2.0 t\n")
        assert run_of(read_run(path)) == {"q": ["d2", "d9", "d10"]}

    def test_a_document_labelled_twice_in_interleaved_qrels(self, tmp_path: Path) -> None:
        """Qrels whose queries are not grouped are read in query order; a document one
        query labels twice is found (naming both lines), the same id in another query is
        not a repeat."""
        lines = [f"q{i % 3} 0 d{i // 3} {i % 2}" for i in range(30)]  # q0 q1 q2 q0 ...
        path = _write(tmp_path / "q.txt", "\n".join(lines) + "\n")
        assert qrels_of(read_qrels(path))["q1"] == {f"d{i}": (3 * i + 1) % 2 for i in range(10)}
        _write(path, "\n".join([*lines, "q1 0 d4 1"]) + "\n")
        with pytest.raises(InputError) as caught:
            read_qrels(path)
        (problem,) = caught.value.problems
        assert (problem.line, problem.sample_id) == (31, "q1")
        assert "the first at line 14" in str(problem)

    def test_interleaved_label_tables_repeat_check_each_row(self) -> None:
        """A label table whose queries are interleaved is grouped by query before the
        repeat check: a valid one reads, and a repeat names its own document."""
        table = pa.table({"query_id": ["q0", "q1", "q0", "q1"], "doc_id": ["a", "a", "b", "c"]})
        table = table.append_column("relevance", pa.array([1, 0, 2, 1]))
        assert qrels_of(frames.labels_from_table(table)) == {
            "q0": {"a": 1, "b": 2},
            "q1": {"a": 0, "c": 1},
        }
        again = pa.concat_tables([table, table.slice(0, 1)])
        with pytest.raises(InputError) as caught:
            frames.labels_from_table(again)
        (problem,) = caught.value.problems
        assert "document 'a' has two relevance labels (the first at row 0)" in str(problem)
        assert problem.sample_id == "q0"

    def test_a_document_retrieved_twice_is_an_error(self, tmp_path: Path) -> None:
        """trec_eval refuses a run that retrieves a document twice for a query: so does
        slotwise, naming both lines (the same doc id for another query is fine)."""
        path = _write(
            tmp_path / "r.txt", "q Q0 a 1 3 t\nq Q0 b 3 2 t\nr Q0 a 1 1 t\nq Q0 a 2 1 t\n"
        )
        with pytest.raises(InputError) as caught:
            read_run(path)
        (problem,) = caught.value.problems
        assert (problem.source, problem.line, problem.sample_id) == (str(path), 4, "q")
        assert "document 'a' is retrieved twice for this query (the first at line 1)" in str(
            problem
        )

    @pytest.mark.parametrize("fingerprints", ["real", "all-equal"])
    def test_retrieved_twice_is_exact_whatever_the_fingerprints(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fingerprints: str
    ) -> None:
        """Ids are fingerprinted to find repeats; rows whose fingerprints meet are compared
        exactly, so ids that differ in a few middle bytes (or, with every fingerprint
        equal, all ids) are never taken for repeats, and a real repeat is always found."""
        if fingerprints == "all-equal":
            monkeypatch.setattr(
                fingerprint, "fingerprints", lambda ids: np.zeros(len(ids), np.uint64)
            )
        ids = [f"msmarco_passage_{i:02d}_000042" for i in range(30)]  # same ends, same length
        lines = [f"q Q0 {d} {i + 1} {30 - i} t" for i, d in enumerate(ids)]
        lines += [f"r Q0 {d} {i + 1} {30 - i} t" for i, d in enumerate(ids)]
        path = _write(tmp_path / "r.txt", "\n".join(lines) + "\n")
        assert run_of(read_run(path)) == {"q": ids, "r": ids}
        _write(path, "\n".join([*lines, f"r Q0 {ids[7]} 31 0 t"]) + "\n")
        with pytest.raises(InputError) as caught:
            read_run(path)
        (problem,) = caught.value.problems
        assert (problem.line, problem.sample_id) == (61, "r")
        assert f"document '{ids[7]}' is retrieved twice for this query (the first at line 38)" in (
            str(problem)
        )

    @pytest.mark.parametrize("block", [3, 1 << 16])
    def test_repeats_are_found_in_every_block_of_queries(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
    ) -> None:
        """The run is checked a block of whole queries at a time (blocks of about 3 rows:
        a block per query), its queries interleaved in the file: each repeat is found in
        its own query, named with both lines, and an id another query has is no repeat."""
        monkeypatch.setattr(frames, "_CHECK_BLOCK", block)
        lines = [f"q{i % 4} Q0 d{i // 4} {i // 4 + 1} {20 - i // 4} t" for i in range(40)]
        path = _write(tmp_path / "r.txt", "\n".join(lines) + "\n")
        assert run_of(read_run(path))["q3"] == [f"d{i}" for i in range(10)]
        _write(path, "\n".join([*lines, "q1 Q0 d2 11 0 t", "q3 Q0 d9 11 0 t"]) + "\n")
        with pytest.raises(InputError) as caught:
            read_run(path)
        found = [
            (p.line, p.sample_id, "the first at line" in str(p)) for p in caught.value.problems
        ]
        assert found == [(41, "q1", True), (42, "q3", True)]
        assert "(the first at line 10)" in str(caught.value.problems[0])
        assert "(the first at line 40)" in str(caught.value.problems[1])

    def test_retrieved_twice_is_exit_2_in_slotwise_run(self, tmp_path: Path, capsys) -> None:
        qrels = _write(tmp_path / "q.txt", "q 0 a 1\n")
        run = _write(tmp_path / "r.txt", "q Q0 a 1 3 t\nq Q0 a 2 1 t\n")
        code = main(["run", "--qrels", str(qrels), "--run", str(run), "--metrics", "retrieval-mrr"])
        assert code == 2
        assert f"{run}:2" in capsys.readouterr().err

    def test_read_as_trec_eval_reads(self, tmp_path: Path) -> None:
        """Comment lines, blank lines, runs of spaces and tabs, fields after the sixth
        ("reserved for future expansion") and doc ids with '#' in them."""
        path = _write(
            tmp_path / "r.txt",
            "# run of 2026-11-23\n\nq  Q0\td#1 1 0.9 tag extra fields\n"
            "  # indented comment\nq Q0 d2 2 0.5 tag\n",
        )
        assert run_of(read_run(path)) == {"q": ["d#1", "d2"]}

    def test_a_comment_shaped_like_a_line_is_still_a_comment(self, tmp_path: Path) -> None:
        """Six fields after '#': the columnar reader must not take it for a query '#'."""
        path = _write(tmp_path / "r.txt", "# Q0 doc rank 1 tag\nq Q0 a 1 1 t\n")
        assert run_of(read_run(path)) == {"q": ["a"]}

    def test_every_malformed_line_is_reported(self, tmp_path: Path) -> None:
        """Field counts and scores are checked on every line before raising."""
        path = _write(
            tmp_path / "r.txt", "q Q0 a 1 1 t\nq Q0 b 2 t\nq Q0 c 3 high t\nq Q0 d 4 inf t\n"
        )
        with pytest.raises(InputError) as caught:
            read_run(path)
        assert [(p.source, p.line) for p in caught.value.problems] == [
            (str(path), 2),
            (str(path), 3),
            (str(path), 4),
        ]


class TestMeeting:
    """frames._meeting: which keys of a group meet another of the same group (a superset
    is allowed: those are compared exactly)."""

    def test_a_table_of_short_groups(self) -> None:
        """Groups of 3, 1, 4 and 2 keys sorted as rows of a table padded to 4: only the
        groups holding an equal pair come back, whole; equal keys in different groups do
        not meet."""
        keys = np.array([5, 6, 7, 5, 8, 9, 8, 1, 2, 2], dtype=np.uint64)
        sizes = np.array([3, 1, 4, 2])
        assert frames._meeting(keys, sizes).tolist() == [4, 5, 6, 7, 8, 9]

    def test_the_padding_never_meets_a_key(self) -> None:
        """The padding is the largest key: a key equal to it in a short group meets
        neither the padding nor anything else, two such keys in one group meet."""
        top = np.iinfo(np.uint64).max
        keys = np.array([top, 1, top, top, 3, 4, 5], dtype=np.uint64)
        sizes = np.array([1, 1, 2, 3])
        assert frames._meeting(keys, sizes).tolist() == [2, 3]

    def test_a_few_long_groups_are_sorted_as_one_array(self) -> None:
        """100 groups of one key and one of 50 (a table would be mostly padding): the two
        equal keys of the long group meet, the same key alone in another group does not."""
        keys = np.arange(150, dtype=np.uint64)
        keys[120] = keys[130]
        keys[0] = keys[130]
        sizes = np.array([1] * 100 + [50])
        assert frames._PADDING * keys.size < 50 * 101  # the one-array path
        assert frames._meeting(keys, sizes).tolist() == [120, 130]

    def test_groups_of_one_never_meet(self) -> None:
        keys = np.zeros(4, dtype=np.uint64)
        assert frames._meeting(keys, np.ones(4, dtype=np.int64)).tolist() == []


class TestTrecOrder:
    """Runs from scores are ranked with trec_eval's comparator."""

    @pytest.mark.parametrize(
        ("scored", "expected"),
        [
            ([("a", 1.0), ("b", 2.0)], ["b", "a"]),
            ([("a", 1.0), ("b", 1.0)], ["b", "a"]),
            ([("d10", 0.0), ("d9", 0.0), ("d1", 0.0)], ["d9", "d10", "d1"]),
            ([("x", -1.0), ("y", 0.0), ("z", -1.0)], ["y", "z", "x"]),
            ([], []),
        ],
    )
    def test_order(self, scored: list[tuple[str, float]], expected: list[str]) -> None:
        """Score descending, then doc id descending."""
        assert run_of(run_from_dicts({"q": dict(scored)})) == {"q": expected}


class TestRoundTrip:
    """write_* then read_* gives back the same data."""

    def test_qrels(self, tmp_path: Path) -> None:
        """Integral labels are written as integers, others as floats."""
        qrels = {"1": {"a": 2.0, "b": -1.0}, "2": {"c": 0.5}}
        write_qrels(tmp_path / "out" / "qrels", labels_from_dicts(qrels))
        assert (tmp_path / "out" / "qrels").read_text() == "1 0 a 2\n1 0 b -1\n2 0 c 0.5\n"
        assert qrels_of(read_qrels(tmp_path / "out" / "qrels")) == qrels

    def test_run_keeps_the_order(self, tmp_path: Path) -> None:
        """Scores are written strictly descending, so reading restores the ranking."""
        run = {"1": ["d1", "d10", "d9"], "2": ["x"]}
        write_run(tmp_path / "run", sources.read_outputs(run), tag="sys")
        assert (tmp_path / "run").read_text().splitlines()[0] == "1 Q0 d1 1 3 sys"
        assert run_of(read_run(tmp_path / "run")) == run


class TestConverters:
    """Samples and outputs in columns back to raw dataset and outputs documents."""

    def test_samples_are_valid_and_graded(self) -> None:
        """One sample per query, expected_output a graded map valid against the schema."""
        samples = raw_samples(labels_from_dicts({"q1": {"a": 2.0, "b": 0.0}, "q2": {"c": 0.5}}))
        assert samples == [
            {"id": "q1", "expected_output": {"a": 2, "b": 0}},
            {"id": "q2", "expected_output": {"c": 0.5}},
        ]
        for raw in samples:
            assert list(schemas.problems(raw, "sample")) == []

    def test_docid_named_like_a_long_form_key(self) -> None:
        """A document called 'relevance' is wrapped in the long form so it stays a label."""
        samples = raw_samples(labels_from_dicts({"q": {"relevance": 1.0, "x": 0.0}}))
        assert samples == [{"id": "q", "expected_output": {"relevance": {"relevance": 1, "x": 0}}}]
        assert list(schemas.problems(samples[0], "sample")) == []
        assert qrels_of(sources.dataset_columns(samples)) == {"q": {"relevance": 1.0, "x": 0.0}}

    def test_qrels_of_every_label_form(self) -> None:
        """Lists mean label 1; samples without relevance are left out."""
        raw = [
            {"id": "a", "expected_output": ["d1", "d2"]},
            {"id": "b", "expected_output": {"relevance": {"d3": 2}}},
            {"id": "c", "expected_output": {"answers": "yes"}},
        ]
        assert qrels_of(sources.dataset_columns(raw)) == {
            "a": {"d1": 1.0, "d2": 1.0},
            "b": {"d3": 2.0},
        }

    def test_outputs_round_trip(self) -> None:
        """Bare lists stay bare; long forms keep texts, pools and cited ids."""
        outputs = {
            "q1": ["a", "b"],
            "q2": {"retrieved": [{"id": "c", "text": "..."}, {"id": "7"}], "pool": ["c"]},
            "q3": [],
        }
        assert raw_outputs(sources.read_outputs(outputs)) == {
            "q1": ["a", "b"],
            "q2": {"retrieved": [{"id": "c", "text": "..."}, {"id": "7"}], "pool": ["c"]},
            "q3": [],
        }

    def test_end_to_end_through_the_engine(self, eng: engine.Engine, tmp_path: Path) -> None:
        """Files -> samples/outputs -> scores: P@2 of [b, a] against {a: 1} is 1/2."""
        qrels = _write(tmp_path / "qrels", "q 0 a 1\nq 0 b 0\n")
        run = _write(tmp_path / "run", "q Q0 a 1 1.0 t\nq Q0 b 2 2.0 t\n")
        dataset = eng.dataset(read_qrels(qrels))
        results = dataset.with_metrics(["retrieval-precision-at-k@2", "retrieval-mrr"]).evaluate(
            read_run(run)
        )
        assert results.per_sample()[0]["scores"] == {
            "retrieval-precision-at-k@2": 1 / 2,
            "retrieval-mrr": 1 / 2,
        }
