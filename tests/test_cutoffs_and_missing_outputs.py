"""Issue 60's first and seventh silent numbers: an explicit ``@K`` is K for every sample
(a sample's ``metadata.k`` cuts only metrics whose k is left open), and a sample with no
output means the same from the command line as from Python. Values by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import engine
from engine.cli import main

#: q1 asks for k = 3 in its metadata; both rank the relevant r second.
SAMPLES = [
    {"id": "q1", "expected_output": {"relevance": {"r1": 1}}, "metadata": {"k": 3}},
    {"id": "q2", "expected_output": {"relevance": {"r2": 1}}},
]
RUN = {"q1": ["x", "r1", "y", "z"], "q2": ["x", "r2", "y", "z"]}


def _values(specs: list[str]) -> dict[str, list[float]]:
    results = engine.Engine(config={}).dataset(samples=SAMPLES).with_metrics(specs).evaluate(RUN)
    return {label: results.values(label).tolist() for label in results.labels}


class TestExplicitCutoffs:
    def test_an_explicit_k_is_k_for_every_sample(self) -> None:
        """hit@1 and MRR@1: r at rank 2 is outside the top 1 of both questions, 0 and 0
        (before: q1's metadata.k = 3 made MRR@1 0.5 while hit@1 was 0)."""
        found = _values(["retrieval-hit-at-k@1", "retrieval-mrr@1", "retrieval-ndcg-at-k@1"])
        assert found == {
            "retrieval-hit-at-k@1": [0.0, 0.0],
            "retrieval-mrr@1": [0.0, 0.0],
            "retrieval-ndcg-at-k@1": [0.0, 0.0],
        }

    def test_metadata_k_cuts_a_metric_whose_k_is_open(self) -> None:
        """Precision with k left open: q1's own k = 3 gives 1/3, q2 the default 5 gives
        1/5; with @10 both are 1/10. MRR left open: q1 cut at 3 (r at 2: 1/2), q2 uncut
        (1/2)."""
        found = _values(
            ["retrieval-precision-at-k", "retrieval-precision-at-k@10", "retrieval-mrr"]
        )
        assert found["retrieval-precision-at-k"] == pytest.approx([1 / 3, 1 / 5])
        assert found["retrieval-precision-at-k@10"] == pytest.approx([0.1, 0.1])
        assert found["retrieval-mrr"] == pytest.approx([0.5, 0.5])

    def test_judged_at_k_counts_k_documents_a_sample(self) -> None:
        """judged@1 of two questions counts 2 documents (before: q1's k = 3 counted 3 of
        its own, 4 in all); neither top-1 document x is judged."""
        results = (
            engine.Engine(config={})
            .dataset(samples=SAMPLES)
            .with_metrics(["retrieval-ndcg-at-k@1", "retrieval-precision-at-k"])
            .evaluate(RUN)
        )
        assert results.diagnostics.judged[1] == (0, 2)
        # judged@5 (the open k's default) is of the top 5 of each: 4 retrieved each, r judged
        assert results.diagnostics.judged[5] == (2, 8)

    def test_curves_at_k_are_k(self) -> None:
        """``at_k([1, 3])``: each K is K for every sample, q1's metadata.k aside."""
        evaluation = (
            engine.Engine(config={})
            .dataset(samples=SAMPLES)
            .with_metrics(["retrieval-recall-at-k"])
            .at_k([1, 3])
        )
        results = evaluation.evaluate(RUN)
        assert results.values("retrieval-recall-at-k@1").tolist() == [0.0, 0.0]
        assert results.values("retrieval-recall-at-k@3").tolist() == [1.0, 1.0]


class TestMissingOutputs:
    def test_the_same_two_files_give_the_same_means(self, tmp_path: Path, capsys) -> None:
        """Outputs for q1 only: an error row for q2 both from Python and from `slotwise
        run` (before: the CLI scored q2 as an empty ranking, mean 0.25 over 2 against
        0.5 over 1 and an error); --missing empty makes it an empty ranking in both."""
        dataset, outputs = tmp_path / "data.json", tmp_path / "out.json"
        dataset.write_text(json.dumps({"samples": SAMPLES}))
        outputs.write_text(json.dumps({"q1": RUN["q1"]}))
        metric = "retrieval-mrr"
        python = engine.Engine(config={}).dataset(dataset).with_metrics([metric]).evaluate(outputs)
        assert python.summary()[metric]["mean"] == 0.5 and python.errors(metric) == 1
        argv = ["run", str(dataset), "--outputs", str(outputs), "--metrics", metric]
        written = tmp_path / "r.json"
        assert main([*argv, "--format", "json", "--output", str(written)]) == 3
        cli = json.loads(written.read_text())["summary"][metric]
        assert (cli["mean"], cli["n"], cli["errors"]) == (0.5, 1, 1)
        assert (
            main([*argv, "--missing", "empty", "--format", "json", "--output", str(written)]) == 0
        )
        empty = json.loads(written.read_text())["summary"][metric]
        assert (empty["mean"], empty["n"], empty["missing_outputs"]) == (0.25, 2, 1)
        python_empty = (
            engine.Engine(config={})
            .dataset(dataset)
            .with_metrics([metric])
            .evaluate(outputs, missing="empty")
        )
        assert math.isclose(python_empty.summary()[metric]["mean"], empty["mean"])
