"""Annotation tasks over a dataset: which (question, passage) pairs to label, the jobs
that label them, and the labelled samples.

- ``utility``: p(NO-RESPONSE) for each passage; with its relevance (from the ``relevance``
  task of the same run, else the sample's labels) it becomes the utility label
  ``{relevant, p_no_response}`` that ``udcg`` reads.
- ``relevance``: the LLM judge (Figure 5) labels each passage relevant (1) or not (0).
- ``grade``: the grader (Figure 6) grades the sample's answer (``metadata.response``)
  as ``metadata.outcome``: correct, wrong or abstained, for ``slotwise correlate``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from engine.annotate.base import Annotator, BatchResult, Throttle, UtilityItem
from engine.annotate.cache import Entry, cache_key
from engine.annotate.judge import (
    GRADE_LABELS,
    OUTCOMES,
    RELEVANCE_LABELS,
    answers_text,
    read_grade,
)
from engine.annotate.prompts import (
    GRADE_VERSION,
    RELEVANCE_VERSION,
    UTILITY_VERSION,
    grade_prompt,
    relevance_prompt,
)
from engine.annotate.runner import Job, Remote, Runner, Stats
from engine.errors import InputError, Problem
from engine.io.records import Output, Sample

__all__ = ["TASKS", "Passage", "Report", "annotate_samples", "relevance_job", "utility_job"]

TASKS = ("utility", "relevance", "grade")


@attrs.frozen
class Passage:
    """A passage of a sample's context to annotate."""

    sample: int
    doc: str
    question: str
    text: str


@attrs.define
class Report:
    """What an annotation run did: the runner's tally and what was left unlabelled."""

    stats: Stats
    passages: int = 0
    without_text: int = 0
    unreadable: list[str] = attrs.field(factory=list)

    def lines(self) -> list[str]:
        """What was skipped or left unlabelled (the cost is :meth:`Stats.line`)."""
        lines = []
        if self.without_text:
            lines.append(f"{self.without_text} retrieved passage(s) have no text and were skipped")
        if self.unreadable:
            shown = ", ".join(self.unreadable[:5])
            more = f", ... ({len(self.unreadable) - 5} more)" if len(self.unreadable) > 5 else ""
            lines.append(
                f"{len(self.unreadable)} judge answer(s) could not be read and were left unlabelled: {shown}{more}"
            )
        return lines


def _entries(
    annotator: Annotator, task: str, version: str, texts: Sequence[Sequence[str]], extra: str = ""
) -> list[Entry]:
    settings = annotator.cache_key() + extra
    entries = []
    for item in texts:
        key, inputs = cache_key(task, annotator.name, annotator.model, settings, version, item)
        entries.append(
            Entry(key, task, annotator.name, annotator.model, settings, version, inputs, None)
        )
    return entries


def _utility_call(
    annotator: Annotator, items: Sequence[UtilityItem], throttle: Throttle
) -> BatchResult:
    result = annotator.p_no_response(items, throttle)
    values = [min(1.0, max(0.0, float(v))) for v in result.values]
    return attrs.evolve(result, values=values)


def _judge_call(
    labels: Mapping[str, str],
    max_tokens: int,
    annotator: Annotator,
    messages: Sequence[list[dict[str, str]]],
    throttle: Throttle,
) -> BatchResult:
    result = annotator.generate(messages, max_tokens, throttle)
    values = [{"grade": read_grade(str(t), labels), "text": str(t)} for t in result.values]
    return attrs.evolve(result, values=values)


def _job(
    task: str, entries: list[Entry], annotator: Annotator, call: Any, inputs: Sequence[Any]
) -> Job:
    """A job whose batches are ``call(annotator, [inputs...], throttle)``, here or on a
    Ray worker (``call`` is a module-level function or a partial of one: picklable)."""

    def compute(indices: Sequence[int], throttle: Throttle) -> BatchResult:
        return call(annotator, [inputs[i] for i in indices], throttle)  # type: ignore[no-any-return]

    return Job(task, entries, compute, Remote(annotator, call, inputs))


def utility_job(annotator: Annotator, items: Sequence[UtilityItem]) -> Job:
    """p(NO-RESPONSE) of each (question, passage)."""
    texts = [(i.question, i.passage) for i in items]
    entries = _entries(annotator, "utility", UTILITY_VERSION, texts)
    return _job("utility", entries, annotator, _utility_call, list(items))


def _judge_job(
    annotator: Annotator,
    task: str,
    version: str,
    prompts: Sequence[str],
    texts: Sequence[Sequence[str]],
    labels: Mapping[str, str],
    max_tokens: int,
) -> Job:
    messages = [[{"role": "user", "content": prompt}] for prompt in prompts]
    call = functools.partial(_judge_call, dict(labels), max_tokens)
    entries = _entries(annotator, task, version, texts, extra=f";judge_max_tokens={max_tokens}")
    return _job(task, entries, annotator, call, messages)


def relevance_job(
    annotator: Annotator, items: Sequence[tuple[str, Sequence[str], str]], max_tokens: int = 256
) -> Job:
    """Figure 5 for each (question, answers, passage); values ``{grade: A|B|None, text}``."""
    prompts = [relevance_prompt(q, a, p) for q, a, p in items]
    texts = [(q, answers_text(a), p) for q, a, p in items]
    return _judge_job(
        annotator, "relevance", RELEVANCE_VERSION, prompts, texts, RELEVANCE_LABELS, max_tokens
    )


def grade_job(
    annotator: Annotator, items: Sequence[tuple[str, Sequence[str], str]], max_tokens: int = 256
) -> Job:
    """Figure 6 for each (question, answers, predicted answer); values ``{grade: A|B|C|None, text}``."""
    prompts = [grade_prompt(q, a, r) for q, a, r in items]
    texts = [(q, answers_text(a), r) for q, a, r in items]
    return _judge_job(annotator, "grade", GRADE_VERSION, prompts, texts, GRADE_LABELS, max_tokens)


def question_of(sample: Sample) -> str | None:
    """``input.question``, a string input, or ``metadata.question``."""
    value = sample.input
    if isinstance(value, Mapping):
        value = value.get("question")
    if not isinstance(value, str) or not value:
        value = sample.metadata.get("question")
    return value if isinstance(value, str) and value else None


def _passages(
    samples: Sequence[Sample], outputs: Mapping[str, Output], k: int | None, report: Report
) -> tuple[list[Passage], list[Problem]]:
    passages, problems = [], []
    for index, sample in enumerate(samples):
        output = outputs.get(sample.id)
        if output is None or not output.retrieved:
            continue
        question = question_of(sample)
        if question is None:
            problems.append(
                Problem("no question: set input.question", sample_id=sample.id, pointer="/input")
            )
            continue
        texts = output.texts or (None,) * len(output.retrieved)
        seen = set()
        for doc, text in list(zip(output.retrieved, texts, strict=True))[:k]:
            if doc in seen:
                continue
            seen.add(doc)
            if not text:
                report.without_text += 1
                continue
            passages.append(Passage(index, doc, question, text))
    return passages, problems


def _long_form(raw: dict[str, Any]) -> dict[str, Any]:
    """The sample's expected_output in long form (a new dict, set on ``raw``)."""
    expected = raw.get("expected_output")
    if isinstance(expected, Mapping) and expected.keys() & {
        "relevance",
        "utility",
        "answers",
        "groups",
    }:
        long = dict(expected)
    elif expected is None:
        long = {}
    else:
        long = {"relevance": expected}
    raw["expected_output"] = long
    return long


def _known_relevance(raw: Mapping[str, Any], sample: Sample, doc: str) -> bool | None:
    """Relevance from the sample's labels: its utility label, else its relevance labels
    (a labelled sample's unlisted passages are non-relevant); None if it has none."""
    expected = raw.get("expected_output")
    utility = expected.get("utility") if isinstance(expected, Mapping) else None
    if isinstance(utility, Mapping) and doc in utility:
        label = utility[doc]
        if isinstance(label, Mapping):
            return bool(label["relevant"])
        if float(label) != 0:
            return float(label) > 0
    if sample.relevance is not None:
        return sample.relevance.get(doc, 0.0) > 0
    return None


def annotate_samples(
    raws: Sequence[Mapping[str, Any]],
    samples: Sequence[Sample],
    outputs: Mapping[str, Output] | None,
    annotator: Annotator,
    runner: Runner,
    tasks: Sequence[str],
    *,
    k: int | None = None,
    response_field: str = "response",
    judge_max_tokens: int = 256,
) -> tuple[list[dict[str, Any]], Report]:
    """The raw samples with the labels of ``tasks`` added, and a report. Everything a task
    needs is checked before any model is called; an :class:`InputError` lists what is missing."""
    report = Report(stats=runner.stats)
    result = [copy.deepcopy(dict(raw)) for raw in raws]
    problems: list[Problem] = []
    passages: list[Passage] = []
    if "utility" in tasks or "relevance" in tasks:
        if outputs is None:
            raise InputError([Problem("the passages come from the outputs: pass --outputs FILE")])
        passages, problems = _passages(samples, outputs, k, report)
        report.passages = len(passages)
    if "relevance" in tasks:
        for sample in {samples[p.sample].id: samples[p.sample] for p in passages}.values():
            if not sample.answers:
                problems.append(
                    Problem(
                        "the relevance judge needs the acceptable answers: set expected_output.answers",
                        sample_id=sample.id,
                        pointer="/expected_output/answers",
                    )
                )
    elif "utility" in tasks:
        for p in passages:
            if _known_relevance(raws[p.sample], samples[p.sample], p.doc) is None:
                problems.append(
                    Problem(
                        f"passage {p.doc!r} has no relevance label; add relevance labels or "
                        "--task relevance (LLM judge)",
                        sample_id=samples[p.sample].id,
                        pointer="/expected_output",
                    )
                )
    graded: list[int] = []
    if "grade" in tasks:
        for index, sample in enumerate(samples):
            response = sample.metadata.get(response_field)
            pointer = f"/metadata/{response_field}"
            if not isinstance(response, str):
                problems.append(
                    Problem(
                        f"the grader needs the answer as metadata.{response_field}",
                        sample.id,
                        pointer,
                    )
                )
            elif not sample.answers:
                problems.append(
                    Problem(
                        "the grader needs expected_output.answers", sample.id, "/expected_output"
                    )
                )
            elif question_of(sample) is None:
                problems.append(Problem("no question: set input.question", sample.id, "/input"))
            else:
                graded.append(index)
    if problems:
        raise InputError(problems, summary="cannot annotate")

    judged: dict[int, bool | None] = {}
    if "relevance" in tasks:
        items = [(p.question, samples[p.sample].answers or (), p.text) for p in passages]
        values = runner.run(relevance_job(annotator, items, judge_max_tokens))
        for i, (p, (value, _)) in enumerate(zip(passages, values, strict=True)):
            grade = value["grade"]
            judged[i] = None if grade is None else grade == "A"
            label = _long_form(result[p.sample])
            relevance = label.get("relevance")
            if isinstance(relevance, list):
                relevance = dict.fromkeys(relevance, 1)
            relevance = dict(relevance or {})
            if grade is None:
                report.unreadable.append(f"{samples[p.sample].id}/{p.doc}")
            else:
                relevance[p.doc] = 1 if judged[i] else 0
            label["relevance"] = relevance
    if "utility" in tasks:
        items_u = [UtilityItem(p.question, p.text) for p in passages]
        values = runner.run(utility_job(annotator, items_u))
        for i, (p, (value, _)) in enumerate(zip(passages, values, strict=True)):
            relevant = (
                judged[i]
                if "relevance" in tasks
                else _known_relevance(raws[p.sample], samples[p.sample], p.doc)
            )
            if relevant is None:
                continue  # the judge's answer was unreadable: counted above
            label = _long_form(result[p.sample])
            utility = dict(label.get("utility") or {})
            utility[p.doc] = {"relevant": relevant, "p_no_response": value}
            label["utility"] = utility
    if graded:
        items_g = [
            (
                question_of(samples[i]) or "",
                samples[i].answers or (),
                samples[i].metadata[response_field],
            )
            for i in graded
        ]
        values = runner.run(grade_job(annotator, items_g, judge_max_tokens))
        for i, (value, _) in zip(graded, values, strict=True):
            if value["grade"] is None:
                report.unreadable.append(samples[i].id)
                continue
            metadata = dict(result[i].get("metadata") or {})
            metadata["outcome"] = OUTCOMES[value["grade"]]
            result[i]["metadata"] = metadata
    return result, report
