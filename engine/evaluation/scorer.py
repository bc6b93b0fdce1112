"""Outputs as they arrive: each system call's outcome recorded (an output or an error row),
and the :class:`Scorer` that scores one output at a time for harnesses that see them so."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Literal

from engine.errors import InputError, MetricRequirementError, Problem
from engine.evaluation.batch import Shape
from engine.evaluation.pipeline import ChunkTask, aligned, score_chunk
from engine.io import documents

if TYPE_CHECKING:
    from engine.evaluation.api import Evaluation
    from engine.evaluation.results import Results

__all__ = ["OnError", "Outcomes", "Scorer"]

OnError = Literal["record", "raise"]


class Outcomes:
    """What a system returned for each sample: valid outputs, and error rows."""

    def __init__(self, on_error: OnError) -> None:
        self.on_error = on_error
        self.outputs: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def add(self, sample_id: str, done: Future[Any] | asyncio.Future[Any]) -> None:
        """Record one finished call; with ``on_error="raise"``, its error is raised."""
        try:
            actual = done.result()
        except Exception as error:
            if self.on_error == "raise":
                raise
            self.errors[sample_id] = f"{type(error).__name__}: {error}"
            return
        try:
            documents.parse_outputs([(sample_id, actual, None)])
        except InputError as invalid:
            if self.on_error == "raise":
                raise
            reasons = "; ".join(str(p) for p in invalid.problems)
            self.errors[sample_id] = "invalid output: " + reasons
            return
        self.outputs[sample_id] = actual


class Scorer:
    """Scores one output at a time and gathers them: :meth:`add` returns a sample's
    scores as soon as its output arrives, :meth:`results` the :class:`Results` of all of
    them, identical, bit for bit, to scoring them at once. Safe to share between threads.

    Build with :meth:`Evaluation.scorer`. Dataset-wide statistics (the padding shape of
    the labels, the largest label that ERR's ``max_grade`` defaults to) come from the
    whole dataset, so a sample scores as it would among all the others.
    """

    def __init__(self, evaluation: Evaluation, *, strict: bool = False) -> None:
        self.evaluation = evaluation
        self.strict = strict
        self._lock = threading.Lock()
        self._outcomes = Outcomes("record")
        self._rows = {sample_id: row for row, sample_id in enumerate(evaluation.dataset.ids)}
        self._shape = Shape.of(evaluation.dataset.columns)

    def __len__(self) -> int:
        """How many samples have an output or an error so far."""
        with self._lock:
            return len(self._outcomes.outputs) + len(self._outcomes.errors)

    def add(self, sample_id: str, actual_output: Any) -> dict[str, float]:
        """Validate one sample's output, record it, and return its scores by metric label
        (NaN where a metric has no value). An invalid output, an id not in the dataset or
        already added, or (``strict``) a ranking that repeats an id raises
        :class:`InputError` and records nothing."""
        sample_id = str(sample_id)
        with self._lock:
            row = self._check_new(sample_id)
        documents.parse_outputs([(sample_id, actual_output, None)])
        dataset = self.evaluation.dataset.columns.slice(row, 1)
        joined, _ = aligned(dataset, documents.outputs_columns({sample_id: actual_output}))
        plan = self.evaluation.plan
        scores = score_chunk(ChunkTask(joined, plan, self._shape.merge(Shape.of(joined))))
        if scores.problems:
            raise MetricRequirementError(
                list(scores.problems), summary="the sample lacks what the metrics require"
            )
        if self.strict and scores.duplicates[0]:
            problem = Problem(
                "the ranked list repeats a document id",
                sample_id=sample_id,
                pointer="/actual_output/retrieved",
            )
            raise InputError([problem], summary="duplicate ids in rankings")
        with self._lock:
            self._check_new(sample_id)
            self._outcomes.outputs[sample_id] = actual_output
        return {label: float(scores.values[label][0]) for label in plan.labels}

    def add_error(self, sample_id: str, error: BaseException | str) -> None:
        """Record that the system failed on a sample: an error row with NA scores, as
        :meth:`Evaluation.run` records a failing call."""
        sample_id = str(sample_id)
        reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        with self._lock:
            self._check_new(sample_id)
            self._outcomes.errors[sample_id] = reason

    def results(self) -> Results:
        """Everything added so far, scored as :meth:`Evaluation.run` would score it: the
        same values, summaries, confidence intervals, diagnostics and provenance; samples
        not added yet count as missing outputs."""
        with self._lock:
            outcomes = Outcomes("record")
            order = sorted(self._outcomes.outputs, key=self._rows.__getitem__)
            outcomes.outputs = {i: self._outcomes.outputs[i] for i in order}
            outcomes.errors = dict(self._outcomes.errors)
        return self.evaluation.score_outcomes(outcomes, self.strict)

    def _check_new(self, sample_id: str) -> int:
        """The sample's row in the dataset; an unknown or already added id is an error."""
        row = self._rows.get(sample_id)
        if row is None:
            raise InputError(
                [Problem("no sample with this id in the dataset", sample_id=sample_id)],
                summary="unknown sample",
            )
        if sample_id in self._outcomes.outputs or sample_id in self._outcomes.errors:
            raise InputError(
                [Problem("this sample was already added", sample_id=sample_id)],
                summary="sample added twice",
            )
        return row
