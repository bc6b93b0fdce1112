"""Compatibility and accuracy (metrics_plugins/agreement.py) and the count of queries by
hand. tests/test_ir_measures_providers.py pins them against ir_measures' compat, accuracy
and pytrec_eval providers on random queries."""

from __future__ import annotations

import math

import pytest

import engine


def _one(spec: str, qrels: dict, run: dict) -> list[float]:
    results = engine.Engine(config={}).evaluate_trec(qrels, run, [spec])
    return results.values(results.labels[0]).tolist()  # type: ignore[no-any-return]


class TestCompat:
    def test_overlap_with_the_ideal(self) -> None:
        """Ranking d1 d2, ideal d3 (label 2) d1 (label 1), depth 2, p = 0.5: overlaps 0 and
        1, so (0/1 + 0.5 * 1/2) / 1.5 = 1/6; the ideal with itself: (1 + 0.5) / 1.5 = 1."""
        qrels, run = {"q": {"d1": 1, "d3": 2}}, {"q": {"d1": 2.0, "d2": 1.0}}
        for spec in ("retrieval-compat(p=0.5)", "Compat(p=0.5)"):
            assert _one(spec, qrels, run) == [pytest.approx(1 / 6)]
        assert _one("retrieval-compat(p=0.5, normalize=False)", qrels, run) == [
            pytest.approx(1 / 6)
        ]

    def test_a_document_the_run_lacks_scores_zero(self) -> None:
        """d2 (label 1) is not retrieved and scores 0 in the ideal's order: after d1 when d1
        scores above 0 (overlaps 1, 1: (1 + 0.25) / 1.5), before it when d1 scores below
        (overlaps 0, 1: 0.25 / 1.5)."""
        qrels = {"q": {"d1": 1, "d2": 1}}
        assert _one("Compat(p=0.5)", qrels, {"q": {"d1": 1.0}}) == [pytest.approx(5 / 6)]
        assert _one("Compat(p=0.5)", qrels, {"q": {"d1": -1.0}}) == [pytest.approx(1 / 6)]
        # in the ranking's order (the default), a document the run lacks comes last
        assert _one("retrieval-compat(p=0.5)", qrels, {"q": {"d1": -1.0}}) == [pytest.approx(5 / 6)]

    def test_ties_by_doc_id_ascending(self) -> None:
        """b (relevant) and a tie: the provider ranks a first (doc id ascending)."""
        qrels, run = {"q": {"b": 1}}, {"q": {"a": 1.0, "b": 1.0}}
        # ranking a b, ideal b: overlaps 0, 1 over depth 2, 0.25 / 1.5; the ideal with
        # itself: overlaps 1, 1, 1.25 / 1.5; normalised 0.25 / 1.25
        assert _one("Compat(p=0.5)", qrels, run) == [pytest.approx(0.2)]
        # trec_eval's order (the default) ranks b first: overlaps 1, 1, as the ideal's
        assert _one("retrieval-compat(p=0.5)", qrels, run) == [pytest.approx(1.0)]


class TestAccuracy:
    def test_pairs_in_order(self) -> None:
        """n1 r1 n2 r2: of the four (relevant, non-relevant) pairs only (r1, n2) is in
        order: 1/4; in the first 2, the only pair (r1, n1) is not: 0."""
        qrels = {"q": {"r1": 1, "r2": 2, "n1": 0}}
        run = {"q": {"n1": 4.0, "r1": 3.0, "n2": 2.0, "r2": 1.0}}
        assert _one("retrieval-accuracy", qrels, run) == [pytest.approx(0.25)]
        assert _one("retrieval-accuracy@2", qrels, run) == [0.0]

    def test_na_without_a_pair(self) -> None:
        """Nothing relevant, or nothing else, retrieved: no pair, NA (ir_measures leaves the
        first out and its provider divides by zero on the second)."""
        qrels = {"q": {"r1": 1}, "p": {"r1": 1}}
        values = _one("Accuracy", qrels, {"q": {"x": 1.0}, "p": {"r1": 1.0}})
        assert all(math.isnan(v) for v in values)


def test_num_q_counts_the_queries_with_an_output() -> None:
    qrels = {"q": {"d1": 1}, "p": {"d1": 1}}
    assert _one("NumQ", qrels, {"q": {"d1": 1.0}}) == [1.0, 0.0]
    assert _one("retrieval-num-rel", qrels, {"q": {"d1": 1.0}}) == [1.0, 1.0]
    assert _one("NumRel", qrels, {"q": {"d1": 1.0}}) == [1.0, 0.0]  # as ir_measures


def test_signs_of_scores_with_a_query_without_documents() -> None:
    """A run that lists a query without documents beside scores below 0: the empty query
    scores 0, the other as by hand (d2, which the run lacks, goes before d1 scored -1)."""
    qrels = {"p": {"d1": 1, "d2": 1}, "q": {"d1": 1}}
    values = _one("Compat(p=0.5)", qrels, {"p": {"d1": -1.0}, "q": {}})
    assert values == [pytest.approx(1 / 6), 0.0]
