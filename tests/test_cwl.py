"""cwl_eval's C/W/L measures (metrics_plugins/cwl.py) by hand: each measure's weights from
its continuation probabilities over cwl_eval's 1,000 ranks, RBP's normalisation against
trec_eval's, and tied scores in the run's order. tests/test_ir_measures_providers.py pins
every measure against cwl_eval itself on random queries."""

from __future__ import annotations

from math import log2

import pytest

import engine

#: One query: d1 (label 2), d2 (0), d3 (3), d4 (1), then unjudged u1; labels scaled by
#: max_rel = 4 give the gains 0.5, 0, 0.75, 0.25, 0.
QRELS = {"q": {"d1": 2, "d2": 0, "d3": 3, "d4": 1, "d9": 4}}
RUN = {"q": {"d1": 5.0, "d2": 4.0, "d3": 3.0, "d4": 2.0, "u1": 1.0}}
GAINS = [0.5, 0.0, 0.75, 0.25, 0.0]


def _one(spec: str, qrels: dict = QRELS, run: dict = RUN) -> float:
    results = engine.Engine(config={}).evaluate_trec(qrels, run, [spec])
    return float(results.values(results.labels[0])[0])


class TestByHand:
    def test_rbp_normalises_over_a_thousand_ranks(self) -> None:
        """One relevant document at rank 1: cwl_eval's RBP is (1 - p) / (1 - p^1000), not
        trec_eval's 1 - p: 0.0100004317 at p = 0.99 and 0.00158 at p = 0.999."""
        qrels, run = {"q": {"a": 1}}, {"q": {"a": 1.0, "b": 0.5}}
        for p in (0.99, 0.999):
            expected = (1 - p) / (1 - p**1000)
            assert _one(f"cwl-rbp(p={p})", qrels, run) == pytest.approx(expected, rel=1e-12)
            assert _one(f"retrieval-rbp(p={p}, relevance_threshold=1)", qrels, run) == (
                pytest.approx(1 - p, rel=1e-12)
            )
        assert _one("cwl-rbp(p=0.99)", qrels, run) == pytest.approx(0.010000432, abs=1e-9)
        assert _one("cwl-rbp(p=0.999)", qrels, run) == pytest.approx(0.00158, abs=1e-5)

    def test_rel_0_counts_judged_documents_not_unjudged_ones(self) -> None:
        """RBP(rel=0): a judged non-relevant a (label 0 >= 0) gains 1 at rank 1, the
        unjudged u nothing: (1 - p) / (1 - p^1000) = 0.2 at p = 0.8, as cwl_eval says.
        Before: u counted too, 0.2 + 0.16 = 0.36."""
        qrels, run = {"q": {"a": 0}}, {"q": {"a": 2.0, "u": 1.0}}
        expected = 0.2 / (1 - 0.8**1000)
        assert _one("RBP(rel=0, p=0.8)", qrels, run) == pytest.approx(expected, rel=1e-12)
        assert _one("cwl-rbp(p=0.8, relevance_threshold=0)", qrels, run) == pytest.approx(
            expected, rel=1e-12
        )

    def test_graded_rbp(self) -> None:
        """Without relevance_threshold the gains are the scaled labels."""
        p = 0.5
        expected = sum(g * p**i for i, g in enumerate(GAINS)) * (1 - p) / (1 - p**1000)
        assert _one("cwl-rbp(p=0.5, relevance_threshold=None, max_rel=4)") == pytest.approx(
            expected, rel=1e-12
        )

    def test_sdcg(self) -> None:
        """Scaled DCG@3: DCG of the scaled gains over the DCG of gain 1 at every rank."""
        dcg = 0.5 + 0.0 / log2(3) + 0.75 / 2
        assert _one("cwl-sdcg-at-k@3(max_rel=4)") == pytest.approx(
            dcg / (1 + 1 / log2(3) + 1 / 2), rel=1e-12
        )

    def test_bpm_stops_at_the_gain_or_the_cutoff(self) -> None:
        """T = 1: the gain reaches 1.25 at rank 3, so three documents are read; with k = 2
        the user stops at rank 2 first."""
        assert _one("cwl-bpm-at-k@10(max_rel=4, T=1.0)") == pytest.approx((0.5 + 0.75) / 3)
        assert _one("cwl-bpm-at-k@2(max_rel=4, T=1.0)") == pytest.approx(0.5 / 2)

    def test_insq(self) -> None:
        """T = 1: c_i = ((i + 1) / (i + 2))^2, so rank i is reached with weight
        (2 / (i + 1))^2, over ranks 1..1000."""
        weights = [(2 / (i + 1)) ** 2 for i in range(1, 1001)]
        expected = sum(w * g for w, g in zip(weights, GAINS, strict=False)) / sum(weights)
        assert _one("cwl-insq(max_rel=4)") == pytest.approx(expected, rel=1e-12)

    def test_nerr8(self) -> None:
        """c_i = 1 - g_i up to rank k = 3: the chance of reaching ranks 1, 2, 3 is 1, 0.5,
        0.5."""
        expected = (1 * 0.5 + 0.5 * 0.0 + 0.5 * 0.75) / (1 + 0.5 + 0.5)
        assert _one("cwl-nerr8-at-k@3(max_rel=4)") == pytest.approx(expected, rel=1e-12)

    def test_min_rel_must_be_below_max_rel(self) -> None:
        with pytest.raises(engine.MetricParameterError, match="min_rel must be below max_rel"):
            engine.Engine(config={}).metric("cwl-inst(min_rel=3, max_rel=3)")


def test_ties_in_the_run_order() -> None:
    """a (relevant) and b (not) tie; the run lists a first. trec_eval's order puts b first
    (doc id descending): RBP(p=0.5) 0.5 of its best; the run's order: all of it."""
    qrels, run = {"q": {"a": 1, "b": 0}}, {"q": {"a": 1.0, "b": 1.0}}
    best = 0.5 / (1 - 0.5**1000)
    assert _one("cwl-rbp(p=0.5, ties=run_order)", qrels, run) == pytest.approx(best)
    assert _one("cwl-rbp(p=0.5)", qrels, run) == pytest.approx(best * 0.5)
    assert _one("RBP(rel=1, p=0.5)", qrels, run) == pytest.approx(best)
