"""Runs shaped like real ones: document ids from a corpus of millions, almost none shared
between queries. A run is coded per block of queries (no vocabulary of every id), so
these tests force many small CSV blocks, queries whose lines span blocks, ties in score
and interleaved queries, and check the numbers against pytrec_eval and the order against
trec_eval's rule written out in Python."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import pytrec_eval
from conftest import run_of
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.errors import InputError
from engine.evaluation.batch import Batch
from engine.evaluation.label_sources import slot_sources
from engine.io import columns as columns_module
from engine.io import trec, trec_csv
from engine.io.columns import Columns, ContentHash, list_array, stack
from engine.io.fingerprints import fingerprints, first_equals, order_within, same_strings
from engine.io.frames import flat, flat_strings, labels_from_dicts, run_from_dicts

CORPUS = 8_841_823
METRICS = {
    "retrieval-ndcg-at-k@10": "ndcg_cut_10",
    "retrieval-map": "map",
    "retrieval-mrr": "recip_rank",
    "retrieval-recall-at-k@100": "recall_100",
    "retrieval-precision-at-k@10": "P_10",
    "retrieval-bpref": "bpref",
}


def _collection(
    seed: int, queries: int = 300, docs: int = 60, unretrieved: int = 3
) -> tuple[dict, dict]:
    """Qrels (some judged documents retrieved, grades 0-3, and ``unretrieved`` judged
    documents from the corpus: many make deep pools) and a run with ids from an MS
    MARCO-sized corpus, scores rounded so that neighbours tie now and then."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        ranked = [str(d) for d in rng.choice(CORPUS, docs, replace=False)]
        judged = {d: int(rng.integers(4)) for d in rng.choice(ranked, 5, replace=False)}
        judged |= {str(d): int(rng.integers(0, 4)) for d in rng.choice(CORPUS, unretrieved)}
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
    monkeypatch.setattr(trec_csv, "_CSV_BLOCK", request.param)
    return int(request.param)


class TestRealCorpusRuns:
    @pytest.mark.parametrize("interleave", [False, True], ids=["grouped", "interleaved"])
    @pytest.mark.parametrize("pools", ["sparse", "deep"])
    def test_values_equal_pytrec_eval(
        self, tmp_path: Path, csv_block: int, interleave: bool, pools: str
    ) -> None:
        """Files (queries spanning blocks, interleaved or not) and dicts give pytrec_eval's
        numbers on every query, with few judged documents per query or more judged
        documents than retrieved ones (deep pools, as TREC DL's)."""
        qrels, run = _collection(1, unretrieved=3 if pools == "sparse" else 120)
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


class TestVocabularies:
    def test_stack_keeps_each_rows_ids(self) -> None:
        """Stacked outputs keep their ids, with no hashing across parts."""
        parts = [run_from_dicts({"q1": {"a": 2.0, "b": 1.0}}), run_from_dicts({"q2": {"b": 1.0}})]
        assert run_of(stack(parts)) == {"q1": ["a", "b"], "q2": ["b"]}
        assert isinstance(stack(parts), Columns)

    @pytest.mark.parametrize("reverse", [False, True], ids=["codes-as-read", "codes-reversed"])
    @pytest.mark.parametrize("block", [5, 1 << 16], ids=["tiny-blocks", "one-block"])
    @pytest.mark.parametrize(
        ("judged", "colliding"),
        [(2, False), (4, False), (9, False), (9, True)],
        ids=["few-labels", "as-many", "deep-pools", "deep-pools-keys-colliding"],
    )
    def test_beside_matches_ids_within_their_row(
        self,
        monkeypatch: pytest.MonkeyPatch,
        block: int,
        judged: int,
        colliding: bool,
        reverse: bool,
    ) -> None:
        """Labels coded per query (an id judged by many queries has a code in each) and
        outputs coded per query meet row by row: a ranked id takes its own row's label
        code exactly when that row labels it, whatever block the rows fall in, whether a
        block's labels are few (looked up), as many as its outputs (one dictionary) or
        more (fingerprints met row by row; when every id's fingerprint is the same, the
        strings differ where keys meet and the block is hashed instead), and whether a
        row's label codes count up (as read) or down (recoded)."""
        monkeypatch.setattr(columns_module, "_MATCH_BLOCK", block)
        if colliding:
            monkeypatch.setattr(
                columns_module, "fingerprints", lambda ids: np.zeros(len(ids), np.uint64)
            )
        rng = np.random.default_rng(7)
        pool = [f"d{i}" for i in range(12)]  # few ids: most are judged by several queries
        qrels = {
            f"q{q}": {d: int(rng.integers(0, 3)) for d in rng.choice(pool, judged, replace=False)}
            for q in range(40)
        }
        run = {
            f"q{q}": dict(
                zip(rng.choice(pool, 6, replace=False).tolist(), [6, 5, 4, 3, 2, 1], strict=True)
            )
            for q in range(40)
            if q % 7  # some queries have no output
        }
        labels = labels_from_dicts(qrels)
        assert labels is not None
        samples = stack([labels.slice(0, 17), labels.slice(17, 23)])  # stacked parts too
        if reverse:
            count = len(samples.docs)
            flipped = np.arange(count)[::-1]
            samples = samples.recoded(samples.docs.take(pa.array(flipped)), flipped.__getitem__)
        assert len(samples.docs) > len(set(samples.docs.to_pylist()))  # ids in many rows
        outputs = run_from_dicts(run)
        position = {q: i for i, q in enumerate(outputs.ids.to_pylist())}
        joined = samples.beside(outputs.take([position.get(q, -1) for q in qrels]))
        docs = joined.docs.to_pylist()
        for row, qid in enumerate(qrels):
            label_code = {
                docs[entry["doc"]]: entry["doc"]
                for entry in joined.column("relevance")[row].as_py()
            }
            assert set(label_code) == set(qrels[qid])
            retrieved = joined.column("retrieved")[row].as_py()
            if qid not in run:
                assert retrieved is None
                continue
            assert [docs[c] for c in retrieved] == sorted(run[qid], key=run[qid].get, reverse=True)
            for code in retrieved:
                assert (docs[code] in qrels[qid]) == (code in label_code.values())
                if docs[code] in qrels[qid]:
                    assert code == label_code[docs[code]]

    def test_a_compacted_slice_ships_its_rows_alone(self) -> None:
        """A slice of a joined table compacted for another process: the same rows and ids,
        its vocabulary taken from each piece of the joined one (the samples' and the
        outputs'), and buffers of its own: pickled, it carries its own rows, not the
        table's."""
        import pickle

        count = 4000
        qrels = {f"q{i}": {f"j{i}-{d}": d % 3 for d in range(3)} for i in range(count)}
        run = {
            f"q{i}": {f"j{i}-1": 9.0, **{f"r{i}-{d}": float(d) for d in range(30)}}
            for i in range(count)
        }
        labels, outputs = labels_from_dicts(qrels), run_from_dicts(run)
        assert labels is not None and outputs is not None
        joined = labels.beside(outputs)
        part = joined.slice(1000, 64)
        compacted = part.compact()
        assert run_of(compacted) == run_of(part)
        for row in range(len(part)):
            labelled = {part.docs[e["doc"]].as_py() for e in part.column("relevance")[row].as_py()}
            again = {
                compacted.docs[e["doc"]].as_py() for e in compacted.column("relevance")[row].as_py()
            }
            assert again == labelled
        assert len(compacted.docs) <= 2 * 64 * (3 + 30)  # about the ids of its rows
        assert len(pickle.dumps(compacted)) < len(pickle.dumps(joined)) / 20

    def test_beside_keeps_both_vocabularies_uncopied(self) -> None:
        """Outputs beside samples: the joined vocabulary is the samples' ids then the
        outputs', in the same buffers (no copy of either), and every use of a vocabulary
        reads it as one: doc ids, stacking, compacting, the content hash, another join."""
        qrels = {"q0": {"a": 1, "b": 0}, "q1": {"é": 2}}
        labels = labels_from_dicts(qrels)
        assert labels is not None
        outputs = run_from_dicts({"q0": {"x": 3.0, "a": 2.0}, "q1": {"é": 1.0, "y": 0.5}})
        joined = labels.beside(outputs)
        assert isinstance(joined.docs, pa.ChunkedArray)
        assert joined.docs.to_pylist() == labels.docs.to_pylist() + outputs.docs.to_pylist()
        first, second = joined.docs.chunks
        assert first.buffers()[2].address == labels.docs.buffers()[2].address
        assert second.buffers()[2].address == outputs.docs.buffers()[2].address
        expected = {"q0": ["x", "a"], "q1": ["é", "y"]}
        assert run_of(joined) == expected
        assert run_of(stack([joined, joined])) == {**expected}
        assert run_of(joined.compact()) == expected
        again = Columns(joined.table.select(["id", "relevance"]), joined.docs).beside(outputs)
        assert len(again.docs.chunks) == 3
        assert run_of(again) == expected
        hashed, plain = ContentHash(), ContentHash()
        hashed.update(joined)
        plain.update(labels)
        assert hashed.hexdigest() == plain.hexdigest()  # outputs are not content

    def test_an_unlabelled_output_never_takes_the_next_rows_label(self) -> None:
        """More labels than outputs: the outputs are hashed and the labels looked up. An
        output no label names (u1, numbered just past the labelled ids) is no label's,
        though its number meets the next row's labelled "a"."""
        qrels = {"q0": {"a": 1, "p1": 0, "p2": 0, "p3": 0, "p4": 0}, "q1": {"a": 2}}
        labels = labels_from_dicts(qrels)
        assert labels is not None
        run = {"q0": {"a": 4.0, "u1": 3.0, "u2": 2.0, "u3": 1.0}, "q1": {"a": 1.0}}
        joined = labels.beside(run_from_dicts(run))
        retrieved = joined.column("retrieved").to_pylist()
        labelled = [[e["doc"] for e in row] for row in joined.column("relevance").to_pylist()]
        assert retrieved[0][0] == labelled[0][0] and retrieved[1] == labelled[1]
        assert not set(retrieved[0][1:]) & {*labelled[0], *labelled[1]}
        results = engine.Engine(config={}).evaluate_trec(qrels, run, ["retrieval-map"])
        expected = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
        assert {row["id"]: row["scores"]["retrieval-map"] for row in results.per_sample()} == {
            q: expected[q]["map"] for q in qrels
        }

    def test_outputs_sliced_from_a_larger_run_join_by_their_own_ids(self) -> None:
        """The first queries of a run count their codes up from 0 while the run's
        vocabulary holds every query's ids (a streamed chunk): each keeps its own ids."""
        run = {"q0": {"a": 3.0, "b": 2.0}, "q1": {"c": 1.0, "d": 0.5}}
        labels = labels_from_dicts({"q0": {"b": 1}})
        assert labels is not None
        outputs = run_from_dicts(run).slice(0, 1)
        assert len(outputs.docs) == 4  # the codes of q0 count up; the vocabulary is longer
        joined = labels.beside(outputs)
        docs = joined.docs.to_pylist()
        assert [docs[c] for c in joined.column("retrieved")[0].as_py()] == ["a", "b"]
        assert (
            joined.column("retrieved")[0].as_py()[1]
            == joined.column("relevance")[0].as_py()[0]["doc"]
        )

    def test_label_sources_are_found_in_their_own_row(self) -> None:
        """A label source names a document of its own sample, even when other samples
        label the same id under another code."""
        dataset = engine.dataset(
            [
                {
                    "id": f"q{i}",
                    "input": "x",
                    "expected_output": {"relevance": {"a": 1, "b": 1}},
                    "metadata": {"label_sources": {"b" if i % 2 else "a": "judge"}},
                }
                for i in range(4)
            ]
        )
        samples = stack([dataset.columns.slice(0, 2), dataset.columns.slice(2, 2)])
        outputs = run_from_dicts({f"q{i}": {"a": 2.0, "b": 1.0, "c": 0.5} for i in range(4)})
        sources = slot_sources(samples.beside(outputs)).to_pylist()
        assert sources == ["judge", "human", None, "human", "judge", None] * 2


class TestFingerprints:
    def test_every_byte_counts_and_equal_ids_agree(self) -> None:
        """Ids that share their length and both ends (MS MARCO v2's shards, URLs) get
        different fingerprints, and an id gets the same one wherever it sits: in another
        array, at another offset, in a slice."""
        ids = [f"msmarco_passage_{shard:02d}_000042" for shard in range(70)]
        ids += ["", "a", "ab", "abcdefgh", "abcdefghi", "http://example.org/a/index.html"]
        found = fingerprints(pa.array(ids))
        assert len(set(found.tolist())) == len(ids)
        shifted = fingerprints(pa.array(["x" * 13, *ids]).slice(1))
        assert shifted.tolist() == found.tolist()
        assert fingerprints(pa.array(ids[::-1])).tolist() == found.tolist()[::-1]

    @pytest.mark.parametrize(
        ("right", "same"),
        [
            (["abc", "http://example.org/a/index.html", ""], True),
            (["abc", "http://example.org/a/index.htmL", ""], False),  # the last byte
            (["abd", "http://example.org/a/index.html", ""], False),
            (["abc", "http://example.org/a/index.html", "x"], False),  # a length
            (["ab", "http://example.org/a/index.html", ""], False),
        ],
    )
    def test_same_strings_compares_every_byte(self, right: list[str], same: bool) -> None:
        """Pairs of strings from two arrays (one a slice) compared a word at a time."""
        left = pa.array(["zzzzzzzzz", "", "abc", "http://example.org/a/index.html"]).slice(1)
        pairs = (np.array([1, 2, 0]), np.array([0, 1, 2]))
        assert same_strings(left, pairs[0], pa.array(right), pairs[1]) is same


class TestFlatChunks:
    """A parsed column's chunks copied into one array, each chunk let go once copied."""

    def test_strings_of_sliced_empty_and_unicode_chunks(self) -> None:
        chunks = [
            pa.array(["skip", "d1", "", "dé"]).slice(1),  # offsets that do not start at 0
            pa.array([], pa.string()),
            pa.array(["naïve", "x" * 40]),
            pa.array(["a", "b", "c"]).slice(2, 1),
        ]
        expected = pa.chunked_array(chunks).combine_chunks()
        joined = flat_strings(chunks)
        assert joined.equals(expected)
        assert joined.to_pylist() == ["d1", "", "dé", "naïve", "x" * 40, "c"]
        assert chunks == []  # emptied: each chunk is freed once nothing else holds it
        joined.validate(full=True)

    def test_no_chunks(self) -> None:
        assert flat_strings([]).to_pylist() == []
        assert flat([], np.float64).size == 0

    def test_numbers(self) -> None:
        chunks = [pa.array([1.5, -0.0, 2.0]).slice(1), pa.array([], pa.float64()), pa.array([7.0])]
        values = flat(chunks, np.float64)
        assert values.tolist() == [-0.0, 2.0, 7.0]
        assert np.signbit(values[0])
        assert values.flags.writeable
        assert chunks == []


class TestFirstEquals:
    """Keys of two sides met group by group: each ``wanted`` key and the first ``found``
    key of its group with the same high bits (the low bits hold places)."""

    def test_cases(self) -> None:
        key = {name: np.uint64(value << 40) for name, value in [("a", 1), ("b", 2), ("c", 3)]}
        found = np.array([key["b"], key["a"], key["b"], key["c"]])  # groups: [b a b] [c]
        wanted = np.array([key["b"], key["c"], key["b"], key["c"], key["a"]])  # [b c b] [c a]
        pairs = first_equals(found, np.array([3, 1]), wanted, np.array([3, 2]))
        assert pairs is not None
        assert sorted(zip(*(p.tolist() for p in pairs), strict=True)) == [
            (0, 0),  # group 0's first b, for each b wanted there
            (0, 2),
            (3, 3),  # group 1's c; group 0's c and group 1's a meet nothing
        ]

    def test_a_few_long_groups_are_left_to_the_caller(self) -> None:
        sizes = np.array([1] * 30 + [100])
        keys = np.arange(sizes.sum(), dtype=np.uint64) << np.uint64(32)
        assert first_equals(keys, sizes, keys, sizes) is None

    @given(
        st.lists(st.tuples(st.lists(st.integers(0, 5)), st.lists(st.integers(0, 5))), max_size=8)
    )
    @settings(max_examples=200, deadline=None)
    def test_any_groups(self, groups: list[tuple[list[int], list[int]]]) -> None:
        """What a dict of each group's first found key gives, whatever the groups."""
        found = np.array([v << 50 for f, _ in groups for v in f], dtype=np.uint64)
        wanted = np.array([v << 50 for _, w in groups for v in w], dtype=np.uint64)
        found_sizes = np.array([len(f) for f, _ in groups], dtype=np.int64)
        wanted_sizes = np.array([len(w) for _, w in groups], dtype=np.int64)
        expected, f_at, w_at = [], 0, 0
        for f, w in groups:
            first = {}
            for i, v in enumerate(f):
                first.setdefault(v, f_at + i)
            expected += [(first[v], w_at + j) for j, v in enumerate(w) if v in first]
            f_at, w_at = f_at + len(f), w_at + len(w)
        pairs = first_equals(found, found_sizes, wanted, wanted_sizes)
        if pairs is not None:
            assert sorted(zip(*(p.tolist() for p in pairs), strict=True)) == sorted(expected)


class TestOrderWithin:
    """Each group's ids in the order of their UTF-8 bytes (Python's ``sorted`` of the
    encoded ids, stable), as the dataset hash needs them."""

    @staticmethod
    def _expected(ids: list[str], sizes: list[int]) -> list[int]:
        order, start = [], 0
        for size in sizes:
            group = range(start, start + size)
            order += sorted(group, key=lambda i: ids[i].encode("utf-8"))
            start += size
        return order

    @pytest.mark.parametrize(
        ("ids", "sizes"),
        [
            (["b", "a", "c", "ab", "a\x00", "a"], [3, 3]),  # a NUL after a shared "a"
            ([f"msmarco_passage_{s:02d}_{o}" for s, o in [(1, 10), (0, 9), (1, 1)]], [3]),
            (["", "é", "e", "z", "ée"], [5]),  # empty, two-byte characters
            ([str(i) for i in range(300, 0, -1)], [300]),  # a group wider than 256
            (["same-prefix-x", "same-prefix-a", "same-prefix-m"], [0, 3, 0]),
            (["abcdefghij2", "abcdefghij1", "zz"], [2, 1]),  # the first 7 bytes shared
            (["a", "b", "a", "c", "b"], [2, 0, 3]),  # in order (NIST's qrels), not across groups
            (["a", "b", "a", "c", "b"], [2, 2, 1]),
            (["a", "b", "c", "e", "d"], [2, 3]),  # in order but for the last pair
        ],
    )
    def test_cases(self, ids: list[str], sizes: list[int]) -> None:
        found = order_within(pa.array(ids, pa.string()), np.array(sizes))
        assert found.tolist() == self._expected(ids, sizes)

    @given(st.lists(st.lists(st.text(alphabet="ab0\x00é9", max_size=12), max_size=40), max_size=8))
    @settings(max_examples=200, deadline=None)
    def test_any_groups(self, groups: list[list[str]]) -> None:
        """Equal ids, prefixes of each other, long shared prefixes: the same order."""
        ids = [i for group in groups for i in group]
        sizes = [len(group) for group in groups]
        found = order_within(pa.array(ids, pa.string()), np.array(sizes, dtype=np.int64))
        assert found.tolist() == self._expected(ids, sizes)


def test_an_id_another_sample_labels_has_no_label_here() -> None:
    """More labels than ranked slots, each code one label's (as TREC qrels are coded):
    a ranking that shares its vocabulary with the labels (a Columns built by hand, as a
    plugin may) and names an id only another sample labels finds no label for it; a
    padded slot finds none either."""
    labels = labels_from_dicts({"q1": {"a": 1, "b": 2, "c": 1}, "q2": {"d": 1, "e": 1, "f": 3}})
    assert labels is not None
    docs = labels.docs.to_pylist()
    ranked = [[docs.index("d"), docs.index("a")], [docs.index("a")]]
    column = list_array([0, 2, 3], pa.array(np.concatenate(ranked), pa.int32()))
    batch = Batch.compile(Columns(labels.table.append_column("retrieved", column), labels.docs))
    assert np.isnan(batch.ranked_labels[0, 0]) and batch.ranked_labels[0, 1] == 1.0
    assert np.isnan(batch.ranked_labels[1]).all()  # "a" is q1's label, not q2's
    # a padded slot (-1) of the row owning the lowest code is no document: no label
    column = list_array([0, 1, 3], pa.array([docs.index("a"), docs.index("d"), 0], pa.int32()))
    batch = Batch.compile(Columns(labels.table.append_column("retrieved", column), labels.docs))
    assert batch.ranked_labels[0, 0] == 1.0 and np.isnan(batch.ranked_labels[0, 1])
    assert batch.ranked_labels[1, 0] == 1.0 and np.isnan(batch.ranked_labels[1, 1])
