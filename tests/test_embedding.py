"""A good citizen inside someone else's process: no logging configuration, no output but
a progress bar on a terminal, one Evaluation shared by many threads."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

HARNESS = textwrap.dedent(
    """
    import asyncio, logging, structlog
    import engine

    samples = [{"id": f"q{i}", "input": i, "expected_output": [f"d{i}"]} for i in range(20)]
    evaluation = engine.Engine(config={}).dataset(samples=samples).with_metrics(["retrieval-mrr"])
    evaluation.evaluate({f"q{i}": [f"d{i}"] for i in range(20)})
    evaluation.run(lambda i: ["x", f"d{i}"])

    async def retrieve(i):
        return [f"d{i}"]

    asyncio.run(evaluation.arun(retrieve))
    scorer = evaluation.scorer()
    scorer.add("q0", ["d0"])
    scorer.results(partial=True)
    engine.compare([evaluation.evaluate({"q0": ["x"]}), evaluation.evaluate({"q1": ["d1"]})])
    assert logging.getLogger().handlers == [], "configured the root logger"
    assert logging.getLogger("slotwise").handlers == [], "configured its own logger"
    assert not structlog.is_configured(), "configured structlog"
    """
)


def test_silent_and_unconfigured_in_a_harness():
    """Evaluate, run, arun, a scorer and a comparison in a process with stderr not a
    terminal: nothing printed, logging and structlog left as they were."""
    done = subprocess.run(
        [sys.executable, "-c", HARNESS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")


def test_events_reach_the_harness_logging(caplog, eng):
    """slotwise's events go to the stdlib logger ``slotwise``, where the harness's own
    logging configuration decides what to show."""
    samples = [{"id": "q1", "expected_output": ["a"]}]
    with caplog.at_level(logging.INFO, logger="slotwise"):
        eng.dataset(samples=samples).with_metrics(["retrieval-mrr"]).evaluate({"q1": ["a"]})
    assert any("evaluation.finished" in record.getMessage() for record in caplog.records)


def test_one_evaluation_many_threads(eng):
    """Sixteen threads evaluating different outputs with one Evaluation each get what a
    lone call gets: MRR 1/r when the relevant document is at rank r."""
    samples = [{"id": f"q{i}", "expected_output": ["rel"]} for i in range(50)]
    evaluation = eng.dataset(samples=samples).with_metrics(["retrieval-mrr"])

    def mean_mrr(rank: int) -> float:
        run = {f"q{i}": [*(f"x{j}" for j in range(rank - 1)), "rel"] for i in range(50)}
        return float(evaluation.evaluate(run).summary()["retrieval-mrr"]["mean"])

    alone = {rank: mean_mrr(rank) for rank in (1, 2, 3, 4)}
    assert alone == pytest.approx({rank: 1 / rank for rank in alone}, abs=1e-15)
    with ThreadPoolExecutor(16) as pool:
        means = list(pool.map(mean_mrr, [1 + n % 4 for n in range(64)]))
    assert means == [alone[1 + n % 4] for n in range(64)]
