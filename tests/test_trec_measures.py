"""trec_eval's other per-query measures (metrics_plugins/trec.py): every per-query and
``all`` value of trec_eval's test collection (out.test.aq, trec_eval 10), pytrec_eval
(trec_eval 9) per query on random queries, hand derivations, and the conformance kit."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import qrels_of, read_reference, run_of
from test_trec_eval_conformance import TOLERANCE

import engine
from engine import Batch
from engine.io.frames import run_from_dicts
from engine.io.trec import read_qrels, read_run
from engine.testing import MetricConformance, make_batch
from metrics_plugins import trec

Qrels = dict[str, dict[str, int]]
Scored = dict[str, dict[str, float]]

CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
MULTIPLIERS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
COUNTS = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")


def trec_specs(cutoffs: tuple[int, ...], level: int = 1) -> dict[str, str]:
    """trec_eval name -> slotwise spec of every measure in trec_eval 9 (pytrec_eval), at
    relevance level ``level``. ndcg_rel and G take their gains from the labels: no -l."""
    at = f"(relevance_threshold={level})"
    specs = {
        "bpref": f"retrieval-bpref{at}",
        "infAP": f"retrieval-infap{at}",
        "num_ret": "retrieval-num-ret",
        "num_rel": f"retrieval-num-rel{at}",
        "num_rel_ret": f"retrieval-num-rel-ret{at}",
        "num_nonrel_judged_ret": f"retrieval-num-nonrel-judged-ret{at}",
        "set_P": f"retrieval-set-precision{at}",
        "set_recall": f"retrieval-set-recall{at}",
        "set_F": f"retrieval-set-f{at}",
        "set_relative_P": f"retrieval-set-relative-precision{at}",
        "set_map": f"retrieval-set-map{at}",
        "11pt_avg": f"retrieval-11pt-avg{at}",
        "ndcg_rel": "retrieval-ndcg-rel",
        "Rndcg": f"retrieval-rndcg{at}",
        "binG": f"retrieval-bing{at}",
        "G": "retrieval-g",
        "utility": f"retrieval-utility{at}",
    }
    for k in cutoffs:
        specs[f"relative_P_{k}"] = f"retrieval-relative-precision-at-k@{k}{at}"
    for m in MULTIPLIERS:
        specs[f"Rprec_mult_{m:.2f}"] = (
            f"retrieval-rprec-mult(multiplier={m}, relevance_threshold={level})"
        )
    return specs


@functools.cache
def _engine() -> engine.Engine:
    """One engine with default configuration for the module."""
    return engine.Engine(config={})


def _scores(batch: Batch, specs: dict[str, str]) -> dict[str, np.ndarray]:
    """Each trec_eval name's slotwise values on ``batch``."""
    return {name: _engine().metric(spec).score(batch) for name, spec in specs.items()}


# -- (a) trec_eval's test collection --------------------------------------------------------

#: out.test.aq was written by trec_eval 10: 11pt_avg with its lround cutoffs, and unj_k.
AQ_MEASURES = {
    **trec_specs(CUTOFFS),
    "11pt_avg": "retrieval-11pt-avg(rounding=trec_eval10)",
    **{f"unj_{k}": f"retrieval-unjudged-at-k@{k}" for k in (5, 10, 20)},
}


TREC_EVAL = Path(__file__).resolve().parent / "data" / "trec_eval"


@pytest.fixture(scope="module")
def aq_inputs() -> tuple[dict, dict, dict[str, dict[str, float]]]:
    """qrels.test, results.test (ranked as trec_eval ranks it) and out.test.aq."""
    return (
        qrels_of(read_qrels(TREC_EVAL / "qrels.test")),
        run_of(read_run(TREC_EVAL / "results.test")),
        read_reference(TREC_EVAL / "out.test.aq"),
    )


@pytest.fixture(scope="module")
def aq_results(aq_inputs: tuple) -> engine.Results:
    """Every measure of AQ_MEASURES evaluated through the public API."""
    qrels, run, _ = aq_inputs
    return _engine().dataset(samples=qrels).with_metrics(list(AQ_MEASURES.values())).evaluate(run)


class TestOutTestAq:
    """slotwise reproduces out.test.aq (queries 301-303) to its 4 printed decimals."""

    def test_inputs_are_the_reference_data(self, reference_data: Path) -> None:
        """The module's collection is the conftest's reference data, and holds every measure."""
        assert reference_data / "trec_eval" == TREC_EVAL
        reference = read_reference(TREC_EVAL / "out.test.aq")
        assert reference["num_q"]["all"] == 3
        assert set(AQ_MEASURES) <= set(reference)

    @pytest.mark.parametrize("measure", list(AQ_MEASURES))
    def test_measure(self, aq_results: engine.Results, aq_inputs: tuple, measure: str) -> None:
        """Per query and 'all': the mean, or for the num_* counts the sum (n x the mean)."""
        expected = aq_inputs[2][measure]
        label = aq_results.labels[list(AQ_MEASURES).index(measure)]
        values = aq_results.scores[label]
        assert aq_results.sample_ids == ["301", "302", "303"]
        for qid, value in zip(aq_results.sample_ids, values.tolist(), strict=True):
            assert abs(value - expected[qid]) <= TOLERANCE, (qid, value, expected[qid])
        mean = aq_results.aggregates[label]
        total = mean * len(values) if measure in COUNTS else mean
        assert abs(total - expected["all"]) <= TOLERANCE, (total, expected["all"])

    def test_11pt_avg_with_trec_eval_9_cutoffs_differs_at_302(self, aq_inputs: tuple) -> None:
        """trec_eval 9's (long)(c·R + 0.9) cutoffs (the default) move query 302's iprec at
        0.60 (R = 77: 46.2 -> 47 relevant, not 46) and so its 11pt_avg by 0.0108 / 11; 301's
        change at 0.10 (0.0002 / 11) stays below the printed precision."""
        qrels, run, reference = aq_inputs
        batch = _engine().dataset(samples=qrels).batch(run)
        ours = _engine().metric("retrieval-11pt-avg").score(batch)
        expected = np.array([reference["11pt_avg"][q] for q in batch.sample_ids])
        assert (np.abs(ours - expected) > TOLERANCE).tolist() == [False, True, False]
        assert abs(ours[1] - 0.4360) <= TOLERANCE


# -- (b) pytrec_eval (trec_eval 9) on random queries ----------------------------------------

DIFF_CUTOFFS = (1, 3, 5, 10, 20, 100)
PYTREC_NAMES = {
    *(name for name in trec_specs(()) if not name.startswith("Rprec_mult")),
    f"relative_P.{','.join(map(str, DIFF_CUTOFFS))}",
    f"Rprec_mult.{','.join(map(str, MULTIPLIERS))}",
}
DIFF_TOLERANCE = 1e-9


def _differences(
    batch: Batch, ours: dict[str, np.ndarray], theirs: dict[str, dict[str, float]]
) -> list[str]:
    """Every (query, measure) where slotwise and pytrec_eval differ by more than 1e-9."""
    failures = []
    for name, got in ours.items():
        expected = np.array([theirs[qid][name] for qid in batch.sample_ids])
        for i in np.flatnonzero(~(np.abs(got - expected) <= DIFF_TOLERANCE)):
            failures.append(f"{batch.sample_ids[i]} {name}: {got[i]!r} vs {expected[i]!r}")
    return failures


def _truncated(runs: Scored, k: int) -> Scored:
    """Each run cut to its top k in trec_eval's order (trec_eval -M k)."""
    ranked = run_of(run_from_dicts(runs))
    return {qid: {doc: runs[qid][doc] for doc in ranked.get(qid, [])[:k]} for qid in runs}


@pytest.fixture(scope="module")
def pytrec() -> Any:
    """The pytrec_eval module (the tests that need it are skipped without it)."""
    return pytest.importorskip("pytrec_eval")


@pytest.fixture(scope="module")
def random_queries(pytrec: Any) -> tuple[Qrels, Scored, Batch]:
    """3,000 seeded random queries (the generator of test_differential_pytrec_eval: graded
    labels 0-3, labels -1 and -2, unjudged documents, tied scores, short and empty runs,
    queries without relevant documents) and their batch."""
    from test_differential_pytrec_eval import compile_batch, random_collection

    qrels, runs = random_collection(seed=20250301, queries=3_000)
    # pytrec_eval 0.5.11 segfaults when the first run it evaluates is empty: put those last
    runs = dict(sorted(runs.items(), key=lambda item: not item[1]))
    return qrels, runs, compile_batch(qrels, runs)


class TestAgainstPytrecEval:
    """slotwise equals pytrec_eval per query, to 1e-9."""

    def test_queries_cover_the_edge_cases(self, random_queries: tuple) -> None:
        qrels, runs, batch = random_queries
        labels = [set(q.values()) for q in qrels.values()]
        assert any(-1 in q for q in labels) and any(-2 in q for q in labels)
        assert any(max(q) <= 0 for q in labels)
        assert any(len(set(s.values())) < len(s) for s in runs.values())
        assert (batch.lengths == 0).sum() > 50
        assert any(set(s) - set(qrels[qid]) for qid, s in runs.items())  # unjudged retrieved

    @pytest.mark.parametrize("level", [1, 2])
    def test_every_measure_per_query(self, pytrec: Any, random_queries: tuple, level: int) -> None:
        """Every measure at relevance_threshold = pytrec_eval's relevance_level. pytrec_eval's
        11pt_avg of an empty run is 0/0 = NaN (trec_eval divides by num_ret); slotwise 0."""
        qrels, runs, batch = random_queries
        theirs = pytrec.RelevanceEvaluator(qrels, PYTREC_NAMES, relevance_level=level).evaluate(
            runs
        )
        for qid, empty in zip(batch.sample_ids, (batch.lengths == 0).tolist(), strict=True):
            assert np.isnan(theirs[qid]["11pt_avg"]) == empty, qid
            if empty:
                theirs[qid]["11pt_avg"] = 0.0
        ours = _scores(batch, trec_specs(DIFF_CUTOFFS, level))
        assert _differences(batch, ours, theirs)[:20] == []

    def test_set_f_beta_is_trec_evals_parameter(self, pytrec: Any, random_queries: tuple) -> None:
        """retrieval-set-f(beta=0.25) is trec_eval's set_F.0.25: (1 + β)PR / (βP + R)."""
        qrels, runs, batch = random_queries
        theirs = pytrec.RelevanceEvaluator(qrels, {"set_F.0.25"}).evaluate(runs)
        ours = _scores(batch, {"set_F": "retrieval-set-f(beta=0.25)"})
        assert _differences(batch, ours, theirs)[:20] == []

    @pytest.mark.parametrize("k", [1, 5, 20])
    def test_bpref_and_infap_at_k_are_trec_eval_minus_m(
        self, pytrec: Any, random_queries: tuple, k: int
    ) -> None:
        """retrieval-bpref@k and retrieval-infap@k equal bpref and infAP of the runs cut to
        their top k (trec_eval -M k): R and the judged non-relevant count stay whole."""
        qrels, runs, batch = random_queries
        theirs = pytrec.RelevanceEvaluator(qrels, {"bpref", "infAP"}).evaluate(_truncated(runs, k))
        ours = _scores(batch, {"bpref": f"retrieval-bpref@{k}", "infAP": f"retrieval-infap@{k}"})
        assert _differences(batch, ours, theirs)[:20] == []

    def test_every_negative_label_is_pooled_but_unjudged(self, pytrec: Any) -> None:
        """trec_eval reads any label < 0 (-1 by convention) as "in the pool, not judged":
        -1, -2 and -5 give the same values."""
        runs = {"q": {"n1": 8.0, "r1": 7.0, "u": 6.0, "p": 5.0, "r2": 4.0, "n2": 3.0, "r3": 2.0}}
        names = trec_specs(DIFF_CUTOFFS)
        for label in (-1, -2, -5):
            qrels = {"q": {"r1": 1, "r2": 2, "r3": 1, "r4": 1, "n1": 0, "n2": 0, "p": label}}
            batch = _batch(qrels, runs)
            theirs = pytrec.RelevanceEvaluator(qrels, PYTREC_NAMES).evaluate(runs)
            assert _differences(batch, _scores(batch, names), theirs) == []


def _batch(qrels: Qrels, runs: Scored) -> Batch:
    from test_differential_pytrec_eval import compile_batch

    return compile_batch(qrels, runs)


# -- (c) by hand ------------------------------------------------------------------------------


def _one(spec: str, labels: dict[str, int], ranking: list[str], **metadata: Any) -> float:
    """The value of ``spec`` for one sample with ``labels`` and ``ranking``."""
    sample: dict[str, Any] = {"id": "q", "expected_output": {"relevance": labels}}
    if metadata:
        sample["metadata"] = metadata
    batch = make_batch([sample], {"q": ranking})
    return float(_engine().metric(spec).score(batch)[0])


#: Four relevant (r4 never retrieved), three judged non-relevant (n3 never retrieved), one
#: pooled but unjudged (p, label -1) and one unpooled (u, no label) document.
LABELS = {"r1": 1, "r2": 2, "r3": 1, "r4": 1, "n1": 0, "n2": 0, "n3": 0, "p": -1}
RANKING = ["n1", "r1", "u", "p", "r2", "n2", "r3", "x"]


class TestByHand:
    def test_bpref(self) -> None:
        """R = 4, N = 3 judged non-relevant, min(N, R) = 3. Judged non-relevant above each
        relevant retrieved: r1 1, r2 1 (p and u are not judged), r3 2; r4 adds 0.
        bpref = (1 - 1/3 + 1 - 1/3 + 1 - 2/3) / 4 = 5/12."""
        assert _one("retrieval-bpref", LABELS, RANKING) == pytest.approx(5 / 12, abs=1e-15)

    def test_bpref_would_differ_if_negative_labels_were_judged(self) -> None:
        """With p judged non-relevant (label 0): N = 4 and r2, r3 see 2, 3 above:
        (1 - 1/4 + 1 - 2/4 + 1 - 3/4) / 4 = 0.375."""
        labels = {**LABELS, "p": 0}
        assert _one("retrieval-bpref", labels, RANKING) == pytest.approx(0.375, abs=1e-15)

    def test_bpref_at_k_cuts_the_ranking_not_the_judgements(self) -> None:
        """Top 5 (as trec_eval -M 5): r3 is no longer retrieved; R and N stay 4 and 3:
        (2/3 + 2/3) / 4 = 1/3. metadata.k does the same."""
        assert _one("retrieval-bpref@5", LABELS, RANKING) == pytest.approx(1 / 3, abs=1e-15)
        assert _one("retrieval-bpref", LABELS, RANKING, k=5) == pytest.approx(1 / 3, abs=1e-15)

    def test_infap(self) -> None:
        """infAP, per relevant document at rank j + 1 with j documents above, of which
        rel, non judged relevant / non-relevant and pool pooled-unjudged (u, unpooled, in
        none): 1/(j+1) + j/(j+1) · (rel + non + pool)/j · (rel + ε)/(rel + non + 2ε).
        r1 (j=1: 0, 1, 0): 1/2 + 1/2 · 1 · ε/(1 + 2ε)
        r2 (j=4: 1, 1, 1): 1/5 + 4/5 · 3/4 · 1/2 = 1/2
        r3 (j=6: 2, 2, 1): 1/7 + 6/7 · 5/6 · 1/2 = 1/2; then / R = 4."""
        eps = trec.INFAP_EPSILON
        expected = (0.5 + 0.5 * eps / (1 + 2 * eps) + 0.5 + 0.5) / 4
        assert _one("retrieval-infap", LABELS, RANKING) == pytest.approx(expected, abs=1e-15)

    def test_infap_with_every_document_judged_is_average_precision(self) -> None:
        """No unpooled or unjudged document above any relevant one: infAP = AP up to ε."""
        labels = {"a": 1, "b": 0, "c": 1, "d": 1}
        ranking = ["a", "b", "c", "d"]
        average_precision = (1 + 2 / 3 + 3 / 4) / 3
        assert _one("retrieval-infap", labels, ranking) == pytest.approx(
            average_precision, abs=1e-5
        )
        assert _one("retrieval-map", labels, ranking) == pytest.approx(average_precision)

    def test_counts(self) -> None:
        """8 retrieved, R = 4, 3 relevant and 2 judged non-relevant among them."""
        counts = ("num-ret", "num-rel", "num-rel-ret", "num-nonrel-judged-ret")
        values = [_one(f"retrieval-{name}", LABELS, RANKING) for name in counts]
        assert values == [8.0, 4.0, 3.0, 2.0]

    def test_set_measures(self) -> None:
        """P = 3/8, R = 3/4: set_F = (1 + β)PR/(βP + R), 1/2 at β = 1; relative P =
        3/min(8, 4); map = P·R."""
        expected = {
            "retrieval-set-precision": 3 / 8,
            "retrieval-set-recall": 3 / 4,
            "retrieval-set-f": 0.5,
            "retrieval-set-f(beta=2)": 3 * (3 / 8) * (3 / 4) / (2 * 3 / 8 + 3 / 4),
            "retrieval-set-relative-precision": 3 / 4,
            "retrieval-set-map": 9 / 32,
        }
        for spec, value in expected.items():
            assert _one(spec, LABELS, RANKING) == pytest.approx(value, abs=1e-15), spec

    def test_utility_coefficients(self) -> None:
        """a·3 + b·(8 - 3) + c·(4 - 3): trec_eval's default -2, and 2·3 - 0.5·5 - 1·1."""
        assert _one("retrieval-utility", LABELS, RANKING) == -2.0
        spec = "retrieval-utility(relevant_retrieved=2, nonrelevant_retrieved=-0.5, relevant_missed=-1)"
        assert _one(spec, LABELS, RANKING) == 2.5

    def test_rprec_mult_and_relative_precision(self) -> None:
        """Rprec_mult_0.50: rank (long)(0.5·4 + 0.9) = 2, one relevant: 1/2; Rprec_mult_3.00:
        rank 12 > 8 retrieved, 3 relevant: 3/12. relative_P_2 = 1/min(2, 4), _7 = 3/min(7, 4)."""
        assert _one("retrieval-rprec-mult(multiplier=0.5)", LABELS, RANKING) == 0.5
        assert _one("retrieval-rprec-mult(multiplier=3.0)", LABELS, RANKING) == 0.25
        assert _one("retrieval-relative-precision-at-k@2", LABELS, RANKING) == 0.5
        assert _one("retrieval-relative-precision-at-k@7", LABELS, RANKING) == 0.75

    def test_a_query_whose_labels_are_all_negative(self) -> None:
        """Nothing judged, nothing relevant: every measure 0 but the counts of what was
        retrieved (pytrec_eval hangs or crashes on such a query, so it is pinned here)."""
        labels = {"n1": -1, "p": -1}
        values = {spec: _one(spec, labels, RANKING) for spec in trec_specs(CUTOFFS).values()}
        nonzero = {spec: v for spec, v in values.items() if v != 0}
        assert nonzero == {
            "retrieval-num-ret": 8.0,
            "retrieval-utility(relevance_threshold=1)": -8.0,
        }
        assert _one("retrieval-unjudged-at-k@8", labels, RANKING) == 1.0

    def test_unjudged_at_k(self) -> None:
        """Top 4: u (no label) and p (label -1) are unjudged: 2/4; k = 10 > 8 retrieved:
        u, p, x over 10."""
        assert _one("retrieval-unjudged-at-k@4", LABELS, RANKING) == 0.5
        assert _one("retrieval-unjudged-at-k@10", LABELS, RANKING) == 0.3


# -- conformance kit --------------------------------------------------------------------------

CASES: list[tuple[type[Any], dict[str, Any], bool]] = [
    (trec.Bpref, {}, True),
    (trec.Bpref, {"k": 3, "relevance_threshold": 2}, True),
    (trec.InfAP, {}, True),
    (trec.InfAP, {"k": 3}, True),
    (trec.NumRet, {}, False),
    (trec.NumRel, {}, False),
    (trec.NumRel, {"zero_without_output": True}, False),
    (trec.NumQ, {}, True),
    (trec.NumRelRet, {}, False),
    (trec.NumNonrelJudgedRet, {}, False),
    (trec.SetPrecision, {}, True),
    (trec.SetPrecision, {"judged_only": True}, True),
    (trec.SetRecall, {}, True),
    (trec.SetF, {}, True),
    (trec.SetF, {"beta": 0.5}, True),
    (trec.SetRelativePrecision, {}, True),
    (trec.SetMAP, {}, True),
    (trec.RelativePrecisionAtK, {}, True),
    (trec.ElevenPointAverage, {}, True),
    (trec.ElevenPointAverage, {"rounding": "trec_eval10"}, True),
    (trec.RPrecisionMultiple, {}, True),
    (trec.RPrecisionMultiple, {"multiplier": 0.2}, True),
    (trec.NDCGRel, {}, True),
    (trec.RNDCG, {}, True),
    (trec.BinG, {}, True),
    (trec.G, {}, True),
    (trec.Utility, {}, False),
    (trec.Utility, {"nonrelevant_retrieved": -0.5, "relevant_missed": -1.0}, False),
    (trec.UnjudgedAtK, {}, True),
]

for _cls, _params, _bounded in CASES:
    _name = f"TestConformance{_cls.__name__}" + "".join(f"_{n}_{v}" for n, v in _params.items())
    globals()[_name] = type(
        _name,
        (MetricConformance,),
        {"metric_class": _cls, "params": _params, "bounded": _bounded},
    )
