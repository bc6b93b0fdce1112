"""Differential tests: every classic metric against pytrec_eval (trec_eval 9.x), per query, to 1e-9.

The random data is seeded and covers graded labels 0-3, negative labels, tied scores
(ordered by trec_eval's rule by the engine's columnar run reader), runs shorter than k,
empty runs, and queries without relevant documents. Metrics without a pytrec_eval
equivalent (judged, ERR, DCG) are pinned by hand in test_retrieval_metrics.py.

Every generated query has a label >= 0: trec_eval 9 (and so pytrec_eval) sizes an array by
the largest label + 1 and corrupts memory when all labels of a query are negative
(see docs/metrics.md); slotwise's value for such a query is pinned by hand instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from conftest import run_of
from trec_names import trec_measures

import engine
from engine import Batch
from engine.evaluation.pipeline import aligned
from engine.io.frames import labels_from_dicts, run_from_dicts
from metrics_plugins.retrieval import _iprec_at_recall

pytrec_eval = pytest.importorskip("pytrec_eval")

CUTOFFS = (1, 3, 5, 10, 20, 100)
LEVELS = ("0.00", "0.10", "0.20", "0.30", "0.40", "0.50", "0.60", "0.70", "0.80", "0.90", "1.00")
TOLERANCE = 1e-9

Qrels = dict[str, dict[str, int]]
Scored = dict[str, dict[str, float]]


MEASURES = trec_measures(CUTOFFS, CUTOFFS)
GRADED = {name for name in MEASURES if name.startswith("ndcg")}
PYTREC_NAMES = {
    "map",
    "Rprec",
    "recip_rank",
    "ndcg",
    "iprec_at_recall",
    *(f"{m}.{','.join(map(str, CUTOFFS))}" for m in ("P", "recall", "ndcg_cut", "map_cut")),
    f"success.{','.join(map(str, CUTOFFS))}",
}


def random_collection(seed: int, queries: int) -> tuple[Qrels, Scored]:
    """Seeded qrels and scored runs exercising the edge cases trec_eval defines."""
    rng = np.random.default_rng(seed)
    qrels: Qrels = {}
    runs: Scored = {}
    for q in range(queries):
        qid = f"q{q}"
        pool = [f"d{j}" for j in rng.permutation(160)[:120]]  # "d10" < "d9" as strings
        n_judged = int(rng.integers(1, 40))
        labels = rng.choice([-2, -1, 0, 0, 0, 1, 1, 2, 3], size=n_judged)
        if rng.random() < 0.1:  # no relevant document at all
            labels = np.minimum(labels, 0)
        if labels.max() < 0:  # trec_eval crashes when every label of a query is < -1
            labels[0] = 0
        judged = rng.choice(len(pool), size=n_judged, replace=False)
        qrels[qid] = {pool[j]: int(g) for j, g in zip(judged, labels, strict=True)}
        length = 0 if rng.random() < 0.05 else int(rng.integers(1, 120))  # empty and short runs
        scores = np.round(rng.normal(size=length), 1)  # many ties
        runs[qid] = {pool[j]: float(s) for j, s in zip(range(length), scores, strict=True)}
    return qrels, runs


def compile_batch(qrels: Qrels, runs: Scored) -> Batch:
    """The Batch the engine scores: samples and rankings (in trec_eval order) from
    pytrec_eval's dict shapes by the columnar readers that ``Engine.evaluate_trec`` uses."""
    samples, outputs = labels_from_dicts(qrels), run_from_dicts(runs)
    assert samples is not None and outputs is not None
    return Batch.compile(aligned(samples, outputs)[0])


def _slotwise(batch: Batch, specs: list[str]) -> dict[str, np.ndarray]:
    eng = engine.Engine(config={})
    return {spec: eng.metric(spec).score(batch) for spec in specs}


def _compare(
    ids: list[str],
    ours: Mapping[str, np.ndarray],
    theirs: Mapping[str, Mapping[str, float]],
    names: Mapping[str, str],
) -> list[str]:
    """Every (query, measure) where slotwise and pytrec_eval differ by more than 1e-9.

    pytrec_eval leaves out queries with an empty run; trec_eval -c scores them 0.
    """
    failures = []
    for name, spec in names.items():
        expected = np.array([theirs.get(qid, {}).get(name, 0.0) for qid in ids])
        got = ours[spec]
        for i in np.flatnonzero(~(np.abs(got - expected) <= TOLERANCE)):
            failures.append(f"{ids[i]} {name}: slotwise {got[i]!r} pytrec_eval {expected[i]!r}")
    return failures


@pytest.fixture(scope="module")
def collection() -> tuple[Qrels, Scored]:
    """10,000 seeded random queries."""
    return random_collection(seed=20240611, queries=10_000)


@pytest.fixture(scope="module")
def batch(collection: tuple[Qrels, Scored]) -> Batch:
    """The collection compiled once."""
    return compile_batch(*collection)


@pytest.fixture(scope="module")
def reference(collection: tuple[Qrels, Scored]) -> dict[int, dict[str, Any]]:
    """pytrec_eval's per-query values at relevance_level 1 and 2."""
    qrels, runs = collection
    return {
        level: pytrec_eval.RelevanceEvaluator(qrels, PYTREC_NAMES, relevance_level=level).evaluate(
            runs
        )
        for level in (1, 2)
    }


class TestAgainstPytrecEval:
    """slotwise equals pytrec_eval per query on 10,000 random queries."""

    def test_collection_covers_the_edge_cases(self, collection: tuple[Qrels, Scored]) -> None:
        """The random data really holds ties, negatives, empty/short runs, no-relevant queries."""
        qrels, runs = collection
        assert len(qrels) >= 10_000
        assert any(len(set(s.values())) < len(s) for s in runs.values())
        assert any(min(labels.values()) < 0 for labels in qrels.values())
        assert any(not s for s in runs.values())
        assert any(0 < len(s) < 5 for s in runs.values())
        assert any(max(labels.values()) <= 0 for labels in qrels.values())
        assert {3, 2, 1, 0} <= {g for labels in qrels.values() for g in labels.values()}

    @pytest.mark.parametrize("level", [1, 2])
    def test_every_measure_per_query(
        self,
        batch: Batch,
        reference: dict[int, dict[str, Any]],
        level: int,
    ) -> None:
        """map, map_cut, recip_rank, P, recall, Rprec, success, ndcg, ndcg_cut agree to 1e-9
        (binary measures at relevance_threshold = pytrec_eval's relevance_level)."""
        names = {
            name: spec if name in GRADED else f"{spec}(relevance_threshold={level})"
            for name, spec in MEASURES.items()
        }
        if level != 1:  # graded gains do not depend on the threshold
            names = {n: s for n, s in names.items() if n not in GRADED}
        assert set(reference[level]) == set(batch.sample_ids)
        assert set(names) <= set(reference[level]["q0"])
        ours = _slotwise(batch, list(names.values()))
        assert _compare(batch.sample_ids, ours, reference[level], names)[:20] == []

    @pytest.mark.parametrize("level", [1, 2])
    def test_iprec_points_per_query(
        self, batch: Batch, reference: dict[int, dict[str, Any]], level: int
    ) -> None:
        """The private 11-point helper equals iprec_at_recall_* (trec_eval 9 rounding)."""
        ours = _iprec_at_recall(batch, float(level), "trec_eval9")
        theirs = np.array(
            [
                [reference[level][q][f"iprec_at_recall_{c}"] for c in LEVELS]
                for q in batch.sample_ids
            ]
        )
        empty = batch.lengths == 0  # pytrec_eval: 0/0 = NaN; trec_eval -c: 0
        assert not np.isnan(theirs[~empty]).any()
        np.testing.assert_allclose(ours[~empty], theirs[~empty], rtol=0, atol=TOLERANCE)
        assert (ours[empty] == 0).all()

    @pytest.mark.parametrize("level", [1, 2])
    def test_auc_pr_is_the_area_under_pytrec_evals_iprec_points(
        self,
        batch: Batch,
        reference: dict[int, dict[str, Any]],
        level: int,
    ) -> None:
        """retrieval-auc-pr = trapezoid area under iprec_at_recall_0.00..1.00."""
        spec = f"retrieval-auc-pr(relevance_threshold={level})"
        ids = batch.sample_ids
        ours = _slotwise(batch, [spec])
        points = np.array(
            [
                [reference[level].get(q, {}).get(f"iprec_at_recall_{c}", 0.0) for c in LEVELS]
                for q in ids
            ]
        )
        # pytrec_eval's iprec of an empty run is 0/0 = NaN; trec_eval -c (and slotwise) say 0
        assert (np.isnan(points).any(axis=1) <= (batch.lengths == 0)).all()
        points = np.nan_to_num(points, nan=0.0)
        area = (points[:, :-1] + points[:, 1:]).sum(axis=1) * 0.1 / 2
        np.testing.assert_allclose(ours[spec], area, rtol=0, atol=TOLERANCE)


def _one(qrels: Qrels, runs: Scored, relevance_level: int = 1) -> list[str]:
    """Compare every measure on a tiny collection; returns the differences."""
    names = {
        name: spec if name in GRADED else f"{spec}(relevance_threshold={relevance_level})"
        for name, spec in MEASURES.items()
    }
    batch = compile_batch(qrels, runs)
    ours = _slotwise(batch, list(names.values()))
    theirs = pytrec_eval.RelevanceEvaluator(
        qrels, PYTREC_NAMES, relevance_level=relevance_level
    ).evaluate(runs)
    return _compare(batch.sample_ids, ours, theirs, names)


class TestGainMap:
    """trec_eval's ndcg with a gain map (``ndcg.1=3,2=9``) equals plain ndcg on qrels whose
    labels were replaced by their gains, which pytrec_eval computes (its own parser cannot
    read level=gain pairs)."""

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_mapped_gains_equal_relabelled_qrels(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        qrels, runs = random_collection(seed=seed, queries=2_000)
        qrels = {q: {d: max(g, 0) for d, g in labels.items()} for q, labels in qrels.items()}
        gains = {level: int(rng.integers(0, 20)) for level in (0, 1, 2, 3) if rng.random() < 0.7}
        relabelled = {
            q: {d: gains.get(g, g) for d, g in labels.items()} for q, labels in qrels.items()
        }
        spec = f"retrieval-ndcg-at-k(k=1000000000, gains={gains!r})"
        batch = compile_batch(qrels, runs)
        theirs = pytrec_eval.RelevanceEvaluator(relabelled, {"ndcg"}).evaluate(runs)
        failures = _compare(batch.sample_ids, _slotwise(batch, [spec]), theirs, {"ndcg": spec})
        assert failures[:20] == []


class TestEdgeCases:
    """One small collection per edge case, compared measure by measure with pytrec_eval."""

    def test_tied_scores_are_ordered_by_docid_descending(self) -> None:
        """Equal scores: trec_eval ranks the larger doc id (string order) first."""
        qrels = {"q": {"d10": 1, "d9": 0, "d2": 2}}
        runs = {"q": {"d10": 1.0, "d9": 1.0, "d2": 1.0, "d1": 1.0}}
        assert run_of(run_from_dicts(runs)) == {"q": ["d9", "d2", "d10", "d1"]}
        assert _one(qrels, runs) == []

    def test_negative_labels_are_judged_non_relevant(self) -> None:
        """Labels < 0 add no gain and do not count in |Rel|."""
        qrels = {"q": {"a": -1, "b": 2, "c": -2, "d": 1}}
        runs = {"q": {"a": 4.0, "c": 3.0, "b": 2.0, "d": 1.0}}
        assert _one(qrels, runs) == []

    def test_run_shorter_than_k(self) -> None:
        """Two retrieved documents: P@k still divides by k, recall/ndcg use what is there."""
        qrels = {"q": {"a": 1, "b": 3, "c": 2}}
        runs = {"q": {"b": 2.0, "x": 1.0}}
        assert _one(qrels, runs) == []

    def test_empty_run_scores_zero(self) -> None:
        """A query with an empty run is scored 0 everywhere (trec_eval -c)."""
        qrels = {"q": {"a": 1}, "r": {"b": 1}}
        runs = {"q": {"a": 1.0}, "r": {}}
        assert _one(qrels, runs) == []

    def test_query_without_relevant_documents(self) -> None:
        """No label >= 1: every measure is 0, not NA."""
        qrels = {"q": {"a": 0, "b": -1}}
        runs = {"q": {"a": 2.0, "b": 1.0, "c": 0.5}}
        assert _one(qrels, runs) == []

    def test_relevance_threshold_two_matches_relevance_level(self) -> None:
        """relevance_threshold=2 binarises as pytrec_eval's relevance_level=2 (trec_eval -l2)."""
        qrels = {"q": {"a": 1, "b": 2, "c": 3, "d": 1}}
        runs = {"q": {"a": 5.0, "d": 4.0, "b": 3.0, "x": 2.0, "c": 1.0}}
        assert _one(qrels, runs, relevance_level=2) == []
