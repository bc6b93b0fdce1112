"""The classic retrieval family, pinned by hand derivations.

Every expected value is written as the arithmetic that follows from the definition in
METRICS.md (ranks are 1-based; log2(1 + rank) discounts), never taken from the code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from math import log2
from typing import Any, ClassVar

import numpy as np
import pytest

import engine
from engine import Batch, MetricParameterError
from engine.evaluation.metric import metric_label
from engine.testing import make_batch
from metrics_plugins.retrieval import RECALL_LEVELS, _iprec_at_recall

Case = tuple[Mapping[str, float] | Sequence[str], Sequence[str] | None, int | None]

ALL_CLASSIC = [
    "retrieval-hit-at-k",
    "retrieval-precision-at-k",
    "retrieval-recall-at-k",
    "retrieval-r-precision",
    "retrieval-mrr",
    "retrieval-map",
    "retrieval-dcg-at-k",
    "retrieval-ndcg-at-k",
    "retrieval-err-at-k",
    "retrieval-auc-pr",
    "retrieval-judged-at-k",
]


def compile_cases(cases: Sequence[Case], default_k: int = 5) -> Batch:
    """A Batch from (labels, ranking or None for no output, metadata.k or None) cases."""
    samples, outputs = [], {}
    for i, (labels, ranking, k) in enumerate(cases):
        raw: dict[str, Any] = {"id": f"s{i}", "expected_output": labels}
        if k is not None:
            raw["metadata"] = {"k": k}
        samples.append(raw)
        if ranking is not None:
            outputs[f"s{i}"] = list(ranking)
    return make_batch(samples, outputs, default_k=default_k)


def score(spec: str, cases: Sequence[Case], default_k: int = 5, **params: Any) -> list[float]:
    """Per-sample values of ``spec`` on the cases."""
    metric = engine.Engine(config={}).metric(spec, **params)
    return metric.score(compile_cases(cases, default_k)).tolist()


SEED: Case = (["doc-3", "doc-9"], ["doc-7", "doc-3", "doc-1", "doc-9", "doc-2"], None)


class TestSeedExample:
    """Relevant {doc-3, doc-9}, k = 5, ranking [doc-7, doc-3, doc-1, doc-9, doc-2]."""

    @pytest.mark.parametrize(
        ("spec", "expected"),
        [
            ("retrieval-hit-at-k@5", 1.0),
            ("retrieval-recall-at-k@5", 2 / 2),
            ("retrieval-mrr", 1 / 2),
            ("retrieval-ndcg-at-k@5", (1 / log2(3) + 1 / log2(5)) / (1 + 1 / log2(3))),
            ("retrieval-precision-at-k@5", 2 / 5),
            ("retrieval-map", (1 / 2 + 2 / 4) / 2),
            ("retrieval-r-precision", 1 / 2),  # R = 2: doc-7, doc-3 -> one relevant
            ("retrieval-dcg-at-k@5", 1 / log2(3) + 1 / log2(5)),
            ("retrieval-judged-at-k@5", 2 / 5),
            # binary labels, g_max = 1: R = (2^1 - 1) / 2^1 = 1/2 at ranks 2 and 4
            ("retrieval-err-at-k@5", (1 / 2) * (1 / 2) + (1 / 4) * (1 / 2) * (1 / 2)),
            # precision 1/2 at both relevant ranks: every interpolated point is 1/2
            ("retrieval-auc-pr", 1 / 2),
        ],
    )
    def test_value(self, spec: str, expected: float) -> None:
        """Each metric's value on the seed example."""
        assert score(spec, [SEED]) == pytest.approx([expected], abs=1e-12)

    def test_through_the_public_api(self, eng: engine.Engine) -> None:
        """Same numbers from Dataset.with_metrics(...).evaluate(...)."""
        dataset = eng.dataset(samples=[{"id": "q", "expected_output": ["doc-3", "doc-9"]}])
        results = dataset.with_metrics(["retrieval-precision-at-k", "retrieval-map"]).evaluate(
            {"q": SEED[1]}
        )
        assert results.per_sample()[0]["scores"] == pytest.approx(
            {"retrieval-precision-at-k": 2 / 5, "retrieval-map": (1 / 2 + 2 / 4) / 2}
        )


class TestPrecisionAtK:
    """|D_k ∩ Rel| / k."""

    @pytest.mark.parametrize(
        ("case", "k", "expected"),
        [
            ((["a"], ["a"], None), 5, 1 / 5),  # divides by k even when n < k
            ((["a", "b"], ["x", "a", "b"], None), 2, 1 / 2),
            ((["a", "b"], ["a", "b"], 1), None, 1 / 1),  # metadata.k cuts an open k
            ((["a", "b"], ["a", "b"], 1), 5, 2 / 5),  # an explicit k is k, metadata.k aside
            (({"a": 0}, ["a"], None), 1, 0 / 1),
            ((["a"], [], None), 3, 0 / 3),
        ],
    )
    def test_value(self, case: Case, k: int, expected: float) -> None:
        """Hand-counted precision at k."""
        assert score("retrieval-precision-at-k", [case], k=k) == [pytest.approx(expected)]

    def test_default_k_from_config(self) -> None:
        """No k anywhere: the configured default k (here 2) is the divisor."""
        assert score("retrieval-precision-at-k", [(["a"], ["a", "b", "c"], None)], default_k=2) == [
            1 / 2
        ]

    def test_relevance_threshold(self) -> None:
        """threshold 2: only the grade-2 document counts."""
        case = ({"a": 1, "b": 2}, ["a", "b"], None)
        assert score("retrieval-precision-at-k@2", [case], relevance_threshold=2) == [1 / 2]


class TestRPrecision:
    """|D_R ∩ Rel| / R."""

    @pytest.mark.parametrize(
        ("case", "expected"),
        [
            ((["a", "b", "c"], ["x", "a", "b", "c"], None), 2 / 3),
            ((["a", "b", "c", "d"], ["a"], None), 1 / 4),  # shorter run than R
            (({"a": 0, "b": -1}, ["a", "b"], None), 0.0),  # R = 0
            ((["a"], ["x", "a"], 1), 0 / 1),  # metadata.k does not change R
        ],
    )
    def test_value(self, case: Case, expected: float) -> None:
        """Hand-counted R-precision."""
        assert score("retrieval-r-precision", [case]) == [pytest.approx(expected)]

    def test_relevance_threshold(self) -> None:
        """threshold 2: R = 1 (only b); top 1 is a -> 0."""
        case = ({"a": 1, "b": 2}, ["a", "b"], None)
        assert score("retrieval-r-precision", [case], relevance_threshold=2) == [0.0]


class TestMRR:
    """1 / rank of the first relevant document; cut only by k, or metadata.k when k is open."""

    @pytest.mark.parametrize(
        ("case", "k", "expected"),
        [
            ((["a"], ["x", "y", "a"], None), None, 1 / 3),
            ((["a"], ["x", "y", "a"], 2), None, 0.0),  # metadata.k = 2 cuts it off
            ((["a"], ["x", "y", "a"], None), 2, 0.0),
            ((["a"], ["x", "y", "a"], 3), 1, 0.0),  # an explicit k wins over metadata.k
            (({"a": -1}, ["a"], None), None, 0.0),
        ],
    )
    def test_value(self, case: Case, k: int | None, expected: float) -> None:
        """Hand-derived reciprocal ranks."""
        assert score("retrieval-mrr", [case], k=k) == [pytest.approx(expected)]

    def test_config_default_k_does_not_cut(self) -> None:
        """default_k = 1 applies to cut-off metrics only: MRR still sees rank 3."""
        assert score("retrieval-mrr", [(["a"], ["x", "y", "a"], None)], default_k=1) == [
            pytest.approx(1 / 3)
        ]

    def test_mixed_metadata_k(self) -> None:
        """One sample with metadata.k, one without: only the first is cut."""
        cases = [(["a"], ["x", "y", "a"], 2), (["a"], ["x", "y", "a"], None)]
        assert score("retrieval-mrr", cases) == [0.0, pytest.approx(1 / 3)]


class TestAveragePrecision:
    """Σ P@i over relevant ranks i (≤ cut) / |Rel|."""

    @pytest.mark.parametrize(
        ("case", "k", "expected"),
        [
            ((["a", "b", "c"], ["a", "x", "b", "y"], None), None, (1 / 1 + 2 / 3) / 3),
            ((["a", "b", "c"], ["a", "x", "b", "y"], None), 2, (1 / 1) / 3),  # map_cut_2
            ((["a", "b", "c"], ["a", "x", "b", "y"], 1), None, (1 / 1) / 3),  # metadata.k
            ((["a", "b", "c"], ["a", "x", "b", "y"], 3), 1, (1 / 1) / 3),  # explicit k wins
            (({"a": 0}, ["a"], None), None, 0.0),  # no relevant document
            ((["a"], None, None), None, 0.0),  # no output: an empty ranking
        ],
    )
    def test_value(self, case: Case, k: int | None, expected: float) -> None:
        """Hand-derived AP."""
        assert score("retrieval-map", [case], k=k) == [pytest.approx(expected)]

    def test_config_default_k_does_not_cut(self) -> None:
        """default_k = 1: AP still counts the relevant document at rank 2."""
        assert score("retrieval-map", [(["a"], ["x", "a"], None)], default_k=1) == [1 / 2]

    def test_relevance_threshold(self) -> None:
        """threshold 2: Rel = {b}, at rank 2 -> P@2 = 1/2."""
        case = ({"a": 1, "b": 2}, ["a", "b"], None)
        assert score("retrieval-map", [case], relevance_threshold=2) == [1 / 2]


GRADED: Case = ({"a": 3, "b": 1, "c": -2, "d": 0}, ["c", "a", "x", "b"], None)


class TestDCGAndNDCG:
    """DCG@k = Σ gain_i / log2(i + 1); nDCG divides by the ideal DCG@k."""

    @pytest.mark.parametrize(
        ("spec", "expected"),
        [
            ("retrieval-dcg-at-k@4", 0 + 3 / log2(3) + 0 + 1 / log2(5)),  # c: -2 -> gain 0
            ("retrieval-dcg-at-k@2", 3 / log2(3)),
            ("retrieval-dcg-at-k@4(gain=exponential)", (2**3 - 1) / log2(3) + (2**1 - 1) / log2(5)),
            ("retrieval-ndcg-at-k@4", (3 / log2(3) + 1 / log2(5)) / (3 + 1 / log2(3))),
            (
                "retrieval-ndcg-at-k@4(gain=exponential)",
                (7 / log2(3) + 1 / log2(5)) / (7 + 1 / log2(3)),
            ),
            ("retrieval-ndcg-at-k@1", 0 / 3),
        ],
    )
    def test_value(self, spec: str, expected: float) -> None:
        """Labels {a: 3, b: 1, c: -2, d: 0}, ranking [c, a, x, b]."""
        assert score(spec, [GRADED]) == [pytest.approx(expected, abs=1e-12)]

    def test_no_gain_anywhere(self) -> None:
        """IDCG = 0 -> nDCG 0; DCG of no gains is 0."""
        case = ({"a": 0, "b": -1}, ["a", "b"], None)
        assert score("retrieval-ndcg-at-k@2", [case]) == [0.0]
        assert score("retrieval-dcg-at-k@2", [case]) == [0.0]


class TestGainMap:
    """``gains`` maps labels to gains of their own (trec_eval ``ndcg.1=3,2=9``); other
    labels keep the linear or exponential gain, unjudged documents gain nothing."""

    @pytest.mark.parametrize(
        ("spec", "expected"),
        [
            # ranking c(-2), a(3), x(unjudged), b(1); a -> 10, b -> 0.5: DCG 10/log2 3 + 0.5/log2 5
            ("retrieval-dcg-at-k@4(gains={3: 10, 1: 0.5})", 10 / log2(3) + 0.5 / log2(5)),
            # the ideal ranking orders the mapped gains: a (10), b (0.5); d (0) adds nothing
            (
                "retrieval-ndcg-at-k@4(gains={3: 10, 1: 0.5})",
                (10 / log2(3) + 0.5 / log2(5)) / (10 + 0.5 / log2(3)),
            ),
            # b mapped above a reorders the ideal: b (5) first, then a (3, unmapped)
            (
                "retrieval-ndcg-at-k@4(gains={1: 5})",
                (3 / log2(3) + 5 / log2(5)) / (5 + 3 / log2(3)),
            ),
            # a negative gain lowers DCG and stays out of the ideal; d (label 0) mapped to 2
            (
                "retrieval-ndcg-at-k@4(gains={3: -1, 0: 2})",
                (-1 / log2(3) + 1 / log2(5)) / (2 + 1 / log2(3)),
            ),
            # the map replaces the exponential gain of the labels it names, only those
            (
                "retrieval-ndcg-at-k@4(gain=exponential, gains={1: 4})",
                (7 / log2(3) + 4 / log2(5)) / (7 + 4 / log2(3)),
            ),
        ],
    )
    def test_value(self, spec: str, expected: float) -> None:
        """Labels {a: 3, b: 1, c: -2, d: 0}, ranking [c, a, x, b]."""
        assert score(spec, [GRADED]) == [pytest.approx(expected, abs=1e-12)]

    def test_label_reads_back(self, eng: engine.Engine) -> None:
        """The label shows the map as the dict a spec gives, and parses to the same metric."""
        metric = eng.metric("retrieval-ndcg-at-k@10(gains={2: 9, 1: 3})")
        label = metric_label(metric)
        assert label == "retrieval-ndcg-at-k@10(gains={1.0: 3.0, 2.0: 9.0})"
        assert eng.metric(label) == metric

    @pytest.mark.parametrize("gains", ["{1: 'x'}", "{1: 1e400}", "3", "{1: None}"])
    def test_invalid_map(self, eng: engine.Engine, gains: str) -> None:
        """A map that is not label -> finite number is refused, saying what it must be."""
        with pytest.raises(MetricParameterError, match="gains must"):
            eng.metric(f"retrieval-ndcg-at-k@10(gains={gains})")


ERR_CASE: Case = ({"a": 3, "b": 1, "c": 0}, ["b", "a", "c"], None)


class TestERR:
    """ERR = Σ_r (1/r) R_r Π_{i<r} (1 - R_i)."""

    @pytest.mark.parametrize(
        ("params", "expected"),
        [
            # g_max = 3 (largest label): R_b = (2^1-1)/2^3 = 1/8, R_a = (2^3-1)/2^3 = 7/8
            ({}, 1 / 8 + (1 / 2) * (1 - 1 / 8) * (7 / 8)),
            # linear: R_b = 1/3, R_a = 3/3
            ({"mapping": "linear"}, 1 / 3 + (1 / 2) * (1 - 1 / 3) * 1),
            # max_grade 4 (gdeval): R_b = 1/16, R_a = 7/16
            ({"max_grade": 4}, 1 / 16 + (1 / 2) * (1 - 1 / 16) * (7 / 16)),
            ({"max_grade": 4, "mapping": "linear"}, 1 / 4 + (1 / 2) * (1 - 1 / 4) * (3 / 4)),
            # max_grade 2 caps a's grade 3 at 2: R_b = 1/4, R_a = 3/4
            ({"max_grade": 2}, 1 / 4 + (1 / 2) * (1 - 1 / 4) * (3 / 4)),
            ({"k": 1}, 1 / 8),
        ],
    )
    def test_value(self, params: dict[str, Any], expected: float) -> None:
        """Labels {a: 3, b: 1, c: 0}, ranking [b, a, c]."""
        assert score("retrieval-err-at-k@3", [ERR_CASE], **params) == [pytest.approx(expected)]

    def test_default_max_grade_is_the_batch_maximum(self) -> None:
        """A second sample with label 4 raises g_max to 4 for the first sample too."""
        values = score("retrieval-err-at-k@3", [ERR_CASE, ({"z": 4}, ["z"], None)])
        assert values == [
            pytest.approx(1 / 16 + (1 / 2) * (1 - 1 / 16) * (7 / 16)),
            pytest.approx((2**4 - 1) / 2**4),
        ]

    def test_no_positive_label(self) -> None:
        """g_max = 0: no stopping probability anywhere, ERR 0 in both mappings."""
        case = ({"a": 0, "b": -1}, ["a", "b"], None)
        assert score("retrieval-err-at-k@2", [case]) == [0.0]
        assert score("retrieval-err-at-k@2", [case], mapping="linear") == [0.0]

    @pytest.mark.parametrize("params", [{"max_grade": 0}, {"max_grade": -1}, {"mapping": "log"}])
    def test_invalid_parameters(self, params: dict[str, Any]) -> None:
        """max_grade must be positive; mapping one of exponential, linear."""
        with pytest.raises(MetricParameterError):
            engine.Engine(config={}).metric("retrieval-err-at-k", **params)


class TestJudgedAtK:
    """|D_k ∩ judged| / k."""

    @pytest.mark.parametrize(
        ("case", "k", "expected"),
        [
            (({"a": 0, "b": -1, "c": 2}, ["a", "x", "c", "y"], None), 5, 2 / 5),
            (({"b": -1}, ["b"], None), 2, 1 / 2),  # a negative label is judged
            (({"a": 1}, ["x", "y"], None), 2, 0 / 2),
            (({"a": 1}, ["a", "x"], 1), 5, 1 / 5),  # an explicit k is k, metadata.k aside
        ],
    )
    def test_value(self, case: Case, k: int, expected: float) -> None:
        """Hand-counted judged fraction."""
        assert score("retrieval-judged-at-k", [case], k=k) == [pytest.approx(expected)]


# Three relevant documents at ranks 1, 3 and 7: precision 1/1, 2/3, 3/7 there.
PR_CASE: Case = (["r0", "r1", "r2"], ["r0", "n0", "r1", "n1", "n2", "n3", "r2"], None)
P1, P2, P3 = 1 / 1, 2 / 3, 3 / 7


def trapezoid(points: Sequence[float]) -> float:
    """Area under points at recall 0.0, 0.1, ..., 1.0."""
    return sum(0.1 * (a + b) / 2 for a, b in pairwise(points))


class TestAUCPR:
    """11-point interpolated precision (trec_eval iprec_at_recall) and its trapezoid area."""

    # level c needs m relevant documents; the point is the best precision from the m-th on
    POINTS: ClassVar[dict[str, list[float]]] = {
        # (long)(3c + 0.9): 0.7 -> 2.1 + 0.9 = 2.9999999999999996 -> 2 (double rounding)
        "trec_eval9": [P1, P1, P1, P1, P2, P2, P2, P2, P3, P3, P3],
        # lround(3c): 0.3 -> 1, 0.4 -> 1.2 -> 1, 0.5 -> 1.5 -> 2, 0.9 -> 2.7 -> 3
        "trec_eval10": [P1, P1, P1, P1, P1, P2, P2, P2, P2, P3, P3],
        # ceil(3c): the first m with recall m/3 >= c
        "exact": [P1, P1, P1, P1, P2, P2, P2, P3, P3, P3, P3],
    }

    @pytest.mark.parametrize("rounding", list(POINTS))
    def test_points(self, rounding: str) -> None:
        """Each rounding's 11 points for relevant ranks 1, 3, 7 of 3."""
        points = _iprec_at_recall(compile_cases([PR_CASE]), rounding=rounding)[0]
        assert points.tolist() == pytest.approx(self.POINTS[rounding])

    @pytest.mark.parametrize("rounding", list(POINTS))
    def test_area(self, rounding: str) -> None:
        """The metric is the trapezoid area under those points."""
        value = score("retrieval-auc-pr", [PR_CASE], rounding=rounding)
        assert value == [pytest.approx(trapezoid(self.POINTS[rounding]))]

    def test_default_rounding_is_trec_eval9(self) -> None:
        """Without a parameter the points follow trec_eval 9 / pytrec_eval."""
        assert score("retrieval-auc-pr", [PR_CASE]) == [
            pytest.approx(trapezoid(self.POINTS["trec_eval9"]))
        ]

    def test_interpolation_takes_later_higher_precision(self) -> None:
        """Relevant at ranks 2 and 3 of 2: precision 1/2 then 2/3; every point is 2/3."""
        case: Case = (["a", "b"], ["x", "a", "b"], None)
        points = _iprec_at_recall(compile_cases([case]))[0]
        assert points.tolist() == pytest.approx([2 / 3] * len(RECALL_LEVELS))

    def test_unreached_levels_are_zero(self) -> None:
        """One of four relevant retrieved (rank 2): levels needing m >= 2 are 0."""
        case: Case = (["a", "b", "c", "d"], ["x", "a"], None)
        # (long)(4c + 0.9): c <= 0.2 -> m <= 1 (1.7 -> 1); c = 0.3 -> 2.1 -> 2
        expected = [1 / 2, 1 / 2, 1 / 2] + [0.0] * 8
        assert _iprec_at_recall(compile_cases([case]))[0].tolist() == pytest.approx(expected)

    def test_relevance_threshold(self) -> None:
        """threshold 2: only b (rank 2 of [a, b]) is relevant: every point 1/2."""
        case: Case = ({"a": 1, "b": 2}, ["a", "b"], None)
        assert score("retrieval-auc-pr", [case], relevance_threshold=2) == [pytest.approx(1 / 2)]

    def test_invalid_rounding(self) -> None:
        """rounding must be one of trec_eval9, trec_eval10, exact."""
        with pytest.raises(MetricParameterError):
            engine.Engine(config={}).metric("retrieval-auc-pr", rounding="nearest")


class TestHitAndRecall:
    """success_k and recall_k on hand cases."""

    @pytest.mark.parametrize(
        ("spec", "case", "expected"),
        [
            ("retrieval-hit-at-k@1", (["a"], ["x", "a"], None), 0.0),
            ("retrieval-hit-at-k@2", (["a"], ["x", "a"], None), 1.0),
            ("retrieval-recall-at-k@2", (["a", "b", "c"], ["a", "b", "c"], None), 2 / 3),
            ("retrieval-recall-at-k@2", ({"a": 0}, ["a"], None), 0.0),
        ],
    )
    def test_value(self, spec: str, case: Case, expected: float) -> None:
        """Hand-counted values."""
        assert score(spec, [case]) == [pytest.approx(expected)]


class TestCommonRules:
    """Rules shared by the whole family."""

    @pytest.mark.parametrize("alias", ALL_CLASSIC)
    def test_empty_and_missing_rankings_score_zero(self, alias: str) -> None:
        """No output and an empty output are an empty ranking: 0, not NA."""
        cases = [(["a"], None, None), (["a"], [], None)]
        assert score(alias, cases) == [0.0, 0.0]

    @pytest.mark.parametrize("alias", ALL_CLASSIC)
    def test_all_negative_labels(self, alias: str) -> None:
        """Only negative labels (trec_eval 9 crashes here): 0, except judged@k counts them."""
        expected = 1 / 5 if alias == "retrieval-judged-at-k" else 0.0
        assert score(alias, [({"a": -2, "b": -1}, ["a"], None)]) == [expected]

    @pytest.mark.parametrize("alias", ALL_CLASSIC)
    def test_class_contract(self, alias: str) -> None:
        """Registered, family 'retrieval', needs relevance labels, one float per sample."""
        metric = engine.Engine(config={}).metric(alias)
        assert type(metric).alias == alias
        assert type(metric).family == "retrieval"
        assert type(metric).requires == frozenset({"relevance"})
        values = metric.score(compile_cases([SEED, GRADED]))
        assert values.dtype == np.float64 and values.shape == (2,)

    @pytest.mark.parametrize("alias", ["retrieval-mrr", "retrieval-map"])
    def test_uncut_by_default(self, alias: str) -> None:
        """MRR and MAP have no cutoff unless k (or metadata.k) is given."""
        assert type(engine.Engine(config={}).metric(alias)).uncut_by_default is True
