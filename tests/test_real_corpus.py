"""Runs shaped like real ones: document ids from a corpus of millions, almost none shared
between queries. A run is coded per block of queries (no vocabulary of every id), so
these tests force many small CSV blocks, queries whose lines span blocks, ties in score
and interleaved queries, and check the numbers against pytrec_eval and the order against
trec_eval's rule written out in Python."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as csv
import pytest
import pytrec_eval
from conftest import run_of

import engine
from engine.errors import InputError
from engine.io import trec
from engine.io.columns import Columns, extend_vocabulary, stack
from engine.io.frames import Coded, run_from_dicts

CORPUS = 8_841_823
METRICS = {
    "retrieval-ndcg-at-k@10": "ndcg_cut_10",
    "retrieval-map": "map",
    "retrieval-mrr": "recip_rank",
    "retrieval-recall-at-k@100": "recall_100",
    "retrieval-precision-at-k@10": "P_10",
    "retrieval-bpref": "bpref",
}


def _collection(seed: int, queries: int = 300, docs: int = 60) -> tuple[dict, dict]:
    """Qrels (some judged documents retrieved, grades 0-3) and a run with ids from an
    MS MARCO-sized corpus, scores rounded so that neighbours tie now and then."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        ranked = [str(d) for d in rng.choice(CORPUS, docs, replace=False)]
        judged = {d: int(rng.integers(4)) for d in rng.choice(ranked, 5, replace=False)}
        judged |= {str(d): int(rng.integers(1, 4)) for d in rng.choice(CORPUS, 3)}
        qrels[str(1_000_000 + q)] = judged
        scores = np.round(20 - np.cumsum(rng.exponential(0.02, docs)), 2)
        run[str(1_000_000 + q)] = dict(zip(ranked, scores.tolist(), strict=True))
    return qrels, run


def _write(path: Path, run: dict, *, interleave: bool = False) -> None:
    lines = [
        f"{q} Q0 {d} {i + 1} {s} tag"
        for q, scored in run.items()
        for i, (d, s) in enumerate(scored.items())
    ]
    if interleave:  # every query's lines scattered over the file
        lines = [lines[i] for i in np.random.default_rng(0).permutation(len(lines))]
    path.write_text("\n".join(lines) + "\n")


def _trec_eval_order(scored: dict[str, float]) -> list[str]:
    """trec_eval's order: score descending, ties by doc id descending (as bytes)."""
    return [d for d, _ in sorted(scored.items(), key=lambda x: (x[1], x[0].encode()), reverse=True)]


@pytest.fixture(params=[1 << 12, 1 << 24], ids=["small-blocks", "one-block"])
def csv_block(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The CSV reader's block size: 4 KiB makes every query's lines span blocks now and then."""
    monkeypatch.setattr(trec, "_CSV_BLOCK", request.param)
    return int(request.param)


class TestRealCorpusRuns:
    @pytest.mark.parametrize("interleave", [False, True], ids=["grouped", "interleaved"])
    def test_values_equal_pytrec_eval(
        self, tmp_path: Path, csv_block: int, interleave: bool
    ) -> None:
        """Files (queries spanning blocks, interleaved or not) and dicts give pytrec_eval's
        numbers on every query."""
        qrels, run = _collection(1)
        _write(tmp_path / "run", run, interleave=interleave)
        (tmp_path / "qrels").write_text(
            "".join(f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items())
        )
        expected = pytrec_eval.RelevanceEvaluator(qrels, set(METRICS.values())).evaluate(run)
        eng = engine.Engine(config={})
        for results in (
            eng.evaluate_trec(tmp_path / "qrels", tmp_path / "run", list(METRICS)),
            eng.evaluate_trec(qrels, run, list(METRICS)),
        ):
            for label, name in METRICS.items():
                for row in results.per_sample():
                    assert row["scores"][label] == pytest.approx(
                        expected[row["id"]][name], abs=1e-12
                    ), (label, row["id"])

    def test_order_is_trec_eval_order(self, tmp_path: Path, csv_block: int) -> None:
        """Ranked as trec_eval ranks, ties included, from files and from dicts."""
        _, run = _collection(2)
        ties = sum(
            len(scores) - len(set(scores)) for scores in (list(s.values()) for s in run.values())
        )
        assert ties > 100  # the collection has ties to break
        expected = {q: _trec_eval_order(scored) for q, scored in run.items()}
        _write(tmp_path / "run", run, interleave=True)
        assert run_of(trec.read_run(tmp_path / "run")) == expected
        assert run_of(run_from_dicts(run)) == expected

    def test_a_repeat_across_blocks_names_both_lines(self, tmp_path: Path, csv_block: int) -> None:
        """A document retrieved twice by a query whose lines span blocks is found."""
        _, run = _collection(3, queries=200)
        _write(tmp_path / "run", run)
        text = (tmp_path / "run").read_text()
        lines = text.splitlines()
        starts = np.cumsum([0] + [len(line) + 1 for line in lines])
        query = np.array([line.split()[0] for line in lines])
        first_of = {q: i for i, q in reversed(list(enumerate(query)))}
        spanning = [  # a query whose first and last lines lie in different blocks
            first_of[q]
            for q in first_of
            if starts[first_of[q]] // csv_block != starts[first_of[q] + 59] // csv_block
        ]
        at = spanning[len(spanning) // 2] if spanning else 0
        repeated = lines[at].split()
        lines.insert(at + 60, f"{repeated[0]} Q0 {repeated[2]} 99 -5 tag")  # its query's last
        (tmp_path / "run").write_text("\n".join(lines) + "\n")
        assert bool(spanning) == (csv_block < len(text))
        with pytest.raises(InputError) as caught:
            trec.read_run(tmp_path / "run")
        (problem,) = caught.value.problems
        assert (problem.sample_id, problem.line) == (repeated[0], at + 61)
        assert f"the first at line {at + 1}" in problem.message

    def test_codes_tell_ids_apart_within_each_query(self, tmp_path: Path) -> None:
        """Per query, equal ids share a code and different ids do not, blocks or not."""
        _, run = _collection(4, queries=100)
        _write(tmp_path / "run", run, interleave=True)
        table = csv.read_csv(
            tmp_path / "run",
            read_options=csv.ReadOptions(
                column_names=["query", "q0", "doc", "rank", "score", "tag"], block_size=4096
            ),
            parse_options=csv.ParseOptions(delimiter=" "),
            convert_options=csv.ConvertOptions(
                column_types={"query": pa.string(), "doc": pa.dictionary(pa.int32(), pa.string())}
            ),
        )
        assert table.column("doc").num_chunks > 10
        queries = Coded.of(table.column("query"))
        docs = Coded.per_query(table.column("doc"), queries)
        names = docs.ids.take(pa.array(docs.codes)).to_pylist()
        assert names == table.column("doc").cast(pa.string()).to_pylist()
        pairs = set(zip(queries.codes.tolist(), docs.codes.tolist(), strict=True))
        assert len(pairs) == len(set(zip(queries.codes.tolist(), names, strict=True)))


class TestVocabularies:
    def test_extend_looks_ids_up_once(self) -> None:
        """Known ids get the base's code, the others a code of their own copy."""
        base, other = pa.array(["a", "b", "c"]), pa.array(["x", "c", "a", "y"])
        docs, remap = extend_vocabulary(base, other)
        assert docs.take(pa.array(remap)).to_pylist() == ["x", "c", "a", "y"]
        assert remap.tolist()[1:3] == [2, 0]  # c and a: the base's codes
        same, remap = extend_vocabulary(base, pa.array(["b", "a"]))
        assert same.to_pylist() == ["a", "b", "c"] and remap.tolist() == [1, 0]

    def test_stack_keeps_each_rows_ids(self) -> None:
        """Stacked outputs keep their ids, with no hashing across parts."""
        parts = [run_from_dicts({"q1": {"a": 2.0, "b": 1.0}}), run_from_dicts({"q2": {"b": 1.0}})]
        assert run_of(stack(parts)) == {"q1": ["a", "b"], "q2": ["b"]}
        assert isinstance(stack(parts), Columns)
