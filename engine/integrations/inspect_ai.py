"""Inspect AI: score each sample's retrieved document ids with slotwise metrics, and
aggregate them with slotwise's exact means and bootstrap confidence intervals.

A solver (or the dataset) leaves the ranked ids in ``state.store`` or the sample's
metadata under ``retrieved_ids``; the relevance labels come from qrels or a slotwise
dataset keyed by the Inspect sample id, or from the sample's metadata (``relevance``)::

    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from engine.integrations.inspect_ai import slotwise_scorer

    samples = [
        Sample(id="q1", input="...",
               metadata={"relevance": {"d1": 2, "d2": 1}, "retrieved_ids": ["d3", "d1"]}),
    ]
    task = Task(dataset=samples, solver=[],
                scorer=slotwise_scorer(["retrieval-ndcg-at-k@10", "retrieval-mrr"]))
    log = eval(task, model="mockllm/model")[0]
    log.results.scores[0].metrics["retrieval-mrr"].value  # also "retrieval-mrr/ci_low", ".../ci_high"

Each sample's score is ``{label: value}`` (NaN = NA), what slotwise's
:class:`~engine.evaluation.scorer.Scorer` gives for it. A sample that cannot be scored (no
retrieved ids, no labels, an invalid output) is NA for every label and its explanation
says why: an error row, as in :meth:`Evaluation.run`. Needs ``pip install 'slotwise[inspect]'``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from engine.errors import InputError, MetricParameterError, MissingDependencyError
from engine.evaluation.api import Dataset, Engine, Evaluation
from engine.evaluation.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED, Bootstrap, Tally

try:
    from inspect_ai.scorer import (
        Metric,
        SampleScore,
        Score,
        Scorer,
        Target,
        Value,
        metric,
        scorer,
    )
    from inspect_ai.solver import TaskState
except ImportError as error:
    raise MissingDependencyError("the Inspect AI scorer", "inspect", error) from error

__all__ = ["slotwise_ci", "slotwise_mean", "slotwise_scorer"]


def _table(scores: list[SampleScore]) -> tuple[list[str], npt.NDArray[np.float64]]:
    """The labels, and the scores as a (samples x labels) array in Inspect's order."""
    rows = [score.score.as_dict() for score in scores]
    labels = list(rows[0]) if rows else []
    values = np.full((len(rows), len(labels)), math.nan)
    for i, row in enumerate(rows):
        for j, label in enumerate(labels):
            value = row.get(label)
            if value is not None:
                values[i, j] = float(value)
    return labels, values


@metric
def slotwise_mean() -> Metric:
    """Per label, the exact mean of the non-NA values, as slotwise's summary gives it
    (NaN where every value is NA)."""

    def compute(scores: list[SampleScore]) -> Value:
        labels, values = _table(scores)
        means: dict[str, float] = {}
        for j, label in enumerate(labels):
            tally = Tally()
            tally.add(values[:, j])
            means[label] = tally.mean
        return means

    return compute


@metric
def slotwise_ci(
    level: float = 0.95, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Metric:
    """Per label, ``{label}/ci_low`` and ``{label}/ci_high``: slotwise's seeded percentile
    Poisson bootstrap interval of the mean, the samples taken in Inspect's order (its
    dataset order); NaN where fewer than two values are not NA."""

    def compute(scores: list[SampleScore]) -> Value:
        labels, values = _table(scores)
        if not labels:
            return {}
        bootstrap = Bootstrap(len(labels), resamples=resamples, seed=seed)
        bootstrap.add(values)
        bounds: dict[str, float] = {}
        for label, interval in zip(labels, bootstrap.intervals(level), strict=True):
            low, high = interval or (math.nan, math.nan)
            bounds[f"{label}/ci_low"], bounds[f"{label}/ci_high"] = low, high
        return bounds

    return compute


@scorer(metrics=[slotwise_mean(), slotwise_ci()])
def slotwise_scorer(
    metrics: Sequence[str],
    *,
    qrels: Mapping[str, Mapping[str, float]] | None = None,
    dataset: Dataset | str | Path | None = None,
    engine: Engine | None = None,
    retrieved_key: str = "retrieved_ids",
    relevance_key: str = "relevance",
) -> Scorer:
    """Score each sample's ranked ids, ``state.store[retrieved_key]`` or else
    ``state.metadata[retrieved_key]`` (a list of ids, or any slotwise ``actual_output``),
    with ``metrics`` (slotwise metric specs).

    The labels come from ``qrels`` (``{sample_id: {doc_id: grade}}``) or ``dataset`` (a
    :class:`Dataset`, or a name or path :meth:`Engine.dataset` loads), by Inspect sample
    id; with neither, from ``state.metadata[relevance_key]`` (``{doc_id: grade}``, a list
    of relevant ids, or a whole slotwise ``expected_output``), each sample on its own (so
    a dataset-wide default, such as ERR's ``max_grade``, is that sample's).
    ``engine`` resolves the specs (default: the dataset's, else ``Engine()``). For another
    confidence level, give the ``Task`` ``metrics=[slotwise_mean(), slotwise_ci(level=0.9)]``.
    """
    if qrels is not None and dataset is not None:
        raise TypeError("pass qrels= or dataset=, not both")
    slotwise = engine or (dataset.engine if isinstance(dataset, Dataset) else Engine())
    plan = slotwise.plan(metrics)
    custom = plan.custom_aggregates()
    if custom:
        raise MetricParameterError(
            f"metric {custom[0]!r} has its own aggregate(), which slotwise_mean cannot "
            "reproduce: evaluate it with slotwise itself"
        )
    source = qrels if qrels is not None else dataset
    keyed = None
    if source is not None:
        loaded = source if isinstance(source, Dataset) else slotwise.dataset(source)
        keyed = Evaluation(loaded, plan)

    def not_scored(why: str) -> Score:
        return Score(
            value=dict.fromkeys(plan.labels, math.nan),
            explanation=f"not scored (NA): {why}",
            reason="scoring_failed",
        )

    async def score(state: TaskState, target: Target) -> Score:
        sample_id = str(state.sample_id)
        output, where = state.store.get(retrieved_key), "store"
        if output is None:
            output, where = state.metadata.get(retrieved_key), "sample metadata"
        if output is None:
            return not_scored(f"neither state.store nor the sample metadata has {retrieved_key!r}")
        relevance = state.metadata.get(relevance_key)
        if keyed is None and relevance is None:
            return not_scored(f"the sample metadata has no {relevance_key!r} labels")
        try:
            evaluation = keyed
            if evaluation is None:
                sample = {"id": sample_id, "expected_output": relevance}
                evaluation = Evaluation(slotwise.dataset(samples=[sample]), plan)
            values = evaluation.scorer().add(sample_id, output)
        except InputError as invalid:
            return not_scored(str(invalid))
        return Score(value=values, explanation=f"ranked ids from the {where}: {output}")

    return score
