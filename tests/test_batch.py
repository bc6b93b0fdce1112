"""Batch compilation: rankings deduplicated and joined with labels, padded, cut per sample."""

from __future__ import annotations

import attrs
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.evaluation.batch import Batch, Flat, Shape
from engine.io.documents import parse_samples
from engine.testing import OUTPUTS, SAMPLES, make_batch


def _batch(rows, default_k=5):
    samples = [
        {"id": str(i), "expected_output": labels, **({"metadata": {"k": k}} if k else {})}
        for i, (labels, _, k) in enumerate(rows)
    ]
    outputs = {str(i): ranking for i, (_, ranking, _) in enumerate(rows) if ranking is not None}
    return make_batch(samples, outputs, default_k=default_k)


class TestCompile:
    def test_join_and_padding(self):
        """Labels are joined onto ranks; unjudged and padding are NaN; lengths are per sample."""
        batch = _batch(
            [
                ({"a": 2, "b": 0, "z": -1}, ["a", "x", "b", "z"], None),
                ({"c": 1}, ["c"], None),
                ({}, None, None),
            ]
        )
        assert batch.lengths.tolist() == [4, 1, 0]
        expected = np.array([[2, np.nan, 0, -1], [1, np.nan, np.nan, np.nan], [np.nan] * 4])
        np.testing.assert_array_equal(batch.ranked_labels, expected)
        np.testing.assert_array_equal(batch.gains, [[2, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
        assert batch.judged.tolist() == [
            [True, False, True, True],
            [True, False, False, False],
            [False] * 4,
        ]
        assert batch.has_output.tolist() == [True, True, False]

    def test_duplicates_keep_first(self):
        """Repeated ids keep their first rank and are counted per sample; the row keeps
        the width of the ranking as given (padding after the kept ids)."""
        batch = _batch([({"a": 1}, ["x", "a", "x", "a", "y"], None)])
        assert batch.lengths.tolist() == [3]
        assert batch.positions[0].tolist() == [0, 1, 4, -1, -1]
        assert batch.duplicates_dropped.tolist() == [2]
        np.testing.assert_array_equal(batch.ranked_labels[0], [np.nan, 1, np.nan, np.nan, np.nan])

    def test_same_doc_id_in_different_samples(self):
        """A document id shared by samples gets each sample's own label."""
        batch = _batch([({"d": 3}, ["d"], None), ({"d": 1}, ["d"], None)])
        assert batch.ranked_labels[:, 0].tolist() == [3.0, 1.0]

    def test_ideal_gains_sorted(self):
        """Ideal gains: all judged labels, negatives as 0, sorted descending."""
        batch = _batch([({"a": 1, "b": 3, "c": -2, "d": 2}, [], None), ({"a": 1}, [], None)])
        np.testing.assert_array_equal(batch.ideal_gains, [[3, 2, 1, 0], [1, 0, 0, 0]])
        assert batch.num_relevant().tolist() == [3, 1]
        assert batch.num_relevant(2).tolist() == [2, 0]
        assert batch.max_label == 3.0

    def test_cutoffs_resolution(self):
        """k resolves per sample: the metric's k when given (for every sample), else
        metadata.k, else the default."""
        batch = _batch([({}, ["a", "b", "c"], 2), ({}, ["a", "b", "c"], None)], default_k=1)
        assert batch.cutoffs().tolist() == [2, 1]
        assert batch.top_k().tolist() == [[True, True, False], [True, False, False]]
        assert batch.cutoffs(3).tolist() == [3, 3]
        assert batch.top_k(3).tolist() == [[True, True, True], [True, True, True]]

    def test_member_and_labels_of_other_columns(self):
        """Pool and cited ids are matched against the ranked documents; utilities are
        joined like relevance; a pool's own labels are listed in pool order."""
        batch = make_batch(
            [
                {
                    "id": "a",
                    "expected_output": {"relevance": {"b": 2, "q": 1}, "utility": {"a": 0.5}},
                },
                {"id": "b", "expected_output": {"utility": {"a": -1.0, "zz": 1.0}}},
            ],
            {"a": {"retrieved": ["a", "b"], "pool": ["b", "q", "b"]}, "b": ["a"]},
        )
        assert batch.member("pool").tolist() == [[False, True], [False, False]]
        assert batch.has("pool").tolist() == [True, False]
        np.testing.assert_array_equal(batch.utilities, [[0.5, np.nan], [-1.0, np.nan]])
        expected = [[2, 1, np.nan], [np.nan, np.nan, np.nan]]  # the pool as given: 3 ids wide
        np.testing.assert_array_equal(batch.list_labels("pool"), expected)

    def test_empty_batch(self):
        """An empty batch has well-formed zero-size arrays."""
        empty = parse_samples([({"id": "x"}, None)]).slice(0, 0)
        batch = Batch.compile(empty)
        assert batch.doc_codes.shape == (0, 0) and len(batch) == 0
        assert batch.cutoffs().shape == (0,)

    def test_shape_fixes_the_padding(self):
        """A dataset-wide shape pads every chunk to the same widths and largest label."""
        samples = [{"id": "q", "expected_output": {"a": 1}}]
        own = make_batch(samples, {"q": ["a", "b"]})
        batch = Batch.compile(own.columns, shape=Shape({"retrieved": 5, "relevance": 3}, 7.0))
        assert batch.doc_codes.shape == (1, 5) and batch.label_values.shape == (1, 3)
        assert batch.max_label == 7.0 and own.max_label == 1.0
        np.testing.assert_array_equal(batch.ranked_labels[0], [1, np.nan, np.nan, np.nan, np.nan])


@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from("abcdefgh"), st.integers(-2, 3), max_size=6),
            st.lists(st.sampled_from("abcdefghij"), max_size=12),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_matches_a_row_by_row_join(rows):
    """The vectorised join equals a plain per-sample dictionary lookup."""
    batch = _batch([(labels, ranking, None) for labels, ranking in rows])
    for i, (labels, ranking) in enumerate(rows):
        deduped = list(dict.fromkeys(ranking))
        assert batch.lengths[i] == len(deduped)
        expected = [labels.get(d, np.nan) for d in deduped]
        np.testing.assert_array_equal(batch.ranked_labels[i, : len(deduped)], expected)
        assert sorted(
            batch.label_values[i][~np.isnan(batch.label_values[i])], reverse=True
        ) == sorted(labels.values(), reverse=True)


@settings(deadline=None)  # each example validates and compiles a dataset
@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.integers(-2, 3), max_size=6),
    st.lists(st.sampled_from("abcdefghij"), max_size=10),
    st.integers(0, 4),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_one_sample_by_code_equals_compile(labels, ranking, k, wider, more_labels):
    """:meth:`Batch.one` (a table by code, for the scorer) compiles one sample exactly as
    :meth:`Batch.compile` does: every array, padded to a dataset's wider shape or to the
    sample's own, a ``metadata.k`` or none, a ranking with repeated ids or without."""
    columns = _batch([(labels, ranking, k or None)]).columns
    flat = Flat.of(columns)
    widths = {"retrieved": len(ranking) + wider, "relevance": len(labels) + more_labels}
    for shape in (Shape(widths, 3.0), Shape({}, 3.0)):
        expected = Batch.compile(columns, 7, shape, flat)
        found = Batch.one(columns, flat, len(columns.docs), shape, 7)
        assert found.shape == expected.shape and found.default_k == 7
        arrays = [
            f.name for f in attrs.fields(Batch) if isinstance(getattr(expected, f.name), np.ndarray)
        ]
        assert len(arrays) == 8  # doc_codes, positions, lengths, ... has_output
        for name in arrays:
            a, b = getattr(found, name), getattr(expected, name)
            assert a.dtype == b.dtype, name
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_one_rows_labels_sort_as_among_others():
    """_sorted_labels of one row (a slice, no mask) gives that row of many rows' sort, bit
    for bit: signed zeros, ties and padding included."""
    from engine.evaluation.batch import _sorted_labels

    rng = np.random.default_rng(11)
    rows = [rng.choice([-0.0, 0.0, 1.0, 2.0, -1.0, 0.5], size=n) for n in (0, 1, 7, 12, 30)]
    sizes = np.array([row.size for row in rows], dtype=np.int64)
    together = _sorted_labels(sizes, np.concatenate(rows), 32)
    for index, row in enumerate(rows):
        alone = _sorted_labels(sizes[index : index + 1], row, 32)
        assert alone.tobytes() == together[index : index + 1].tobytes()


def test_row_sort_paths_agree():
    """The int32 row sort and the argsort fallback (for vocabularies too large to pack a
    code and a column in 31 bits) give the same sorted codes and columns."""
    from engine.evaluation.batch import _sorted_rows

    codes = np.random.default_rng(5).integers(-1, 50, (40, 12)).astype(np.int32)
    fast_codes, fast_columns = _sorted_rows(codes, 50)
    slow_codes, slow_columns = _sorted_rows(codes, 2**30)
    real = fast_codes < 50
    np.testing.assert_array_equal(fast_codes[real], slow_codes[real])
    np.testing.assert_array_equal(fast_columns, slow_columns)
    expected = np.argsort(np.where(codes >= 0, codes, 99), axis=1, kind="stable")
    np.testing.assert_array_equal(fast_columns, expected)


def test_shared_values_are_computed_once_per_batch_and_key():
    """Batch.shared: one compute per (batch, key), whoever asks."""
    calls: list[str] = []

    def compute(name: str) -> str:
        calls.append(name)
        return name.upper()

    first, second = make_batch(SAMPLES, OUTPUTS), make_batch(SAMPLES, OUTPUTS)
    assert first.shared("a", lambda: compute("a")) == "A"
    assert first.shared("a", lambda: compute("never")) == "A"
    assert first.shared(("family", 2), lambda: compute("b")) == "B"
    assert second.shared("a", lambda: compute("c")) == "C"
    assert calls == ["a", "b", "c"]


def test_found_and_at_cutoff():
    """found(t): relevant documents so far at each rank; at_cutoff reads a running total at
    rank min(cutoff, width), 0 for a cutoff of 0, the whole row for None."""
    batch = _batch(
        [
            ({"a": 2, "b": 1, "c": 0}, ["c", "a", "x", "b"], None),  # relevant at ranks 2, 4
            ({"d": 1}, ["d"], None),  # one document, padded to width 4
            ({"e": 1}, None, None),  # no output
        ]
    )
    found = batch.found()
    assert found.tolist() == [[0, 1, 1, 2], [1, 1, 1, 1], [0, 0, 0, 0]]
    assert batch.found(2.0).tolist()[0] == [0, 1, 1, 1]
    assert not found.flags.writeable and batch.found() is found
    judged = batch.judged_found()  # "c" (label 0) is judged, "x" is not; padding is not
    assert judged.tolist() == [[1, 2, 2, 3], [1, 1, 1, 1], [0, 0, 0, 0]]
    assert not judged.flags.writeable and batch.judged_found() is judged
    relevant = batch.num_relevant()  # judged >= 1, retrieved or not: 2, 1 and 1
    assert relevant.tolist() == [2, 1, 1] and batch.num_relevant(2.0).tolist() == [1, 0, 0]
    assert not relevant.flags.writeable and batch.num_relevant(1) is relevant
    cutoffs = np.array([3, 100, 0])
    assert batch.at_cutoff(found, cutoffs).tolist() == [1, 1, 0]
    assert batch.at_cutoff(found, None).tolist() == [2, 1, 0]
    running = np.cumsum(np.where(batch.relevant(), 1.0 / batch.ranks, 0.0), axis=1)
    assert batch.at_cutoff(running, np.array([2, 1, 5])).tolist() == [1 / 2, 1.0, 0.0]


def test_at_k_reads_each_samples_top_k():
    """at_k(running, k): the running total at rank min(k, width), k from metadata.k, then
    the metric's k, then the default: by hand, with and without a sample's own k."""
    rows = [({"a": 1, "b": 1}, ["a", "x", "b"], None), ({"c": 1}, ["c", "y"], None)]
    batch = _batch(rows, default_k=2)
    found = batch.found()  # [[1, 1, 2], [1, 1, 1]]
    assert not batch.sets_k
    assert batch.at_k(found).tolist() == [1, 1]  # the default: 2
    assert batch.at_k(found, 3).tolist() == [2, 1] and batch.at_k(found, 50).tolist() == [2, 1]
    assert batch.at_k(found, 0).tolist() == [0, 0]
    assert batch.at_k(np.zeros((2, 0)), 3).tolist() == [0.0, 0.0]  # no rank at all
    owned = _batch([rows[0], ({"c": 1}, ["c", "y"], 1), ({"c": 1}, ["y", "c"], None)])
    assert owned.sets_k and owned.at_k(owned.found(), 3).tolist() == [2, 1, 1]
    assert owned.at_k(owned.found(), 1).tolist() == [1, 1, 0]
    found = batch.at_k(batch.found(), 3)
    assert found.flags.writeable  # a copy, not a view of the shared running total


def test_relevance_of_unjudged_and_padding_compares_quietly():
    """NaN labels (unjudged documents, padding) are not relevant, and comparing them sets
    no floating-point flag (numpy 2): with every flag raising, nothing is raised."""
    batch = _batch([({"a": 2, "b": 0}, ["x", "a", "b"], None), ({"c": 1}, ["c"], None)])
    with np.errstate(all="raise"):
        assert batch.relevant().tolist() == [[False, True, False], [True, False, False]]
        assert batch.num_relevant(2.0).tolist() == [1, 0]
