"""Annotation tasks over a dataset: which (question, passage) pairs to label, the jobs
that label them, and the labelled samples.

- ``utility``: p(NO-RESPONSE) for each passage; with its relevance (from the ``relevance``
  task of the same run, else the sample's labels) it becomes the utility label
  ``{relevant, p_no_response}`` that ``udcg`` reads.
- ``relevance``: the LLM judge (Figure 5) labels each passage relevant (1) or not (0).
- ``grade``: the grader (Figure 6) grades the sample's answer (``metadata.response``)
  as ``metadata.outcome``: correct, wrong or abstained, for ``slotwise correlate``.
- ``claims``: the reference answer split into claims (``expected_output.claims``); claims
  a sample already has are kept.
- ``support``: the support judge decides, for each claim and passage, whether the passage
  supports the claim; the links become the group named by the claim's id.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from engine.annotate.base import Annotator, BatchResult, Throttle, UtilityItem
from engine.annotate.cache import Entry, cache_key
from engine.annotate.claims import Agreement, claims_of, groups_of, linked, reference_of
from engine.annotate.judge import (
    GRADE_LABELS,
    OUTCOMES,
    RELEVANCE_LABELS,
    SUPPORT_LABELS,
    answers_text,
    read_claims,
    read_grade,
)
from engine.annotate.prompts import (
    CLAIMS_VERSION,
    GRADE_VERSION,
    RELEVANCE_VERSION,
    SUPPORT_VERSION,
    UTILITY_VERSION,
    claims_prompt,
    grade_prompt,
    relevance_prompt,
    support_prompt,
)
from engine.annotate.runner import Job, Remote, Runner, Stats
from engine.errors import InputError, Problem
from engine.io import schemas
from engine.io.records import Output, Sample

__all__ = [
    "TASKS",
    "Passage",
    "Report",
    "annotate_samples",
    "claims_job",
    "relevance_job",
    "support_job",
    "utility_job",
]

TASKS = ("utility", "relevance", "grade", "claims", "support")


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
    claims_written: int = 0
    claims_split: list[str] = attrs.field(factory=list)
    no_reference: list[str] = attrs.field(factory=list)
    claims_unreadable: list[str] = attrs.field(factory=list)
    no_claims: list[str] = attrs.field(factory=list)
    not_judged: list[str] = attrs.field(factory=list)
    pairs: int = 0
    links: int = 0
    agreement: Agreement | None = None

    def lines(self) -> list[str]:
        """What was done, skipped or left unlabelled (the cost is :meth:`Stats.line`)."""
        lines = []
        if self.without_text:
            lines.append(f"{self.without_text} retrieved passage(s) have no text and were skipped")
        if self.claims_split:
            lines.append(
                f"claims: {len(self.claims_split)} reference answer(s) split into "
                f"{self.claims_written} claims"
            )
        if self.pairs:
            lines.append(
                f"support: {self.pairs} (claim, passage) pairs judged, {self.links} support links written"
            )
        listed = (
            (self.no_reference, "sample(s) have no reference answer (expected_output.reference or answers) and got no claims"),
            (self.claims_unreadable, "claim list(s) could not be read and were left without claims"),
            (self.no_claims, "reference answer(s) gave no claims"),
            (self.not_judged, "sample(s) with passages have no claims; their support was not judged"),
            (self.unreadable, "judge answer(s) could not be read and were left unlabelled"),
        )  # fmt: skip
        lines += [_listing(items, what) for items, what in listed if items]
        return lines


def _listing(items: Sequence[str], what: str) -> str:
    """``"N what: a, b, c, d, e, ... (k more)"``."""
    more = f", ... ({len(items) - 5} more)" if len(items) > 5 else ""
    return f"{len(items)} {what}: {', '.join(items[:5])}{more}"


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


def _generate_call(
    read: Callable[[str], dict[str, Any]],
    max_tokens: int,
    annotator: Annotator,
    messages: Sequence[list[dict[str, str]]],
    throttle: Throttle,
) -> BatchResult:
    result = annotator.generate(messages, max_tokens, throttle)
    values = [{**read(str(t)), "text": str(t)} for t in result.values]
    return attrs.evolve(result, values=values)


def _grade_value(labels: Mapping[str, str], text: str) -> dict[str, Any]:
    return {"grade": read_grade(text, labels)}


def _claims_value(text: str) -> dict[str, Any]:
    return {"claims": read_claims(text)}


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
    read: Callable[[str], dict[str, Any]],
    max_tokens: int,
) -> Job:
    """Greedy answers to one-turn prompts, each read by ``read`` (a module-level function
    or a partial of one) into the value cached beside the answer's text."""
    messages = [[{"role": "user", "content": prompt}] for prompt in prompts]
    call = functools.partial(_generate_call, read, max_tokens)
    entries = _entries(annotator, task, version, texts, extra=f";judge_max_tokens={max_tokens}")
    return _job(task, entries, annotator, call, messages)


def _grades(labels: Mapping[str, str]) -> Callable[[str], dict[str, Any]]:
    return functools.partial(_grade_value, dict(labels))


def relevance_job(
    annotator: Annotator, items: Sequence[tuple[str, Sequence[str], str]], max_tokens: int = 256
) -> Job:
    """Figure 5 for each (question, answers, passage); values ``{grade: A|B|None, text}``."""
    prompts = [relevance_prompt(q, a, p) for q, a, p in items]
    texts = [(q, answers_text(a), p) for q, a, p in items]
    return _judge_job(
        annotator,
        "relevance",
        RELEVANCE_VERSION,
        prompts,
        texts,
        _grades(RELEVANCE_LABELS),
        max_tokens,
    )


def grade_job(
    annotator: Annotator, items: Sequence[tuple[str, Sequence[str], str]], max_tokens: int = 256
) -> Job:
    """Figure 6 for each (question, answers, predicted answer); values ``{grade: A|B|C|None, text}``."""
    prompts = [grade_prompt(q, a, r) for q, a, r in items]
    texts = [(q, answers_text(a), r) for q, a, r in items]
    return _judge_job(
        annotator, "grade", GRADE_VERSION, prompts, texts, _grades(GRADE_LABELS), max_tokens
    )


def claims_job(
    annotator: Annotator, items: Sequence[tuple[str, str]], max_tokens: int = 256
) -> Job:
    """The claims of each (question, reference answer); values ``{claims: [...] | None, text}``."""
    prompts = [claims_prompt(q, r) for q, r in items]
    return _judge_job(
        annotator, "claims", CLAIMS_VERSION, prompts, items, _claims_value, max_tokens
    )


def support_job(
    annotator: Annotator, items: Sequence[tuple[str, str, str]], max_tokens: int = 256
) -> Job:
    """The support judge for each (question, claim, passage); values ``{grade: A|B|None, text}``."""
    prompts = [support_prompt(q, c, p) for q, c, p in items]
    return _judge_job(
        annotator, "support", SUPPORT_VERSION, prompts, items, _grades(SUPPORT_LABELS), max_tokens
    )


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
    if isinstance(expected, Mapping) and expected.keys() & schemas.LONG_FORM:
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
    agreement: bool = False,
) -> tuple[list[dict[str, Any]], Report]:
    """The raw samples with the labels of ``tasks`` added, and a report. Everything a task
    needs is checked before any model is called; an :class:`InputError` lists what is missing.

    ``agreement`` (with ``support``): claims that already have a group (a person's links)
    keep it, and the judge's verdicts on them are compared with it (``report.agreement``).
    """
    report = Report(stats=runner.stats)
    result = [copy.deepcopy(dict(raw)) for raw in raws]
    problems: list[Problem] = []
    passages: list[Passage] = []
    to_split: list[tuple[int, str]] = []
    if "claims" in tasks:
        for index, (raw, sample) in enumerate(zip(raws, samples, strict=True)):
            if claims_of(raw):
                continue  # claims written by hand are kept
            reference = reference_of(raw, sample)
            if reference is None:
                report.no_reference.append(sample.id)
            else:
                to_split.append((index, reference))
    if "support" in tasks and not to_split and not any(map(claims_of, raws)):
        problems.append(
            Problem(
                "no sample has claims to judge: write expected_output.claims, or add --task "
                "claims with expected_output.reference or answers"
            )
        )
    if agreement and "support" not in tasks:
        problems.append(
            Problem("--agreement compares the support judge's links: add --task support")
        )
    if {"utility", "relevance", "support"} & set(tasks):
        if outputs is None:
            raise InputError([Problem("the passages come from the outputs: pass --outputs FILE")])
        passages, missing = _passages(samples, outputs, k, report)
        problems += missing
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

    if to_split:
        _split_claims(result, samples, to_split, annotator, runner, report, judge_max_tokens)
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
    if "support" in tasks:
        report.agreement = _judge_support(
            result, raws, samples, passages, annotator, runner, report, judge_max_tokens, agreement
        )
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


def _split_claims(
    result: list[dict[str, Any]],
    samples: Sequence[Sample],
    to_split: Sequence[tuple[int, str]],
    annotator: Annotator,
    runner: Runner,
    report: Report,
    max_tokens: int,
) -> None:
    """Split each (sample index, reference answer) into claims ``c1, c2, ...``."""
    items = [(question_of(samples[i]) or "", reference) for i, reference in to_split]
    values = runner.run(claims_job(annotator, items, max_tokens))
    for (index, _), (value, _) in zip(to_split, values, strict=True):
        claims, sample_id = value["claims"], samples[index].id
        if claims is None:
            report.claims_unreadable.append(sample_id)
        elif not claims:
            report.no_claims.append(sample_id)
        else:
            _long_form(result[index])["claims"] = [
                {"id": f"c{n}", "text": text} for n, text in enumerate(claims, start=1)
            ]
            report.claims_split.append(sample_id)
            report.claims_written += len(claims)


def _judge_support(
    result: list[dict[str, Any]],
    raws: Sequence[Mapping[str, Any]],
    samples: Sequence[Sample],
    passages: Sequence[Passage],
    annotator: Annotator,
    runner: Runner,
    report: Report,
    max_tokens: int,
    compare: bool,
) -> Agreement | None:
    """Judge each (claim, passage) of each sample and write the links as the claims'
    groups; with ``compare``, compare them with the groups claims already had instead."""
    pairs = [(p, claim) for p in passages for claim in claims_of(result[p.sample])]
    report.not_judged = list(
        dict.fromkeys(samples[p.sample].id for p in passages if not claims_of(result[p.sample]))
    )
    items = [(p.question, claim["text"], p.text) for p, claim in pairs]
    values = runner.run(support_job(annotator, items, max_tokens))
    verdicts: dict[int, dict[str, dict[str, bool]]] = {}
    for (p, claim), (value, _) in zip(pairs, values, strict=True):
        if value["grade"] is None:
            report.unreadable.append(f"{samples[p.sample].id}/{claim['id']}/{p.doc}")
            continue
        verdicts.setdefault(p.sample, {}).setdefault(claim["id"], {})[p.doc] = value["grade"] == "A"
    report.pairs = len(pairs)
    found = Agreement() if compare else None
    for index, by_claim in verdicts.items():
        human = groups_of(raws[index])
        label = _long_form(result[index])
        groups = dict(label.get("groups") or {})
        for claim_id, judged in by_claim.items():
            if found is not None and claim_id in human:
                found.add(samples[index].id, claim_id, judged, human[claim_id])
                continue
            groups[claim_id] = linked(groups.get(claim_id, []), judged)
            report.links += sum(judged.values())
        label["groups"] = groups
    return found
