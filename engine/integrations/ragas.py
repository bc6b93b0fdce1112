"""RAGAS datasets as slotwise datasets: :func:`from_ragas` converts an ``EvaluationDataset``
in Python, and ``engine.dataset("ragas:eval.jsonl")`` (or ``slotwise run
ragas:eval.jsonl``) reads a file ``EvaluationDataset.to_jsonl`` wrote. Each sample's
retrieved contexts become its outputs, so the dataset is scored as it stands.

Sample ids are positions, ``"0"``, ``"1"``, ...: RAGAS samples carry no id, and a position
is what ``dataset[i]`` and line ``i + 1`` of the file name. A sample with
``reference_context_ids`` is judged by id: those ids are relevant (binary) and its ranking
is its ``retrieved_context_ids``. Any other sample is judged by text: each reference context
is a relevant document whose id is ``ctx-`` and the first 12 hex digits of the sha1 of its
text whitespace-normalised (stripped, each run of whitespace one space); a retrieved context
with the same normalised text gets the same id (relevant), any other its own (unjudged).
Retrieved items keep their text, for the text-based metrics. A sample's ``reference``
(RAGAS's reference answer) becomes its expected answer (``answers``, scored by
``answer-containment-at-k``) and its ``reference`` (split into claims by ``slotwise
annotate --task claims``).

Registered in the ``slotwise.sources`` entry-point group as ``ragas``; needs
``pip install 'slotwise[ragas]'``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from engine.errors import InputError, MissingDependencyError, Problem
from engine.evaluation.source_plugins import Loaded

if TYPE_CHECKING:
    from ragas import EvaluationDataset, SingleTurnSample

__all__ = ["from_ragas", "load"]

_UNSCORABLE = "RAGAS samples slotwise cannot score"


def from_ragas(dataset: EvaluationDataset, *, name: str | None = None) -> Loaded:
    """One slotwise sample per RAGAS sample, with its retrieved contexts as its outputs;
    ``name`` defaults to the dataset's own. Every sample that cannot be judged is reported
    in one :class:`InputError`."""
    single_turn = _ragas().SingleTurnSample
    samples: list[dict[str, Any]] = []
    outputs: dict[str, list[Any]] = {}
    problems: list[Problem] = []
    for index, sample in enumerate(dataset):
        sample_id = str(index)
        if not isinstance(sample, single_turn):
            problems.append(
                Problem(
                    "a multi-turn sample has no retrieved contexts to score",
                    sample_id=sample_id,
                    pointer="/user_input",
                )
            )
            continue
        judged = _judged(sample, sample_id)
        if isinstance(judged, Problem):
            problems.append(judged)
            continue
        relevant, outputs[sample_id] = judged
        expected: dict[str, Any] = {"relevance": relevant}
        if sample.reference:  # the reference answer: for answer containment, and claims
            expected.update(answers=[sample.reference], reference=sample.reference)
        samples.append({"id": sample_id, "input": sample.user_input, "expected_output": expected})
    if problems:
        raise InputError(problems, summary=_UNSCORABLE)
    return Loaded(samples=samples, outputs=outputs, name=name or dataset.name)


def load(reference: str) -> Loaded:
    """The ``ragas:`` source: a JSONL file read with ``EvaluationDataset.from_jsonl``,
    named after the file's stem."""
    path = Path(reference)
    if path.suffix.lower() != ".jsonl":
        message = "ragas: reads the JSONL that EvaluationDataset.to_jsonl writes (ragas has no CSV reader)"
        raise InputError([Problem(message, source=reference)], summary="unsupported RAGAS file")
    if not path.is_file():
        raise InputError([Problem("no such file", source=reference)], summary="unknown dataset")
    try:
        dataset = _ragas().EvaluationDataset.from_jsonl(path)
    except ValueError as error:  # a line that is not JSON, or a row ragas rejects
        raise InputError(
            [Problem(f"not a RAGAS dataset: {error}", source=reference)],
            summary="invalid RAGAS dataset",
        ) from None
    try:
        return from_ragas(dataset, name=path.stem)
    except InputError as error:
        located = [
            p._replace(source=reference, line=int(p.sample_id) + 1 if p.sample_id else None)
            for p in error.problems
        ]
        raise InputError(located, summary=_UNSCORABLE) from None


def _ragas() -> ModuleType:
    try:
        import ragas
    except ImportError as error:
        raise MissingDependencyError("RAGAS datasets", "ragas", error) from error
    return ragas


def _judged(sample: SingleTurnSample, sample_id: str) -> tuple[list[str], list[Any]] | Problem:
    """A sample's relevant ids and ranking, or why it cannot be judged."""
    texts = sample.retrieved_contexts or []
    if sample.reference_context_ids:
        ids = [str(i) for i in sample.retrieved_context_ids or ()]
        if texts and len(texts) != len(ids):
            return Problem(
                f"{len(texts)} retrieved_contexts for {len(ids)} retrieved_context_ids: "
                "with reference_context_ids, retrieved contexts are matched by id",
                sample_id=sample_id,
                pointer="/retrieved_contexts",
            )
        ranking: list[Any] = (
            [{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)] if texts else ids
        )
        return [str(i) for i in sample.reference_context_ids], ranking
    if sample.reference_contexts:
        relevant = list(dict.fromkeys(map(_text_id, sample.reference_contexts)))
        return relevant, [{"id": _text_id(t), "text": t} for t in texts]
    return Problem(
        "neither reference_context_ids nor reference_contexts: "
        "nothing to judge the retrieved contexts against",
        sample_id=sample_id,
        pointer="/reference_contexts",
    )


def _text_id(text: str) -> str:
    """``ctx-`` and 12 hex digits of the sha1 of the whitespace-normalised text."""
    normalised = " ".join(text.split())
    return "ctx-" + hashlib.sha1(normalised.encode()).hexdigest()[:12]
