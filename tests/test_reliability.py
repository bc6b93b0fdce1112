"""A reliability trial's cases (issue 49): re-scored results files, long rankings, empty
and unrelated inputs, the configuration a command read, a bad ``SOURCE_DATE_EPOCH``,
labels too large for their gain, and the testing kit without pytest. Each gives the right
number or a clear error, the same from the command line and from Python. Every expected
number is derived by hand in the test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import engine
from engine.cli import main


def _samples(count: int) -> list[dict]:
    """q{i} has one relevant document, d{i}."""
    return [{"id": f"q{i}", "input": i, "expected_output": [f"d{i}"]} for i in range(count)]


class TestTestingWithoutPytest:
    """``engine.testing`` imports in a plain script, where pytest is not installed."""

    SCRIPT = """
import sys
sys.modules["pytest"] = None  # as where pytest is not installed: importing it fails
from engine.testing import assert_no_regression
from engine.evaluation.results import read_results
baseline = read_results(sys.argv[1])
assert_no_regression(baseline, sys.argv[1], max_drop=0.0)  # the same results: no drop
try:
    assert_no_regression(read_results(sys.argv[2]), sys.argv[1], max_drop=0.0)
except AssertionError as failed:
    print("regressed:", str(failed).splitlines()[1].strip())
try:
    from engine.testing import MetricConformance
except ImportError as missing:
    print(type(missing).__name__, missing)
"""

    def test_the_gate_runs_in_a_plain_script(self, tmp_path: Path) -> None:
        """Before: ModuleNotFoundError (pytest) on ``from engine.testing import ...``."""
        evaluation = (
            engine.Engine(config={}).dataset(samples=_samples(4)).with_metrics(["retrieval-mrr"])
        )
        evaluation.evaluate({f"q{i}": [f"d{i}"] for i in range(4)}).to_json(tmp_path / "a.json")
        evaluation.evaluate({f"q{i}": ["x", f"d{i}"] for i in range(4)}).to_json(
            tmp_path / "b.json"
        )
        done = subprocess.run(
            [sys.executable, "-c", self.SCRIPT, str(tmp_path / "a.json"), str(tmp_path / "b.json")],
            capture_output=True,
            text=True,
            check=True,
        )
        lines = done.stdout.splitlines()
        # MRR 1 (relevant first) against 1/2 (second): a drop of 0.5 > max_drop 0
        assert lines[0].startswith("regressed: retrieval-mrr")
        assert "1.0000" in lines[0] and "0.5000" in lines[0]
        assert lines[1] == (
            "MissingDependencyError engine.testing.MetricConformance needs the optional extra "
            "'test' (pytest is missing): pip install 'slotwise[test]'"
        )
