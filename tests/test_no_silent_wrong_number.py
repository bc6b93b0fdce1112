"""A harness maintainer's checks (issue 23): bad outputs, partial runs, failing retrievers
and crashing metrics each give the right number or a clear error, never a quietly wrong
one. Every expected number is derived by hand in the test."""

from __future__ import annotations

import json
import math

import attrs
import numpy as np
import pytest

import engine
from engine.analysis.verdict import gate
from engine.cli import main
from engine.evaluation.batch import row_sums
from engine.evaluation.results import read_results
from engine.testing import MetricConformance, assert_no_regression
from metrics_plugins import retrieval

COUNT = 120  # samples; q{i} has one relevant document d{i}


def _samples(count: int = COUNT) -> list[dict]:
    return [{"id": f"q{i}", "input": i, "expected_output": [f"d{i}"]} for i in range(count)]


def _perfect(i: int) -> list[str]:
    return [f"d{i}", "x"]  # the relevant document first: MRR 1


def _flaky(i: int) -> list[str]:
    """The perfect system, failing on a quarter of the calls (every i divisible by 4)."""
    if i % 4 == 0:
        raise TimeoutError(f"call {i} timed out")
    return _perfect(i)


@pytest.fixture
def evaluation(eng: engine.Engine) -> engine.Evaluation:
    return eng.dataset(samples=_samples()).with_metrics(["retrieval-mrr"])


class TestFailingRetriever:
    """25% of the calls fail: 30 of 120 samples are error rows."""

    def test_errors_are_in_the_summary_table_and_json(self, evaluation):
        results = evaluation.run(_flaky, progress=False)
        stats = results.summary()["retrieval-mrr"]
        # the 90 answered samples rank the relevant document first: mean 1, n 90
        assert stats == {
            "mean": 1.0,
            "n": 90,
            "na": 30,
            "errors": 30,
            "error_rate": 0.25,
            "ci": [1.0, 1.0],
        }
        assert json.loads(results.to_json())["summary"]["retrieval-mrr"]["errors"] == 30
        row = results._summary_rows()[0]
        assert row[-1] == "30 (25.0%)"
        assert "30 sample(s) failed and are NA" in results.diagnostics.lines()[0]

    def test_the_gate_fails_on_more_failures_even_when_no_mean_fell(self, evaluation):
        """The 90 pairs are equal (1 vs 1): no drop, no p; the 30 failures alone fail it."""
        baseline = evaluation.run(_perfect, progress=False)
        current = evaluation.run(_flaky, progress=False)
        with pytest.raises(AssertionError) as failed:
            assert_no_regression(current, baseline, max_drop=0.0, min_judged=None)
        message = str(failed.value)
        assert "verdict: REGRESSED" in message and "retrieval-mrr: REGRESSED (failures)" in message
        assert "current failed on 30 sample(s), baseline on 0" in message
        assert "allow_failures=True" in message
        allowed = assert_no_regression(
            current, baseline, max_drop=0.0, allow_failures=True, min_judged=None
        )
        assert allowed.outcome == "held"

    def test_a_comparison_says_how_many_pairs_it_dropped_and_why(self, evaluation):
        baseline = evaluation.run(_perfect, progress=False)
        current = evaluation.run(_flaky, progress=False)
        comparison = engine.compare([baseline, current], names=["base", "flaky"])
        row = comparison.row("retrieval-mrr")
        assert (row.n, row.dropped, row.dropped_failed, row.failed_a, row.failed_b) == (
            90,
            30,
            30,
            0,
            30,
        )
        assert comparison.dropped_lines() == [
            "retrieval-mrr: 30 sample(s) left out: 30 failed on either side"
        ]
        assert "- retrieval-mrr: 30 sample(s) left out: 30 failed on either side" in (
            comparison.to_markdown()
        )
        entry = comparison.to_dict()["comparisons"][0]
        assert entry["dropped_because"] == {"failed": 30, "na": 0, "unpaired": 0}
        assert gate(comparison, min_judged=None).outcome == "regressed"

    def test_the_cli_gate(self, evaluation, tmp_path, capsys):
        evaluation.run(_perfect, progress=False).to_json(tmp_path / "base.json")
        evaluation.run(_flaky, progress=False).to_json(tmp_path / "flaky.json")
        files = [str(tmp_path / "base.json"), str(tmp_path / "flaky.json")]
        argv = ["compare", *files, "--fail-on-regression", "--max-drop", "0", "--allow-unjudged"]
        assert main(argv) == 1
        captured = capsys.readouterr()
        assert "--allow-failures" in captured.err
        assert "30 sample(s) left out: 30 failed on either side" in captured.out
        assert main([*argv, "--allow-failures"]) == 0

    def test_rescoring_keeps_the_error_rows(self, evaluation, tmp_path):
        """Before: the 30 error rows came back as empty rankings, MRR 0, n = 120."""
        results = evaluation.run(_flaky, progress=False)
        results.to_json(tmp_path / "flaky.json")
        for saved in (results, read_results(tmp_path / "flaky.json")):
            again = evaluation.evaluate(saved).summary()["retrieval-mrr"]
            assert (again["mean"], again["n"], again["errors"]) == (1.0, 90, 30)


class TestBadOutputs:
    """What a retriever returns, each accepted with the right number or refused clearly."""

    @pytest.mark.parametrize(
        ("system", "mrr"),
        [
            (lambda i: ("x", f"d{i}"), 0.5),  # a tuple: ranked ids, relevant at rank 2
            (lambda i: np.array(["x", f"d{i}"]), 0.5),  # a numpy array of str ids
            (lambda i: {"retrieved": ("x", "y", f"d{i}")}, 1 / 3),
            (lambda i: {"retrieved": np.array(["x", f"d{i}"]), "pool": np.array(["x"])}, 0.5),
        ],
    )
    def test_sequences_are_ranked_ids(self, evaluation, system, mrr):
        stats = evaluation.run(system, progress=False).summary()["retrieval-mrr"]
        assert (stats["mean"], stats["n"], stats["errors"]) == (mrr, COUNT, 0)

    def test_numpy_integer_ids(self, eng):
        """faiss returns int64 arrays: id 100 + i is document '100+i' (ints are ids)."""
        samples = [{"id": f"q{i}", "input": i, "expected_output": [100 + i]} for i in range(8)]
        evaluation = eng.dataset(samples=samples).with_metrics(["retrieval-mrr"])
        array = evaluation.run(lambda i: np.array([7, 100 + i], dtype=np.int64), progress=False)
        assert array.summary()["retrieval-mrr"]["mean"] == 0.5
        scalars = evaluation.run(lambda i: [np.int32(100 + i)], progress=False)
        assert scalars.summary()["retrieval-mrr"]["mean"] == 1.0
        scorer = evaluation.scorer()
        assert scorer.add("q3", np.array([1, 2, 103])) == {"retrieval-mrr": 1 / 3}

    @pytest.mark.parametrize(
        ("system", "got"),
        [
            (lambda i: None, "NoneType None"),
            (lambda i: {f"d{i}": 0.9, "x": 0.1}, "dict {'d0': 0.9, 'x': 0.1}"),
            (lambda i: [(f"d{i}", 0.9)], "list [('d0', 0.9)]"),
            (lambda i: np.array([["x", f"d{i}"]]), "ndarray"),  # 2-D, as index.search gives
        ],
    )
    def test_a_run_of_only_bad_outputs_raises_one_clear_error(self, evaluation, system, got):
        """Scores ranked by a dict's values, or (id, score) pairs, are refused rather than
        guessed at: the harness sorts them (ties are its call)."""
        with pytest.raises(engine.InputError) as raised:
            evaluation.run(system, progress=False)
        problem = raised.value.problems[0]
        assert problem.sample_id == "q0"
        assert f"the system returned {got}" in problem.message
        assert "accepted: a list, tuple or 1-D numpy array of document ids" in problem.message
        assert "every output failed validation (120 invalid, 0 failed calls)" in str(raised.value)

    def test_some_bad_outputs_are_error_rows(self, evaluation):
        """One in three returns None: 40 error rows naming the type, 80 scored (MRR 1)."""
        results = evaluation.run(lambda i: None if i % 3 == 0 else _perfect(i), progress=False)
        stats = results.summary()["retrieval-mrr"]
        assert (stats["mean"], stats["n"], stats["errors"]) == (1.0, 80, 40)
        assert results.diagnostics.errors["q0"].startswith("invalid output (NoneType)")


class TestPartialRuns:
    def test_results_before_every_sample_refuses(self, evaluation):
        """50 of 120 added: never the 70 others scored as 0."""
        scorer = evaluation.scorer()
        for i in range(50):
            scorer.add(f"q{i}", _perfect(i))
        with pytest.raises(engine.InputError, match=r"70 of 120 samples not added yet"):
            scorer.results()

    def test_partial_scores_only_what_was_added(self, evaluation):
        """q{i} ranks its relevant document at rank i % 5 + 1: MRR 1/(i % 5 + 1); 50
        samples hold ten of each of 1, 1/2, 1/3, 1/4, 1/5; one failed call is NA."""
        scorer = evaluation.scorer()
        for i in range(50):
            scorer.add(f"q{i}", [f"x{j}" for j in range(i % 5)] + [f"d{i}"])
        scorer.add_error("q50", TimeoutError("late"))
        results = scorer.results(partial=True)
        stats = results.summary()["retrieval-mrr"]
        assert stats["mean"] == math.fsum([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5] * 10) / 50
        assert (stats["n"], stats["na"], stats["errors"]) == (50, 1, 1)
        assert results.provenance["partial"] == {"samples_scored": 51, "samples_in_dataset": 120}
        assert json.loads(results.to_json())["provenance"]["partial"]["samples_scored"] == 51

    def test_partial_results_keep_the_dataset_wide_largest_label(self, eng):
        """ERR's max_grade is the dataset's largest label (3), also when only a sample
        labelled 1 was added: relevant first with grade 1 is (2^1 - 1) / 2^3 = 1/8."""
        samples = [
            {"id": "low", "expected_output": {"relevance": {"a": 1}}},
            {"id": "high", "expected_output": {"relevance": {"b": 3}}},
        ]
        scorer = eng.dataset(samples=samples).with_metrics(["retrieval-err-at-k"]).scorer()
        scorer.add("low", ["a"])
        values = scorer.results(partial=True).values("retrieval-err-at-k")
        assert values.tolist() == [1 / 8]


@attrs.frozen
class _Crashing(engine.MetricBase):
    """Raises while scoring."""

    alias = "crashing-test"

    def score(self, batch):
        raise ZeroDivisionError("division by zero in the plugin")


class TestCrashingMetric:
    def test_the_others_are_returned(self, eng, evaluation):
        eng.register_metric(_Crashing)
        results = evaluation.dataset.with_metrics(["retrieval-mrr", "crashing-test"]).run(
            _flaky, progress=False
        )
        summary = results.summary()
        assert (summary["retrieval-mrr"]["mean"], summary["retrieval-mrr"]["n"]) == (1.0, 90)
        crashed = summary["crashing-test"]
        assert (crashed["mean"], crashed["n"], crashed["errors"]) == (None, 0, COUNT)
        assert "ZeroDivisionError: division by zero in the plugin" in crashed["error"]
        document = json.loads(results.to_json())
        assert document["diagnostics"]["metric_errors"][0]["metric"] == "crashing-test"
        assert results._summary_rows()[1][1] == "FAILED"

    def test_a_scorer_returns_the_others_and_records_it(self, eng, evaluation):
        eng.register_metric(_Crashing)
        scorer = evaluation.dataset.with_metrics(["retrieval-mrr", "crashing-test"]).scorer()
        for i in range(COUNT):
            scores = scorer.add(f"q{i}", ["x", f"d{i}"])
        assert scores["retrieval-mrr"] == 0.5 and math.isnan(scores["crashing-test"])
        results = scorer.results()
        assert "division by zero" in results.diagnostics.metric_errors["crashing-test"]
        assert results.summary()["retrieval-mrr"]["mean"] == 0.5

    def test_the_cli_exits_3(self, tmp_path, monkeypatch, capsys):
        """MRR raising (injected) while precision@1 works: its values written, exit 3."""

        def crash(self, batch):
            raise ZeroDivisionError("injected")

        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(retrieval.MRR, "score", crash)
        (tmp_path / "data.json").write_text(json.dumps({"samples": _samples(4)}))
        (tmp_path / "out.json").write_text(json.dumps({f"q{i}": ["x", f"d{i}"] for i in range(4)}))
        code = main(
            [
                *("run", "data.json", "--outputs", "out.json", "--format", "json"),
                *("--metrics", "retrieval-mrr,retrieval-precision-at-k@2"),
            ]
        )
        captured = capsys.readouterr()
        assert code == 3
        assert "metric retrieval-mrr FAILED" in captured.err
        summary = json.loads(captured.out)["summary"]
        assert summary["retrieval-precision-at-k@2"]["mean"] == 0.5  # 1 of 2 relevant
        assert summary["retrieval-mrr"]["mean"] is None


@attrs.frozen
class _AxisSumDCG(engine.MetricBase):
    """DCG over the whole ranking, each row summed with ``ndarray.sum(axis=1)``."""

    alias = "axis-sum-dcg-test"
    requires = frozenset({"relevance"})
    rows_left_to_right: bool = False

    def score(self, batch):
        labels = np.nan_to_num(batch.ranked_labels, nan=0.0)
        terms = labels / np.log2(np.arange(labels.shape[1]) + 2.0)
        return row_sums(terms) if self.rows_left_to_right else terms.sum(axis=1)


class TestConformanceKit:
    """The kit fails a metric whose value depends on the padded width."""

    class Kit(MetricConformance):
        metric_class = _AxisSumDCG
        bounded = False
        check_entry_point = False

    def test_sum_axis_1_fails_the_kit(self):
        with pytest.raises(AssertionError, match="value\\(s\\) differ from the batch's"):
            self.Kit().test_one_sample_scores_alike_in_any_batch()

    def test_row_sums_passes_it(self):
        self.Kit.params = {"rows_left_to_right": True}
        try:
            self.Kit().test_one_sample_scores_alike_in_any_batch()
        finally:
            self.Kit.params = {}


def test_at_k_keeps_explicit_cutoffs(eng):
    """``@10`` stays @10 (as --k keeps it); the metrics without a cutoff take each K."""
    evaluation = (
        eng.dataset(samples=_samples(4))
        .with_metrics(["retrieval-ndcg-at-k@10", "retrieval-recall-at-k", "retrieval-mrr"])
        .at_k([1, 3, 5])
    )
    assert list(evaluation.plan.labels) == [
        "retrieval-ndcg-at-k@10",
        "retrieval-recall-at-k@1",
        "retrieval-recall-at-k@3",
        "retrieval-recall-at-k@5",
        "retrieval-mrr@1",
        "retrieval-mrr@3",
        "retrieval-mrr@5",
    ]
