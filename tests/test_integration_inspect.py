"""The Inspect AI scorer, through real ``inspect_ai.eval`` runs on the mock model (offline):
each sample scores as slotwise scores it, and the logged means and confidence intervals
are slotwise's summary of the same outputs."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage
from inspect_ai.solver import Generate, Solver, TaskState, solver

import engine
from engine.errors import MetricParameterError, MissingDependencyError
from engine.integrations.inspect_ai import slotwise_ci, slotwise_mean, slotwise_scorer

METRICS = ["retrieval-ndcg-at-k@10", "retrieval-mrr", "retrieval-recall-at-k@2"]
NDCG, MRR, RECALL = METRICS

#: id, relevance labels, ranked ids (None: the system returned nothing). q3 sits in the
#: middle so that its NA row must keep its place for the bootstrap to match.
DATA: list[tuple[str, Any, list[str] | None]] = [
    ("q1", {"d1": 2, "d2": 1}, ["d3", "d1", "d2"]),
    ("q2", ["d5"], ["d5", "d6"]),
    ("q3", {"d7": 1}, None),
    ("q4", {"d8": 3, "d9": 1}, ["d9", "d0", "d8"]),
    ("q5", {"d4": 1}, []),
    ("q6", {"d2": 1, "d3": 1}, ["d1", "d2", "d3"]),
]
RUN = {qid: ranked for qid, _, ranked in DATA if ranked is not None}
QRELS = {
    qid: dict.fromkeys(labels, 1) if isinstance(labels, list) else labels for qid, labels, _ in DATA
}


def _answer(*_: Any) -> ModelOutput:
    """The mock model's reply, with its usage given (so no tokenizer is downloaded)."""
    output = ModelOutput.from_content("mockllm", "an answer")
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


def _eval(task: Task, log_dir: Path) -> EvalLog:
    (log,) = eval(
        task,
        model="mockllm/model",
        model_args={"custom_outputs": _answer},
        log_dir=str(log_dir),
        display="none",
    )
    assert log.status == "success", log.error
    return log


@solver
def retrieve() -> Solver:
    """A RAG step: put the retriever's ranked ids in the store, then generate."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        ranked = RUN.get(str(state.sample_id))
        if ranked is not None:
            state.store.set("retrieved_ids", ranked)
        return await generate(state)

    return solve


def _scores(log: EvalLog) -> dict[str, dict[str, Any]]:
    assert log.samples is not None
    return {str(s.id): s.scores["slotwise_scorer"].model_dump() for s in log.samples}  # type: ignore[index]


def _summary(eng: engine.Engine) -> dict[str, dict[str, Any]]:
    """slotwise's summary of DATA, q3 an error row (as the scorer records it)."""
    scorer = eng.dataset(QRELS).with_metrics(METRICS).scorer()
    for qid, _, ranked in DATA:
        if ranked is None:
            scorer.add_error(qid, "no retrieved ids")
        else:
            scorer.add(qid, ranked)
    return scorer.results().summary()


def _assert_metrics_are(metrics: dict[str, Any], summary: dict[str, dict[str, Any]]) -> None:
    for label, stats in summary.items():
        assert metrics[label].value == stats["mean"]
        assert metrics[f"{label}/ci_low"].value == stats["ci"][0]
        assert metrics[f"{label}/ci_high"].value == stats["ci"][1]
    assert len(metrics) == 3 * len(summary)


@pytest.fixture(scope="module")
def eng() -> engine.Engine:
    return engine.Engine(config={})


@pytest.fixture(scope="module")
def metadata_log(eng: engine.Engine, tmp_path_factory: pytest.TempPathFactory) -> EvalLog:
    """Ranked ids and labels both in each sample's metadata."""
    samples = [
        Sample(
            id=qid,
            input=f"question {qid}",
            metadata={"relevance": labels} | ({} if ranked is None else {"retrieved_ids": ranked}),
        )
        for qid, labels, ranked in DATA
    ]
    task = Task(dataset=MemoryDataset(samples), scorer=slotwise_scorer(METRICS, engine=eng))
    return _eval(task, tmp_path_factory.mktemp("logs"))


def test_sample_scores_are_slotwise(metadata_log: EvalLog, eng: engine.Engine) -> None:
    """Each sample's value is slotwise's for the same labels and ranking; hand-checked for
    q1: d1 (grade 2) at rank 2, d2 (grade 1) at rank 3."""
    scores = _scores(metadata_log)
    results = eng.dataset(QRELS).with_metrics(METRICS).evaluate(RUN)
    for row, qid in enumerate(results.sample_ids):
        if qid in RUN:
            assert scores[qid]["value"] == {label: results.values(label)[row] for label in METRICS}
            assert scores[qid]["reason"] is None
    q1 = scores["q1"]["value"]
    assert q1[MRR] == 1 / 2
    assert q1[RECALL] == 1 / 2
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert q1[NDCG] == pytest.approx(dcg / ideal, rel=1e-12)
    assert scores["q4"]["value"][MRR] == 1.0 and scores["q5"]["value"][MRR] == 0.0


def test_missing_ranking_is_an_na_row(metadata_log: EvalLog) -> None:
    """No retrieved ids: NA for every label, and the explanation says where it looked."""
    q3 = _scores(metadata_log)["q3"]
    assert all(math.isnan(v) for v in q3["value"].values()) and len(q3["value"]) == 3
    assert q3["reason"] == "scoring_failed"
    assert "'retrieved_ids'" in q3["explanation"]


def test_logged_aggregates_are_slotwise_summary(metadata_log: EvalLog, eng: engine.Engine) -> None:
    """Means and bootstrap CIs, bit for bit slotwise's, in memory and in the log file."""
    summary = _summary(eng)
    assert summary[MRR]["n"] == 5 and summary[MRR]["na"] == 1
    assert metadata_log.results is not None
    (score,) = metadata_log.results.scores
    _assert_metrics_are(score.metrics, summary)
    (reread,) = read_eval_log(metadata_log.location).results.scores  # type: ignore[union-attr]
    _assert_metrics_are(reread.metrics, summary)


def test_store_and_qrels(eng: engine.Engine, tmp_path: Path, metadata_log: EvalLog) -> None:
    """A solver leaves the ranked ids in the store; the labels are qrels by sample id."""
    samples = [Sample(id=qid, input=f"question {qid}") for qid, _, _ in DATA]
    task = Task(
        dataset=MemoryDataset(samples),
        solver=retrieve(),
        scorer=slotwise_scorer(METRICS, qrels=QRELS, engine=eng),
    )
    log = _eval(task, tmp_path)
    scores, expected = _scores(log), _scores(metadata_log)
    for qid in RUN:
        assert scores[qid]["value"] == expected[qid]["value"]
        assert scores[qid]["explanation"].startswith("ranked ids from the store")
    assert log.results is not None
    _assert_metrics_are(log.results.scores[0].metrics, _summary(eng))


def test_dataset_by_id(eng: engine.Engine, tmp_path: Path) -> None:
    """A slotwise Dataset keyed by (integer) Inspect ids; an unknown id and an invalid
    output are NA rows that say why."""
    dataset = eng.dataset(
        samples=[{"id": "1", "expected_output": ["d1"]}, {"id": "2", "expected_output": ["d1"]}]
    )
    samples = [
        Sample(id=1, input="a", metadata={"retrieved_ids": ["d2", "d1"]}),
        Sample(id=2, input="b", metadata={"retrieved_ids": "d1"}),
        Sample(id=3, input="c", metadata={"retrieved_ids": ["d1"]}),
    ]
    task = Task(dataset=MemoryDataset(samples), scorer=slotwise_scorer([MRR], dataset=dataset))
    scores = _scores(_eval(task, tmp_path))
    assert scores["1"]["value"] == {MRR: 0.5}
    for qid, why in (("2", "actual_output"), ("3", "no sample with this id")):
        assert math.isnan(scores[qid]["value"][MRR])
        assert why in scores[qid]["explanation"]


def test_ci_level_from_task_metrics(eng: engine.Engine, tmp_path: Path) -> None:
    """Another confidence level: the Task's metrics replace the scorer's."""
    samples = [Sample(id=qid, input=qid, metadata={"retrieved_ids": RUN[qid]}) for qid in RUN]
    task = Task(
        dataset=MemoryDataset(samples),
        scorer=slotwise_scorer([MRR], qrels=QRELS, engine=eng),
        metrics=[slotwise_mean(), slotwise_ci(level=0.5, resamples=200, seed=7)],
    )
    log = _eval(task, tmp_path)
    results = eng.dataset({q: QRELS[q] for q in RUN}).with_metrics([MRR]).evaluate(RUN)
    summary = results.summary(level=0.5, resamples=200, seed=7)
    assert log.results is not None
    _assert_metrics_are(log.results.scores[0].metrics, {MRR: summary[MRR]})
    assert summary[MRR]["ci"] != results.summary()[MRR]["ci"]


def test_custom_aggregate_refused() -> None:
    """A metric whose aggregate is not the mean cannot be summarised by slotwise_mean."""

    @attrs.frozen
    class Median(engine.MetricBase):
        alias = "test-inspect-median"

        def score(self, batch: Any) -> np.ndarray:
            return np.ones(len(batch))

        def aggregate(self, values: np.ndarray) -> float:
            return float(np.nanmedian(values))

    custom = engine.Engine(config={})
    custom.register_metric(Median)
    with pytest.raises(MetricParameterError, match="test-inspect-median"):
        slotwise_scorer(["test-inspect-median"], engine=custom)


def test_without_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing the integration without inspect_ai names the extra to install."""
    monkeypatch.setitem(sys.modules, "inspect_ai.scorer", None)
    monkeypatch.delitem(sys.modules, "engine.integrations.inspect_ai")
    with pytest.raises(MissingDependencyError, match=r"slotwise\[inspect\]"):
        importlib.import_module("engine.integrations.inspect_ai")
