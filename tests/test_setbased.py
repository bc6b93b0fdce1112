"""The set-based family (METRICS.md "Set-based family"): golden values derived by hand in
each test, NA rules, validation, the diagnosis, and properties checked with hypothesis."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import engine
from engine.testing import make_batch
from metrics_plugins.setbased import (
    DiagnosisAtK,
    HarmAtK,
    NRecall4PlusAtK,
    NRecall5AtK,
    PctPROCAtK,
    Precision4PlusAtK,
    PROCAtK,
    RANWGAtK,
)

SEED_LABELS = {"a": 5, "b": 4, "c": 4, "d": 3, "e": 3, "f": 3, "g": 2, "h": 1}
ALL = (
    RANWGAtK,
    PROCAtK,
    PctPROCAtK,
    NRecall4PlusAtK,
    NRecall5AtK,
    Precision4PlusAtK,
    HarmAtK,
    DiagnosisAtK,
)
WEIGHTED = (RANWGAtK, PROCAtK, PctPROCAtK, DiagnosisAtK)


def batch(labels: dict[str, Any], output: Any, **sample: Any) -> engine.Batch:
    """A one-sample batch (``output=None``: the sample has no output)."""
    raw = {"id": "q", "expected_output": labels, **sample}
    return make_batch([raw], {} if output is None else {"q": output})


def one(metric: Any, b: engine.Batch) -> float:
    """The single sample's value."""
    return float(metric.score(b)[0])


def nan(value: float) -> bool:
    return math.isnan(value)


class TestWeights:
    """w_g per sample: rarity over the labeled slice, relative to grade 5, capped."""

    def test_seed_weights(self):
        """Seed example: N = 8, n5 = 1, n4 = 2, n3 = 3 gives w5 = 1, w4 = 0.25, w3 = 1/30."""
        # r5 = 1 / (1/8) = 8; r4 = 0.5 / (2/8) = 2; r3 = 0.1 / (3/8) = 4/15
        # w4 = min(2/8, 1) = 0.25; w3 = min((4/15)/8, 0.25) = 1/30
        table = RANWGAtK().weights(batch(SEED_LABELS, ["a"]))
        np.testing.assert_allclose(table[0], [0, 0, 0, 1 / 30, 0.25, 1], rtol=1e-12)

    @pytest.mark.parametrize(
        ("params", "w3", "w4"),
        [
            # alpha = 0: no rarity, r_g = b_g: w4 = 0.5 / 1, w3 = 0.1 / 1
            ({"alpha": 0.0}, 0.1, 0.5),
            # alpha = 2: r_g / r5 = (b_g / b5) (n5 / n_g)^2: w4 = 0.5 / 4, w3 = 0.1 / 9
            ({"alpha": 2.0}, 0.1 / 9, 0.125),
            # alpha = 0.5: w4 = 0.5 * (1/2)^0.5, w3 = 0.1 * (1/3)^0.5
            ({"alpha": 0.5}, 0.1 / math.sqrt(3), 0.5 / math.sqrt(2)),
            # caps bind: w4 = min(0.25, 0.2), w3 = min(1/30, 0.01)
            ({"cap4": 0.2, "cap3": 0.01}, 0.01, 0.2),
            # base utilities: w4 = (0.8 / 2) * (1/2), w3 = (0.3 / 2) * (1/3)
            ({"b5": 2.0, "b4": 0.8, "b3": 0.3}, 0.05, 0.2),
            # fallback weights only apply without a grade 5
            ({"fallback_w4": 0.3, "fallback_w3": 0.1}, 1 / 30, 0.25),
        ],
    )
    def test_parameters(self, params, w3, w4):
        """alpha, caps and base utilities change w3 and w4 as the formula says."""
        table = RANWGAtK(**params).weights(batch(SEED_LABELS, ["a"]))
        np.testing.assert_allclose(table[0], [0, 0, 0, w3, w4, 1], rtol=1e-12)

    def test_caps_enforce_grade_five_dominance(self):
        """When 4s and 3s are rare next to many 5s, they are capped at cap4 and cap3."""
        # n5 = 4, n4 = 1, n3 = 1: r4 / r5 = 0.5 * 4 = 2 -> 1; r3 / r5 = 0.1 * 4 = 0.4 -> 0.25
        labels = {"a": 5, "b": 5, "c": 5, "d": 5, "e": 4, "f": 3}
        table = RANWGAtK().weights(batch(labels, ["a"]))
        np.testing.assert_allclose(table[0], [0, 0, 0, 0.25, 1, 1])

    @pytest.mark.parametrize(
        ("params", "w3", "w4"),
        [({}, 0.2, 1.0), ({"fallback_w4": 0.6, "fallback_w3": 0.05}, 0.05, 0.6)],
    )
    def test_no_grade_five_falls_back(self, params, w3, w4):
        """Without a grade 5: w5 = 1, w4 = fallback_w4 (1), w3 = fallback_w3 (0.2)."""
        table = RANWGAtK(**params).weights(batch({"p": 4, "q": 3, "r": 3, "s": 2}, ["p"]))
        np.testing.assert_allclose(table[0], [0, 0, 0, w3, w4, 1])

    def test_no_grade_five_ra_nwg(self):
        """Fallback end to end: U = [4, 3, 3, 2], top 2 = [3, unlabeled] at K = 2."""
        # G_oracle = w4 + w3 = 1.2; G_obs = w3 = 0.2; RA-nWG = 1/6
        value = one(RANWGAtK(k=2), batch({"p": 4, "q": 3, "r": 3, "s": 2}, ["q", "x", "p"]))
        assert value == pytest.approx(0.2 / 1.2, rel=1e-12)

    def test_weights_are_per_sample(self):
        """Each sample's weights come from its own grade counts."""
        b = make_batch(
            [
                {"id": "seed", "expected_output": SEED_LABELS},
                {"id": "even", "expected_output": {"a": 5, "b": 4, "c": 3}},
            ],
            {},
        )
        # even: n5 = n4 = n3 = 1: w4 = 0.5, w3 = 0.1
        np.testing.assert_allclose(
            RANWGAtK().weights(b), [[0, 0, 0, 1 / 30, 0.25, 1], [0, 0, 0, 0.1, 0.5, 1]]
        )

    def test_label_counts_helper(self):
        """Batch.label_counts counts each sample's labels equal to each value (read-only)."""
        b = make_batch(
            [
                {"id": "seed", "expected_output": SEED_LABELS},
                {"id": "none", "expected_output": []},
            ],
            {},
        )
        counts = b.label_counts((1, 2, 3, 4, 5))
        np.testing.assert_array_equal(counts, [[1, 1, 3, 2, 1], [0, 0, 0, 0, 0]])
        assert b.label_counts([1.0, 2.0, 3.0, 4.0, 5.0]) is counts
        assert not counts.flags.writeable


class TestSeedExample:
    """The seed's worked example: labels [5,4,4,3,3,3,2,1], top 4 grades [4,3,3,3]."""

    def test_ra_nwg_at_4(self):
        """G_obs = 0.25 + 3/30 = 0.35; G_oracle = 1 + 0.25 + 0.25 + 1/30; RA-nWG = 0.22826..."""
        value = one(RANWGAtK(k=4), batch(SEED_LABELS, ["b", "d", "e", "f"]))
        assert value == pytest.approx(0.2282608695652174, rel=1e-12)
        assert value == pytest.approx(0.35 / (1.5 + 1 / 30), rel=1e-12)

    def test_gains(self):
        """G_obs, G_pool (pool = D when no pool is given) and G_oracle."""
        observed, in_pool, oracle = RANWGAtK(k=4).gains(batch(SEED_LABELS, ["b", "d", "e", "f"]))
        assert observed[0] == pytest.approx(0.35)
        assert in_pool[0] == pytest.approx(0.35)
        assert oracle[0] == pytest.approx(1.5333333333333333)

    def test_k_from_metadata(self):
        """metadata.k is the K of every part (observed, pool and oracle) when k is left
        open; an explicit k = 9 is 9, the same as without metadata.k."""
        ranking = ["b", "d", "e", "f", "a"]
        value = one(RANWGAtK(), batch(SEED_LABELS, ranking, metadata={"k": 4}))
        assert value == pytest.approx(0.2282608695652174, rel=1e-12)
        explicit = one(RANWGAtK(k=9), batch(SEED_LABELS, ranking, metadata={"k": 4}))
        assert explicit == one(RANWGAtK(k=9), batch(SEED_LABELS, ranking))


class TestPool:
    """PROC and %PROC: the pool is actual_output.pool when given, else the ranked list."""

    # seed weights: a=1, b=c=0.25, d=e=f=1/30, g=h=0, unlabeled 0; G_oracle@2 = 1.25

    @pytest.mark.parametrize(
        ("output", "proc"),
        [
            # no pool: P = D = (d, b, e): best 2 = b + d = 0.25 + 1/30
            (["d", "b", "e"], (0.25 + 1 / 30) / 1.25),
            # pool given with a: best 2 = a + b = 1.25
            ({"retrieved": ["d", "b", "e"], "pool": ["d", "b", "e", "a", "x"]}, 1.0),
            # pool given without a or c: best 2 = b + d
            ({"retrieved": ["d", "b"], "pool": ["d", "b", "x", "g"]}, (0.25 + 1 / 30) / 1.25),
            # duplicated pool ids count once: best 2 = b + d, not b + b
            ({"retrieved": ["d", "b"], "pool": ["b", "b", "d"]}, (0.25 + 1 / 30) / 1.25),
        ],
    )
    def test_proc(self, output, proc):
        """PROC@2 = G_pool / G_oracle, with G_pool the 2 largest weights in P ∩ U."""
        assert one(PROCAtK(k=2), batch(SEED_LABELS, output)) == pytest.approx(proc, rel=1e-12)

    def test_pct_proc_is_ra_nwg_over_proc(self):
        """%PROC@2 = RA-nWG / PROC: (1/30 / 1.25) / (1.25 / 1.25) with the top 2 = (d, x)."""
        b = batch(SEED_LABELS, {"retrieved": ["d", "x"], "pool": ["d", "x", "a", "b"]})
        assert one(RANWGAtK(k=2), b) == pytest.approx((1 / 30) / 1.25, rel=1e-12)
        assert one(PROCAtK(k=2), b) == pytest.approx(1.0)
        assert one(PctPROCAtK(k=2), b) == pytest.approx((1 / 30) / 1.25, rel=1e-12)

    def test_unlabeled_pool_documents_add_nothing(self):
        """Pool documents outside U have weight 0: a pool of unlabeled ids gives PROC 0."""
        b = batch(SEED_LABELS, {"retrieved": ["x"], "pool": ["x", "y"]})
        assert one(PROCAtK(k=2), b) == 0.0


class TestNotAvailable:
    """Every NA rule, and the metrics that are never NA."""

    def test_empty_labeled_slice(self):
        """No labels: G_oracle = 0, so RA-nWG, PROC, %PROC, N-Recall and the diagnosis are
        NA; Precision4+ and Harm are 0 (never NA)."""
        b = batch([], ["x", "y"])
        for metric in (RANWGAtK(), PROCAtK(), PctPROCAtK(), NRecall4PlusAtK(), NRecall5AtK()):
            assert nan(one(metric, b)), metric.alias
        assert nan(one(DiagnosisAtK(), b))
        assert one(Precision4PlusAtK(), b) == 0.0
        assert one(HarmAtK(), b) == 0.0

    def test_only_weightless_grades(self):
        """U = [2, 1] (weights 0): G_oracle = 0, RA-nWG NA; Harm@2 = 2/2."""
        b = batch({"g": 2, "h": 1}, ["g", "h"])
        assert nan(one(RANWGAtK(k=2), b))
        assert nan(one(PROCAtK(k=2), b))
        assert one(HarmAtK(k=2), b) == 1.0

    def test_proc_zero_makes_pct_proc_na(self):
        """Pool without any weighted document: PROC = 0, %PROC NA, RA-nWG = 0."""
        b = batch(SEED_LABELS, {"retrieved": ["g"], "pool": ["g", "h", "x"]})
        assert one(PROCAtK(k=3), b) == 0.0
        assert one(RANWGAtK(k=3), b) == 0.0
        assert nan(one(PctPROCAtK(k=3), b))

    def test_no_output(self):
        """A sample with no output is an empty ranking and an empty pool: RA-nWG = PROC = 0,
        %PROC NA, N-Recall 0, Precision4+ 0, Harm 0."""
        b = batch(SEED_LABELS, None)
        assert one(RANWGAtK(), b) == 0.0
        assert one(PROCAtK(), b) == 0.0
        assert nan(one(PctPROCAtK(), b))
        assert one(NRecall4PlusAtK(), b) == 0.0
        assert one(Precision4PlusAtK(), b) == 0.0
        assert one(HarmAtK(), b) == 0.0

    @pytest.mark.parametrize(
        ("labels", "r4", "r5"),
        [({"p": 3, "q": 2}, True, True), ({"p": 4, "q": 3}, False, True)],
    )
    def test_n_recall_without_high_grades(self, labels, r4, r5):
        """N-Recall4+ is NA when n4 + n5 = 0; N-Recall5 when n5 = 0."""
        b = batch(labels, ["p", "q"])
        assert nan(one(NRecall4PlusAtK(), b)) is r4
        assert nan(one(NRecall5AtK(), b)) is r5


class TestCounts:
    """N-Recall, Precision4+ and Harm: counts of grades in the top K."""

    # top 4 = (a:5, b:4, x:unlabeled, g:2); n4 + n5 = 3, n5 = 1

    @pytest.mark.parametrize(
        ("metric", "value"),
        [
            (NRecall4PlusAtK(k=4), 2 / 3),  # 2 / min(4, 3)
            (NRecall4PlusAtK(k=2), 2 / 2),  # 2 / min(2, 3)
            (NRecall4PlusAtK(k=1), 1 / 1),  # 1 / min(1, 3)
            (NRecall5AtK(k=4), 1 / 1),  # 1 / min(4, 1)
            (Precision4PlusAtK(k=4), 2 / 4),
            (HarmAtK(k=4), 1 / 4),  # g; the unlabeled x is not harm
            (HarmAtK(k=4, harm_grade=1), 0 / 4),
            (HarmAtK(k=4, harm_grade=4), 2 / 4),  # b and g
            (HarmAtK(k=4, harm_grade=5), 3 / 4),  # a, b and g
        ],
    )
    def test_values(self, metric, value):
        """Hand counts over the top K."""
        b = batch(SEED_LABELS, ["a", "b", "x", "g", "c"])
        assert one(metric, b) == pytest.approx(value, rel=1e-12)

    def test_harm_is_lower_is_better(self):
        """Harm is the one set-based metric where lower is better."""
        assert HarmAtK.higher_is_better is False
        assert all(cls.higher_is_better for cls in ALL if cls is not HarmAtK)


class TestKLargerThanSlice:
    """K may exceed |U| (and the ranking): the oracle takes all of U, Precision/Harm still
    divide by K."""

    def test_values(self):
        """U = {a:5, d:3}, K = 5, D = (a, d, x): RA-nWG = PROC = 1, N-Recall5 = 1/min(5, 1),
        Precision4+ = 1/5 (the best reachable here is 1/5)."""
        labels = {"a": 5, "d": 3}  # n5 = n3 = 1: w3 = min(0.1, 0.25) = 0.1
        b = batch(labels, ["a", "d", "x"])
        assert one(RANWGAtK(k=5), b) == 1.0
        assert one(PROCAtK(k=5), b) == 1.0
        assert one(NRecall5AtK(k=5), b) == 1.0
        assert one(NRecall4PlusAtK(k=5), b) == 1.0
        assert one(Precision4PlusAtK(k=5), b) == pytest.approx(0.2)
        assert one(HarmAtK(k=5), b) == 0.0

    def test_missing_evidence_still_counts(self):
        """K = 5 over U = {a:5, d:3}, D = (d): RA-nWG = 0.1 / 1.1."""
        b = batch({"a": 5, "d": 3}, ["d"])
        assert one(RANWGAtK(k=5), b) == pytest.approx(0.1 / 1.1, rel=1e-12)


class TestWeightMonotonicity:
    """Under the contract's weights a grade 4 can weigh less than a grade 3."""

    def test_abundant_fours_weigh_less_than_a_rare_three(self):
        """n5 = 1, n4 = 20, n3 = 1: w4 = 0.5 * 1/20 = 0.025 < w3 = min(0.1 * 1/1, 0.25) = 0.1,
        so swapping the retrieved 3 for a 4 lowers RA-nWG (documented in docs/set-based.md)."""
        labels = {"a": 5, "t": 3, **{f"f{i}": 4 for i in range(20)}}
        with_three = one(RANWGAtK(k=1), batch(labels, ["t"]))
        with_four = one(RANWGAtK(k=1), batch(labels, ["f0"]))
        assert with_three == pytest.approx(0.1)
        assert with_four == pytest.approx(0.025)


class TestDiagnosis:
    """diagnosis-at-k: fine / retrieval / selection per sample, counted and explained."""

    SAMPLES = (
        {"id": "fine", "expected_output": {"a": 5, "b": 4, "c": 3}},
        {"id": "retrieval", "expected_output": {"a": 5, "b": 4, "c": 3}},
        {"id": "selection", "expected_output": {"a": 5, "b": 4, "c": 3}},
        {"id": "empty", "expected_output": []},
    )
    # weights: a = 1, b = 0.5, c = 0.1; G_oracle@2 = 1.5
    OUTPUTS: ClassVar[dict[str, Any]] = {
        "fine": {"retrieved": ["a", "b"], "pool": ["a", "b", "c"]},  # RA 1, PROC 1
        "retrieval": {"retrieved": ["c", "x"], "pool": ["c", "x"]},  # PROC 0.1/1.5
        "selection": {"retrieved": ["c", "x"], "pool": ["c", "x", "a", "b"]},  # %PROC 0.1/1.5
        "empty": ["x"],
    }

    def b(self) -> engine.Batch:
        return make_batch(self.SAMPLES, self.OUTPUTS)

    def test_values(self):
        """1 for fine, 0 for a problem, NA when PROC is NA: the mean is the fine rate."""
        values = DiagnosisAtK(k=2).score(self.b())
        np.testing.assert_array_equal(values, [1.0, 0.0, 0.0, np.nan])
        assert DiagnosisAtK(k=2).aggregate(values) == pytest.approx(1 / 3)

    def test_details(self):
        """details gives the class and the three ratios per sample (None for NA)."""
        details = DiagnosisAtK(k=2).details(self.b())
        assert [d["class"] for d in details] == ["fine", "retrieval", "selection", None]
        assert details[1]["proc"] == pytest.approx(0.1 / 1.5)
        assert details[2]["pct_proc"] == pytest.approx(0.1 / 1.5)
        assert details[2]["ra_nwg"] == pytest.approx(0.1 / 1.5)
        assert details[3] == {"class": None, "proc": None, "pct_proc": None, "ra_nwg": None}

    @pytest.mark.parametrize(
        ("params", "classes"),
        [
            ({"proc_threshold": 0.05}, ["fine", "fine", "selection", None]),
            ({"pct_proc_threshold": 0.05}, ["fine", "retrieval", "fine", None]),
            ({"proc_threshold": 0.0, "pct_proc_threshold": 0.0}, ["fine"] * 3 + [None]),
        ],
    )
    def test_thresholds(self, params, classes):
        """Thresholds are parameters: PROC < proc_threshold, then %PROC < pct_proc_threshold."""
        details = DiagnosisAtK(k=2, **params).details(self.b())
        assert [d["class"] for d in details] == classes

    def test_summarize(self):
        """Counts per class, the means with their class, and the worst samples per class."""
        metric = DiagnosisAtK(k=2)
        b = self.b()
        report = metric.summarize(b, metric.score(b))
        assert report["counts"] == {"fine": 1, "retrieval": 1, "selection": 1, "na": 1}
        assert [w["id"] for w in report["worst"]["retrieval"]] == ["retrieval"]
        assert [w["id"] for w in report["worst"]["selection"]] == ["selection"]
        assert report["worst"]["selection"][0]["proc"] == 1.0
        mean_proc = (1 + 0.1 / 1.5 + 1) / 3
        assert report["mean"]["proc"] == pytest.approx(mean_proc, abs=1e-6)
        assert report["mean"]["class"] == "fine"

    def test_summarize_orders_and_limits_worst(self):
        """At most five per class, lowest PROC first."""
        samples = [{"id": f"s{i}", "expected_output": {"a": 5, f"c{i}": 3}} for i in range(7)]
        # n5 = n3 = 1: w3 = 0.1; retrieving only c_i gives PROC = 0.1 / 1.1 for every sample,
        # except s3 whose pool is empty (PROC 0)
        outputs = {f"s{i}": [f"c{i}"] for i in range(7)}
        outputs["s3"] = []
        metric = DiagnosisAtK(k=2)
        b = make_batch(samples, outputs)
        worst = metric.summarize(b, metric.score(b))["worst"]["retrieval"]
        assert [w["id"] for w in worst] == ["s3", "s0", "s1", "s2", "s4"]

    def test_failed_samples_are_na(self):
        """A sample whose value is NA (e.g. the system failed on it) is counted as na."""
        metric = DiagnosisAtK(k=2)
        b = self.b()
        values = metric.score(b)
        values[0] = np.nan
        report = metric.summarize(b, values)
        assert report["counts"] == {"fine": 0, "retrieval": 1, "selection": 1, "na": 2}

    def test_report_lines(self, eng):
        """Results.report_lines renders the report readably (counts on one line, worst
        samples one per line)."""
        results = (
            eng.dataset(samples=list(self.SAMPLES))
            .with_metrics(["diagnosis-at-k@2"])
            .evaluate(self.OUTPUTS)
        )
        lines = results.report_lines()
        assert lines[0] == "diagnosis-at-k@2:"
        assert "  counts: fine=1 retrieval=1 selection=1 na=1" in lines
        assert any(
            line.startswith("      - id=retrieval ra_nwg=0.0667 proc=0.0667") for line in lines
        )
        assert results.to_dict()["samples"][3]["details"]["diagnosis-at-k@2"]["class"] is None


class TestGrades:
    """``expected_output.grades`` carries the set-based scale beside classic relevance."""

    SEED: ClassVar[dict[str, Any]] = {"relevance": ["a", "b"], "grades": SEED_LABELS}

    def test_grades_win_over_relevance(self):
        """The seed example again: grades drive the family, binary relevance is ignored."""
        value = one(RANWGAtK(k=4), batch(self.SEED, ["b", "d", "e", "f"]))
        assert value == pytest.approx(0.35 / (1.5 + 1 / 30), rel=1e-12)

    def test_classic_metrics_keep_relevance(self, eng):
        """precision@2 sees relevance {a, b}: 'b' and 'd' ranked gives 1/2; harm@2 sees
        grades: neither 'b' (4) nor 'd' (3) is a distractor (grades 1..2) so 0."""
        results = (
            eng.dataset(samples=[{"id": "q", "expected_output": self.SEED}])
            .with_metrics(["retrieval-precision-at-k@2", "harm-at-k@2", "n-recall-4plus-at-k@2"])
            .evaluate({"q": ["b", "d"]})
        )
        summary = results.summary()
        assert summary["retrieval-precision-at-k@2"]["mean"] == 0.5
        assert summary["harm-at-k@2"]["mean"] == 0.0
        # grade >= 4 in the top 2: 'b' only; available: a, b, c (3), min(2, 3) = 2
        assert summary["n-recall-4plus-at-k@2"]["mean"] == 0.5

    def test_mixed_batch(self):
        """Rows with grades and rows with graded relevance score side by side, with pools."""
        b = make_batch(
            [
                {"id": "g", "expected_output": {"relevance": ["x"], "grades": {"a": 5, "b": 1}}},
                {"id": "r", "expected_output": {"a": 1, "b": 5}},
            ],
            {"g": {"retrieved": ["b"], "pool": ["b", "a"]}, "r": ["b"]},
        )
        assert not list(HarmAtK(k=1).check(b))
        # g: 'b' is grade 1, harmful; r: 'b' is grade 5, not harmful
        np.testing.assert_array_equal(HarmAtK(k=1).score(b), [1.0, 0.0])
        # g: G_obs 0 of G_pool 1 (a, in the pool): a selection miss; r: 1 of 1
        observed, in_pool, oracle = RANWGAtK(k=1).gains(b)
        np.testing.assert_array_equal(observed, [0.0, 1.0])
        np.testing.assert_array_equal(in_pool, [1.0, 1.0])
        np.testing.assert_array_equal(oracle, [1.0, 1.0])

    def test_bad_grade_in_schema(self, eng):
        """A grade outside 1..5 is a schema error at the grade's pointer."""
        samples = [{"id": "q", "expected_output": {"grades": {"a": 6}}}]
        with pytest.raises(engine.InputError) as caught:
            eng.dataset(samples=samples)
        assert [p.pointer for p in caught.value.problems] == ["/0/expected_output/grades/a"]

    def test_grades_alone_are_not_relevance(self, eng):
        """A sample with only grades lacks the relevance a classic metric needs."""
        samples = [{"id": "q", "expected_output": {"grades": {"a": 5}}}]
        with pytest.raises(engine.MetricRequirementError) as caught:
            eng.dataset(samples=samples).with_metrics(["retrieval-recall-at-k"]).evaluate(
                {"q": ["a"]}
            )
        assert [p.pointer for p in caught.value.problems] == ["/expected_output"]


class TestValidation:
    """Grades outside 1..5 and pools without the top K are errors before scoring."""

    def evaluate(self, eng, samples, outputs, metrics=("ra-nwg-at-k", "harm-at-k@3")):
        return eng.dataset(samples=samples).with_metrics(list(metrics)).evaluate(outputs)

    @pytest.mark.parametrize("bad", [0, 6, -1, 4.5, 2.0001])
    def test_bad_grade(self, eng, bad):
        """A label that is not an integer 1..5 names the sample and the document."""
        samples = [{"id": "q", "expected_output": {"a": 5, "b/1": bad}}]
        with pytest.raises(engine.MetricRequirementError) as caught:
            self.evaluate(eng, samples, {"q": ["a"]})
        (problem,) = caught.value.problems
        assert problem.sample_id == "q"
        assert problem.pointer == "/expected_output/b~11"
        assert "integer grades 1..5" in problem.message

    def test_long_form_pointer(self, eng):
        """In the long form the pointer goes through /expected_output/relevance."""
        samples = [{"id": "q", "expected_output": {"relevance": {"a": 0}, "answers": ["x"]}}]
        with pytest.raises(engine.MetricRequirementError) as caught:
            self.evaluate(eng, samples, {"q": ["a"]})
        assert [p.pointer for p in caught.value.problems] == ["/expected_output/relevance/a"]

    def test_pool_must_contain_top_k(self, eng):
        """A pool that lacks a top-K document names the sample and the missing ids."""
        samples = [{"id": "q", "expected_output": {"a": 5}}]
        outputs = {"q": {"retrieved": ["a", "x", "y", "z"], "pool": ["a", "z"]}}
        with pytest.raises(engine.MetricRequirementError) as caught:
            self.evaluate(eng, samples, outputs, metrics=["proc-at-k@3"])
        (problem,) = caught.value.problems
        assert (problem.sample_id, problem.pointer) == ("q", "/actual_output/pool")
        assert "'x', 'y'" in problem.message and "'z'" not in problem.message

    def test_pool_beyond_k_is_not_checked(self, eng):
        """Documents ranked below K need not be in the pool."""
        samples = [{"id": "q", "expected_output": {"a": 5}}]
        outputs = {"q": {"retrieved": ["a", "x"], "pool": ["a"]}}
        results = self.evaluate(eng, samples, outputs, metrics=["proc-at-k@1"])
        assert results.summary()["proc-at-k@1"]["mean"] == 1.0

    def test_all_problems_together(self, eng):
        """Every problem of every sample and metric in one error, each grade problem once."""
        samples = [
            {"id": "q1", "expected_output": {"a": 0, "b": 7}},
            {"id": "q2", "expected_output": {"a": 5}},
            {"id": "q3"},
        ]
        outputs = {"q1": ["a"], "q2": {"retrieved": ["x"], "pool": []}, "q3": ["a"]}
        with pytest.raises(engine.MetricRequirementError) as caught:
            self.evaluate(eng, samples, outputs, metrics=["ra-nwg-at-k", "harm-at-k"])
        found = sorted((p.sample_id, p.pointer) for p in caught.value.problems)
        assert found == [
            ("q1", "/expected_output/a"),
            ("q1", "/expected_output/b"),
            ("q2", "/actual_output/pool"),  # once per metric: both use K = 5, same message
            ("q3", "/expected_output"),
            ("q3", "/expected_output"),  # missing labels: once per metric, as before
        ]

    def test_valid_input_scores(self, eng):
        """Binary labels (grade 1 each) are valid grades."""
        results = self.evaluate(eng, [{"id": "q", "expected_output": ["a"]}], {"q": ["a"]})
        assert results.summary()["harm-at-k@3"]["mean"] == pytest.approx(1 / 3)

    @pytest.mark.parametrize(
        "spec",
        [
            "ra-nwg-at-k(b5=0)",
            "ra-nwg-at-k(cap3=-0.1)",
            "ra-nwg-at-k(alpha=inf)",
            "proc-at-k(b4='x')",
            "harm-at-k(harm_grade=0)",
            "harm-at-k(harm_grade=2.5)",
            "diagnosis-at-k(proc_threshold=-1)",
            "ra-nwg-at-k@0",
        ],
    )
    def test_bad_parameters(self, eng, spec):
        """Out-of-range parameters raise MetricParameterError."""
        with pytest.raises(engine.MetricParameterError):
            eng.metric(spec)


# -- properties -----------------------------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, int], list[str], list[str] | None, int]:
    """Labels over U = u0..un, a ranking over U and unlabeled x0..x3, a pool containing
    the top K (or None) and K."""
    grades = draw(st.lists(st.integers(1, 5), min_size=1, max_size=10))
    labels = {f"u{i}": g for i, g in enumerate(grades)}
    universe = [*labels, "x0", "x1", "x2", "x3"]
    ranking = draw(st.lists(st.sampled_from(universe), max_size=10, unique=True))
    k = draw(st.integers(1, 6))
    pool = None
    if draw(st.booleans()):
        extra = draw(st.lists(st.sampled_from(universe), max_size=8, unique=True))
        pool = list(dict.fromkeys([*ranking[:k], *extra]))
    return labels, ranking, pool, k


def output(ranking: list[str], pool: list[str] | None) -> Any:
    return ranking if pool is None else {"retrieved": ranking, "pool": pool}


def scores(labels, ranking, pool, k) -> dict[str, float]:
    b = batch(labels, output(ranking, pool))
    assert not list(RANWGAtK(k=k).check(b))
    return {cls.alias: one(cls(k=k), b) for cls in ALL}


@pytest.mark.slow
class TestProperties:
    """Invariants over random labels, rankings, pools and K."""

    @settings(max_examples=150, deadline=None)
    @given(cases(), st.randoms(use_true_random=False))
    def test_order_inside_top_k_is_irrelevant(self, case, random):
        """Shuffling the top K leaves every set-based metric unchanged."""
        labels, ranking, pool, k = case
        shuffled = ranking[:k]
        random.shuffle(shuffled)
        before = scores(labels, ranking, pool, k)
        after = scores(labels, shuffled + ranking[k:], pool, k)
        for alias, value in before.items():
            assert after[alias] == pytest.approx(value, rel=1e-12, nan_ok=True), alias

    @settings(max_examples=200, deadline=None)
    @given(cases())
    def test_ra_nwg_within_proc(self, case):
        """0 <= RA-nWG <= PROC <= 1, and RA-nWG = PROC x %PROC where %PROC is defined."""
        s = scores(*case)
        ra_nwg, proc, pct = s["ra-nwg-at-k"], s["proc-at-k"], s["pct-proc-at-k"]
        assert nan(ra_nwg) == nan(proc)
        if not nan(proc):
            assert 0.0 <= ra_nwg <= proc + 1e-12 and proc <= 1.0 + 1e-12
        if not nan(pct):
            assert 0.0 <= pct <= 1.0 + 1e-12
            assert ra_nwg == pytest.approx(proc * pct, rel=1e-9, abs=1e-15)

    @settings(max_examples=200, deadline=None)
    @given(cases(), st.data())
    def test_higher_grade_never_lowers_ra_nwg(self, case, data):
        """Replacing a top-K passage by a passage of a higher grade never lowers RA-nWG
        (except a 3 -> 4 swap when 4s are so common that w4 < w3, pinned above)."""
        labels, ranking, _, k = case
        top = ranking[:k]
        assume(top)
        out = data.draw(st.sampled_from(top))
        old = labels.get(out, 0)  # unlabeled: grade 0, weight 0
        better = [d for d, g in labels.items() if g > old and d not in top]
        assume(better)
        new = data.draw(st.sampled_from(better))
        if old == 3 and labels[new] == 4:  # then n3, n4 >= 1
            n3, n4, n5 = (list(labels.values()).count(g) for g in (3, 4, 5))
            assume(n5 == 0 or min(0.5 * n5 / n4, 1.0) >= min(0.1 * n5 / n3, 0.25))
        replaced = [new if d == out else d for d in top] + [d for d in ranking[k:] if d != new]
        before = scores(labels, ranking, None, k)["ra-nwg-at-k"]
        after = scores(labels, replaced, None, k)["ra-nwg-at-k"]
        if not nan(before):
            assert after >= before - 1e-12

    @settings(max_examples=100, deadline=None)
    @given(cases())
    def test_batch_equals_single_samples(self, case):
        """Scoring a sample inside a batch gives the same values as scoring it alone."""
        labels, ranking, pool, k = case
        b = make_batch(
            [{"id": "q", "expected_output": labels}, {"id": "s", "expected_output": SEED_LABELS}],
            {"q": output(ranking, pool), "s": ["a", "d"]},
        )
        alone = scores(labels, ranking, pool, k)
        for cls in ALL:
            assert cls(k=k).score(b)[0] == pytest.approx(alone[cls.alias], nan_ok=True)
