"""trec_eval 10's rbp, rbp_resid and unj_k (metrics_plugins/trec_rbp.py): every per-query
and ``all`` value of trec_eval's test collection (out.test.aq), hand derivations, the
conformance kit, and a differential check against a line-by-line transcription of
trec_eval 10's C code (m_rbp.c, gain_init.c, m_rbp_resid.c, m_unjudged.c over
form_res_rels.c) on random queries. pytrec_eval (trec_eval 9) has none of these measures,
so it cannot be the oracle here (see test_pytrec_eval_lacks_these_measures).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from conftest import run_of
from test_trec_eval_conformance import TOLERANCE

import engine
from engine import Batch, MetricParameterError
from engine.evaluation.metric import metric_label
from engine.evaluation.pipeline import aligned
from engine.evaluation.registry import Registry
from engine.io.frames import labels_from_dicts, run_from_dicts
from engine.testing import MetricConformance, make_batch
from metrics_plugins.trec import UnjudgedAtK
from metrics_plugins.trec_rbp import DEFAULT_P, RBP, RBPResidual

Qrels = dict[str, dict[str, int]]
Scored = dict[str, dict[str, float]]

UNJ_CUTOFFS = (5, 10, 20)  # trec_eval's default unj cutoffs


# -- trec_eval's test collection ---------------------------------------------------------------


#: trec_eval measure -> the slotwise metric instance that computes it (trec_eval defaults).
MEASURES: dict[str, Any] = {
    "rbp": RBP(),
    "rbp_resid": RBPResidual(),
    **{f"unj_{k}": UnjudgedAtK(k=k) for k in UNJ_CUTOFFS},
}


@pytest.fixture
def results(eng: engine.Engine, trec_collection: tuple) -> engine.Results:
    """The three measures evaluated through the public API, by instance."""
    qrels, run, _ = trec_collection
    return eng.dataset(samples=qrels).with_metrics(list(MEASURES.values())).evaluate(run)


class TestTrecEvalTestCollection:
    """slotwise reproduces out.test.aq (trec_eval 10, -m all_trec -q)."""

    def test_reference_holds_the_measures(self, trec_collection: tuple) -> None:
        """out.test.aq prints rbp, rbp_resid and unj_5/10/20 for 301-303 and all."""
        reference = trec_collection[2]
        for measure in MEASURES:
            assert set(reference[measure]) == {"301", "302", "303", "all"}, measure

    @pytest.mark.parametrize("measure", list(MEASURES))
    def test_measure(self, results: engine.Results, trec_collection: tuple, measure: str) -> None:
        """Per query and 'all' to the 4 printed decimals."""
        reference = trec_collection[2][measure]
        label = results.labels[list(MEASURES).index(measure)]
        assert results.scores is not None
        values = dict(zip(results.sample_ids, results.scores[label].tolist(), strict=True))
        assert set(values) == {"301", "302", "303"}
        for qid, value in values.items():
            assert abs(value - reference[qid]) <= TOLERANCE, (measure, qid, value, reference[qid])
        assert abs(results.aggregates[label] - reference["all"]) <= TOLERANCE

    def test_default_persistence_is_trec_evals(self, eng: engine.Engine, trec_collection: tuple):
        """p = 0.9 reproduces the file; neighbouring p do not (301: rbp 0.1861, resid 0.0610)."""
        qrels, run, reference = trec_collection
        batch = eng.dataset(samples=qrels).batch(run)
        at = batch.sample_ids.index("301")
        assert DEFAULT_P == 0.9
        for p in (0.8, 0.85, 0.95):
            assert abs(RBP(p=p).score(batch)[at] - reference["rbp"]["301"]) > 10 * TOLERANCE
            resid = RBPResidual(p=p).score(batch)[at]
            assert abs(resid - reference["rbp_resid"]["301"]) > 10 * TOLERANCE

    def test_binary_collection_cannot_tell_graded_from_binary_gain(
        self, eng: engine.Engine, trec_collection: tuple
    ) -> None:
        """qrels.test has labels 0 and 1 only, so trec_eval's graded gain (label / largest
        label, when that exceeds 1) equals binary gain at threshold 1 here: the graded rule
        is pinned by the transcription of m_rbp.c below, not by this file."""
        qrels, run, _ = trec_collection
        assert {v for labels in qrels.values() for v in labels.values()} == {0, 1}
        batch = eng.dataset(samples=qrels).batch(run)
        np.testing.assert_array_equal(RBP().score(batch), RBP(relevance_threshold=1).score(batch))


# -- by hand -------------------------------------------------------------------------------


def _batch(labels: dict[str, float], ranking: list[str], **metadata: Any) -> Batch:
    sample: dict[str, Any] = {"id": "q", "expected_output": {"relevance": labels}}
    if metadata:
        sample["metadata"] = metadata
    return make_batch([sample], {"q": ranking})


class TestHandDerived:
    """p = 0.5 keeps every weight a power of two, so the values are exact."""

    #: ranks 1..4: a (label 1), x (no label: unjudged), c (label 1), d (label 0)
    LABELS: ClassVar[dict[str, float]] = {"a": 1, "c": 1, "d": 0, "e": 1}
    RANKING: ClassVar[list[str]] = ["a", "x", "c", "d"]

    def test_rbp(self) -> None:
        """(1 - p) Σ gain_i p^(i-1) = 0.5 * (1·1 + 0·0.5 + 1·0.25 + 0·0.125) = 0.625.
        The relevant e, not retrieved, adds nothing (RBP has no recall component)."""
        batch = _batch(self.LABELS, self.RANKING)
        assert RBP(p=0.5).score(batch).tolist() == [0.625]

    def test_rbp_resid(self) -> None:
        """Unjudged x at rank 2 could add (1 - p) p^1 = 0.25; the unseen tail after rank 4
        adds (1 - p) Σ_{i>4} p^(i-1) = p^4 = 0.0625: residual 0.3125 (RBP lies in
        [0.625, 0.9375])."""
        batch = _batch(self.LABELS, self.RANKING)
        assert RBPResidual(p=0.5).score(batch).tolist() == [0.3125]

    def test_negative_label_is_unjudged_for_the_residual(self) -> None:
        """trec_eval reads a label < 0 as 'in the pool but unjudged': x labelled -1 at rank 2
        leaves the residual at 0.3125, and gives no gain."""
        batch = _batch({**self.LABELS, "x": -1}, self.RANKING)
        assert RBPResidual(p=0.5).score(batch).tolist() == [0.3125]
        assert RBP(p=0.5).score(batch).tolist() == [0.625]

    def test_residual_is_zero_without_unjudged_documents(self) -> None:
        """Every retrieved document judged: trec_eval leaves rbp_resid at 0, although the
        tail p^4 = 0.0625 is still unknown."""
        batch = _batch({**self.LABELS, "x": 0}, self.RANKING)
        assert RBPResidual(p=0.5).score(batch).tolist() == [0.0]

    def test_empty_ranking(self) -> None:
        """Nothing retrieved: rbp 0, rbp_resid 0 (nothing unjudged), unj 0."""
        batch = _batch(self.LABELS, [])
        assert RBP(p=0.5).score(batch).tolist() == [0.0]
        assert RBPResidual(p=0.5).score(batch).tolist() == [0.0]
        assert UnjudgedAtK(k=5).score(batch).tolist() == [0.0]

    def test_graded_gain_is_the_label_over_the_largest_label(self) -> None:
        """Labels a 2, c 1 and (unretrieved) e 4: trec_eval's gains 0..4 are normalised by 4,
        so a gains 0.5 and c 0.25: 0.5 * (0.5·1 + 0.25·0.25) = 0.28125. Binary at
        threshold 1: 0.625; at threshold 2 only a counts: 0.5."""
        batch = _batch({"a": 2, "c": 1, "d": 0, "e": 4}, self.RANKING)
        assert RBP(p=0.5).score(batch).tolist() == [0.28125]
        assert RBP(p=0.5, relevance_threshold=1).score(batch).tolist() == [0.625]
        assert RBP(p=0.5, relevance_threshold=2).score(batch).tolist() == [0.5]

    def test_largest_label_one_or_less_is_not_normalised(self) -> None:
        """No label above 1: gains are the labels themselves (0.5 * (1 + 0.25))."""
        batch = _batch({"a": 1, "c": 1, "d": -2}, self.RANKING)
        assert RBP(p=0.5).score(batch).tolist() == [0.625]

    def test_cutoff_is_trec_evals_max_docs_per_topic(self) -> None:
        """k = 2 (trec_eval -M 2) keeps a and x: rbp 0.5 * 1 = 0.5; residual
        0.5 * 0.5 (x) + p^2 = 0.5. metadata.k does the same."""
        assert RBP(p=0.5, k=2).score(_batch(self.LABELS, self.RANKING)).tolist() == [0.5]
        assert RBPResidual(p=0.5, k=2).score(_batch(self.LABELS, self.RANKING)).tolist() == [0.5]
        limited = _batch(self.LABELS, self.RANKING, k=2)
        assert RBP(p=0.5).score(limited).tolist() == [0.5]
        assert RBPResidual(p=0.5).score(limited).tolist() == [0.5]

    def test_unjudged_at_k_divides_by_k(self) -> None:
        """x (no label) and y (label -2) are unjudged: 1/2 at k = 2, 2/4 at k = 4, and 2/10 at
        k = 10 > 5 retrieved (trec_eval fills the rest with judged documents)."""
        batch = _batch({**self.LABELS, "y": -2}, [*self.RANKING[:2], "y", *self.RANKING[2:]])
        assert UnjudgedAtK(k=2).score(batch).tolist() == [0.5]
        assert UnjudgedAtK(k=4).score(batch).tolist() == [0.5]
        assert UnjudgedAtK(k=10).score(batch).tolist() == [0.2]

    @pytest.mark.parametrize("p", [1, 1.5, -0.1, float("nan"), float("inf"), "x", True])
    def test_invalid_persistence_is_rejected(self, p: Any) -> None:
        """p must be a number in [0, 1)."""
        with pytest.raises(MetricParameterError):
            RBP(p=p)
        with pytest.raises(MetricParameterError):
            RBPResidual(p=p)

    def test_labels_round_trip(self) -> None:
        """Non-default parameters appear in the label and parse back."""
        registry = Registry(entry_points=list)
        for cls in (RBP, RBPResidual, UnjudgedAtK):
            registry.register(cls)
        eng = engine.Engine(config={}, registry=registry)
        for metric in (RBP(p=0.8, relevance_threshold=2), RBPResidual(p=0.95, k=100)):
            label = metric_label(metric)
            assert eng.metric(label) == metric, label
        assert metric_label(RBP()) == "retrieval-rbp"


# -- the conformance kit ---------------------------------------------------------------------


class TestRBPConformance(MetricConformance):
    metric_class = RBP
    params: ClassVar[dict[str, Any]] = {"p": 0.8}
    check_entry_point = False  # registered by pyproject.toml once the entry point is added


class TestBinaryRBPConformance(MetricConformance):
    metric_class = RBP
    params: ClassVar[dict[str, Any]] = {"relevance_threshold": 2}
    check_entry_point = False


class TestRBPResidualConformance(MetricConformance):
    metric_class = RBPResidual
    params: ClassVar[dict[str, Any]] = {"p": 0.8}
    check_entry_point = False


class TestUnjudgedAtKConformance(MetricConformance):
    metric_class = UnjudgedAtK
    params: ClassVar[dict[str, Any]] = {"k": 3}
    check_entry_point = False


# -- against trec_eval 10's code, transcribed -------------------------------------------------


def trec_ranking(run: dict[str, float], max_docs: int | None = None) -> list[str]:
    """form_res_rels.c: sort by score descending, ties by docno descending (strcmp), then
    keep the first max_num_docs_per_topic (-M)."""
    ranked = sorted(sorted(run, reverse=True), key=lambda d: -run[d])  # stable
    return ranked if max_docs is None else ranked[:max_docs]


def trec_rel_list(qrels: dict[str, int], ranking: list[str]) -> list[int]:
    """results_rel_list: the label; RELVALUE_NONPOOL (-1) without one; RELVALUE_UNJUDGED
    (-2) for a label < 0."""
    return [-1 if d not in qrels else (-2 if qrels[d] < 0 else qrels[d]) for d in ranking]


def trec_rbp(qrels: dict[str, int], ranking: list[str], p: float) -> float:
    """m_rbp.c with gain_init.c's default gains (min and max taken over the gains, as the
    code evidently means: it reads them uninitialised)."""
    counts = [
        sum(1 for v in qrels.values() if v == level) for level in range(max(qrels.values()) + 1)
    ]
    levels = max((i + 1 for i, n in enumerate(counts) if n), default=0)  # num_rel_levels
    gains = {level: float(level) for level in range(levels)}
    low, high = min(gains.values(), default=0.0), max(gains.values(), default=0.0)
    if low < 0 or high > 1:
        gains = {level: (g - low) / (high - low) for level, g in gains.items()}
    total, cur_p = 0.0, 1.0
    for rel in trec_rel_list(qrels, ranking):
        gain = gains.get(rel, 0.0)
        if gain != 0:
            total += gain * cur_p
        cur_p = cur_p * p
    return (1.0 - p) * total


def trec_rbp_resid(qrels: dict[str, int], ranking: list[str], p: float) -> float:
    """m_rbp_resid.c: the value stays 0 unless a retrieved document is unjudged."""
    unjudged, total, cur_p = 0, 0.0, 1.0
    for rel in trec_rel_list(qrels, ranking):
        if rel < 0:
            unjudged += 1
            total += cur_p
        cur_p = cur_p * p
    return cur_p + (1 - p) * total if unjudged else 0.0


def trec_unj(qrels: dict[str, int], ranking: list[str], cutoff: int) -> float:
    """m_unjudged.c for one cutoff."""
    unjudged = 0
    for i, rel in enumerate(trec_rel_list(qrels, ranking)):
        if i == cutoff:
            return unjudged / i
        if rel in (-1, -2):
            unjudged += 1
    return unjudged / cutoff


def random_collection(seed: int, queries: int) -> tuple[Qrels, Scored]:
    """Seeded qrels and scored runs: graded labels 0-4, labels -1 and -2, unjudged
    documents, many tied scores, short and empty runs, queries without relevant or with
    only negative labels (trec_eval itself fails on a query whose labels are all <= -2)."""
    rng = np.random.default_rng(seed)
    qrels: Qrels = {}
    runs: Scored = {}
    for q in range(queries):
        qid = f"q{q}"
        pool = [f"d{j}" for j in rng.permutation(160)[:120]]  # "d10" < "d9" as strings
        n_judged = int(rng.integers(1, 40))
        labels = rng.choice([-2, -1, 0, 0, 0, 1, 1, 2, 3, 4], size=n_judged)
        shape = rng.random()
        if shape < 0.1:
            labels = np.minimum(labels, 0)  # no relevant document
        elif shape < 0.15:
            labels = np.minimum(labels, 1)  # binary
        elif shape < 0.18:
            labels = -np.ones_like(labels)  # only negative labels
        judged = rng.choice(len(pool), size=n_judged, replace=False)
        qrels[qid] = {pool[j]: int(g) for j, g in zip(judged, labels, strict=True)}
        length = 0 if rng.random() < 0.05 else int(rng.integers(1, 120))
        scores = np.round(rng.normal(size=length), 1)  # many ties
        runs[qid] = {pool[j]: float(s) for j, s in zip(range(length), scores, strict=True)}
    return qrels, runs


@pytest.fixture(scope="module")
def random_data() -> tuple[Qrels, Scored, Batch]:
    """2,000 random queries and their Batch, compiled by the engine's columnar readers."""
    qrels, runs = random_collection(seed=20250607, queries=2_000)
    samples, outputs = labels_from_dicts(qrels), run_from_dicts(runs)
    assert samples is not None and outputs is not None
    return qrels, runs, Batch.compile(aligned(samples, outputs)[0])


class TestAgainstTrecEvalCode:
    """slotwise equals the transcribed C per query, bit for bit, on 2,000 random queries."""

    def test_collection_covers_the_edge_cases(self, random_data: tuple) -> None:
        qrels, runs, batch = random_data
        assert batch.sample_ids == list(qrels)
        assert any(len(set(s.values())) < len(s) for s in runs.values())  # ties
        assert any(not s for s in runs.values())  # empty runs
        assert any(set(s) - set(qrels[q]) for q, s in runs.items())  # unjudged retrieved
        assert any(max(v.values()) < 0 for v in qrels.values())  # only negative labels
        assert any(max(v.values()) == 0 for v in qrels.values())  # no relevant document
        assert any(max(v.values()) == 1 for v in qrels.values())  # binary (no normalising)
        assert any(max(v.values()) > 1 for v in qrels.values())  # graded (normalised)
        judged_retrieved = [v for q, s in runs.items() for d, v in qrels[q].items() if d in s]
        assert {-2, -1, 0, 1, 2, 3, 4} <= set(judged_retrieved)

    def test_ranking_is_trec_evals(self, random_data: tuple) -> None:
        """The engine orders each run as form_res_rels.c does (ties: docno descending)."""
        _, runs, _ = random_data
        outputs = run_from_dicts(runs)
        assert outputs is not None
        ranked = run_of(outputs)
        assert all(ranked.get(q, []) == trec_ranking(s) for q, s in runs.items())

    @pytest.mark.parametrize("p", [DEFAULT_P, 0.5, 0.95])
    @pytest.mark.parametrize("k", [None, 3, 20])
    def test_rbp_and_residual(self, random_data: tuple, p: float, k: int | None) -> None:
        """rbp and rbp_resid, uncut and at k (trec_eval -M k)."""
        qrels, runs, batch = random_data
        ids = batch.sample_ids
        expected_rbp = [trec_rbp(qrels[q], trec_ranking(runs[q], k), p) for q in ids]
        expected_resid = [trec_rbp_resid(qrels[q], trec_ranking(runs[q], k), p) for q in ids]
        np.testing.assert_array_equal(RBP(p=p, k=k).score(batch), expected_rbp)
        np.testing.assert_array_equal(RBPResidual(p=p, k=k).score(batch), expected_resid)

    @pytest.mark.parametrize("k", [1, 3, 5, 10, 20, 100])
    def test_unjudged_at_k(self, random_data: tuple, k: int) -> None:
        qrels, runs, batch = random_data
        expected = [trec_unj(qrels[q], trec_ranking(runs[q]), k) for q in batch.sample_ids]
        np.testing.assert_array_equal(UnjudgedAtK(k=k).score(batch), expected)

    def test_chunks_score_as_the_whole(self, random_data: tuple) -> None:
        """A sample scores the same alone as in the whole batch, bit for bit (row_sums)."""
        qrels, runs, batch = random_data
        metrics = [RBP(), RBPResidual(), UnjudgedAtK(k=10)]
        whole = [m.score(batch) for m in metrics]
        for i in range(0, len(qrels), 397):
            qid = batch.sample_ids[i]
            samples = labels_from_dicts({qid: qrels[qid]})
            outputs = run_from_dicts({qid: runs[qid]})
            assert samples is not None and outputs is not None
            alone = Batch.compile(aligned(samples, outputs)[0])
            for metric, values in zip(metrics, whole, strict=True):
                assert metric.score(alone).tolist() == [values[i]], (metric, qid)


def test_pytrec_eval_lacks_these_measures() -> None:
    """pytrec_eval wraps trec_eval 9, which has no rbp, rbp_resid or unj: the differential
    oracle above is the transcription of trec_eval 10's code instead."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    assert not {"rbp", "rbp_resid", "unj"} & set(pytrec_eval.supported_measures)
