"""Conformance with trec_eval's own test collection: tests/data/trec_eval holds
qrels.test, results.test and out.test.aq (``trec_eval -m all_trec -q``). Every per-query
and ``all`` value of the classic measures must be reproduced to the 4 printed decimals.

Convention: trec_eval without ``-c`` scores only queries present in both the qrels and the
run, and ``all`` averages over those. In this collection both hold the same three queries
(301, 302, 303; ``num_q all 3``), so that average equals slotwise's mean over the dataset.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from conftest import qrels_of, run_of
from trec_names import trec_measures

import engine
from engine.io.trec import read_qrels, read_run
from metrics_plugins.retrieval import RECALL_LEVELS, _iprec_at_recall

TOLERANCE = 5e-5  # half a unit in the 4th printed decimal
CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)


MEASURES = trec_measures(CUTOFFS, (1, 5, 10))
IPREC = [f"iprec_at_recall_{level:.2f}" for level in RECALL_LEVELS]


@pytest.fixture
def results(eng: engine.Engine, trec_collection: tuple) -> engine.Results:
    """Every classic measure evaluated through the public API."""
    qrels, run, _ = trec_collection
    specs = [*MEASURES.values(), "retrieval-auc-pr(rounding=trec_eval10)"]
    return eng.dataset(samples=qrels).with_metrics(specs).evaluate(run)


def _scores(results: engine.Results, measure: str) -> tuple[np.ndarray, float]:
    """Per-sample values and aggregate of a measure (labels follow the order of MEASURES)."""
    label = results.labels[list(MEASURES).index(measure)]
    return results.scores[label], results.aggregates[label]


class TestTrecEvalTestCollection:
    """slotwise reproduces out.test.aq."""

    def test_queries_evaluated_are_those_in_qrels_and_run(self, trec_collection: tuple) -> None:
        """Both files hold queries 301-303, so trec_eval's num_q (3) is every sample."""
        qrels, run, reference = trec_collection
        assert set(qrels) == set(run) == {"301", "302", "303"}
        assert reference["num_q"]["all"] == 3
        assert {qid: len(docs) for qid, docs in run.items()} == {
            q: reference["num_ret"][q] for q in run
        }
        assert {q: sum(v >= 1 for v in qrels[q].values()) for q in qrels} == {
            q: reference["num_rel"][q] for q in qrels
        }

    @pytest.mark.parametrize("measure", list(MEASURES))
    def test_measure(self, results: engine.Results, trec_collection: tuple, measure: str) -> None:
        """Per query and 'all' to the 4 printed decimals."""
        reference = trec_collection[2][measure]
        values, aggregate = _scores(results, measure)
        per_query = dict(zip(results.sample_ids, values.tolist(), strict=True))
        for qid, value in per_query.items():
            assert abs(value - reference[qid]) <= TOLERANCE, (qid, value, reference[qid])
        assert abs(aggregate - reference["all"]) <= TOLERANCE

    @pytest.mark.parametrize("level", range(len(RECALL_LEVELS)))
    def test_iprec_at_recall(self, eng: engine.Engine, trec_collection: tuple, level: int) -> None:
        """The 11 interpolated-precision points, with trec_eval 10's lround cutoffs."""
        qrels, run, reference = trec_collection
        batch = eng.dataset(samples=qrels).batch(run)
        points = _iprec_at_recall(batch, rounding="trec_eval10")[:, level]
        expected = reference[IPREC[level]]
        for qid, value in zip(batch.sample_ids, points.tolist(), strict=True):
            assert abs(value - expected[qid]) <= TOLERANCE, (qid, value, expected[qid])
        assert abs(points.mean() - expected["all"]) <= TOLERANCE

    def test_out_test_aq_uses_lround_not_trec_eval9_rounding(
        self, eng: engine.Engine, trec_collection: tuple
    ) -> None:
        """The file differs from trec_eval 9 / pytrec_eval rounding at exactly two points:
        301 @ 0.10 (|Rel| 474: 47.4 -> 47 vs 48) and 302 @ 0.60 (|Rel| 77: 46.2 -> 46 vs 47)."""
        qrels, run, reference = trec_collection
        batch = eng.dataset(samples=qrels).batch(run)
        old = _iprec_at_recall(batch, rounding="trec_eval9")
        expected = np.array([[reference[m][q] for m in IPREC] for q in batch.sample_ids])
        off = {
            (batch.sample_ids[i], IPREC[j])
            for i, j in zip(*np.nonzero(np.abs(old - expected) > TOLERANCE), strict=True)
        }
        assert off == {("301", "iprec_at_recall_0.10"), ("302", "iprec_at_recall_0.60")}

    def test_auc_pr_is_the_trapezoid_area_of_the_printed_points(
        self, results: engine.Results, trec_collection: tuple
    ) -> None:
        """retrieval-auc-pr(rounding=trec_eval10) = trapezoid over iprec_at_recall_0.00..1.00."""
        reference = trec_collection[2]
        label = results.labels[-1]
        for i, qid in enumerate(results.sample_ids):
            points = [reference[m][qid] for m in IPREC]
            area = sum(0.1 * (a + b) / 2 for a, b in pairwise(points))
            assert abs(results.scores[label][i] - area) <= TOLERANCE


def test_files_decorated_as_trec_eval_allows_read_the_same(reference_data: Path, tmp_path: Path):
    """trec_eval's quicktest also feeds it qrels with comment lines and a run with extra
    fields after the sixth; decorated so (plus blank lines and tabs), the test collection
    reads exactly as the plain files, whose values out.test.aq pins."""
    base = reference_data / "trec_eval"
    qrels_lines = (base / "qrels.test").read_text().splitlines()
    run_lines = (base / "results.test").read_text().splitlines()
    decorated_qrels = tmp_path / "qrels.test.with-comments"
    decorated_qrels.write_text(
        "# qrels with comments\n"
        + "".join(f"{line}\n# after line {i}\n" for i, line in enumerate(qrels_lines))
    )
    decorated_run = tmp_path / "results.trunc"
    decorated_run.write_text(
        "\n".join(f"{line.replace(' ', chr(9), 1)} junk for future expansion" for line in run_lines)
        + "\n\n"
    )
    assert qrels_of(read_qrels(decorated_qrels)) == qrels_of(read_qrels(base / "qrels.test"))
    assert run_of(read_run(decorated_run)) == run_of(read_run(base / "results.test"))
