"""Annotation tasks over a dataset: which (question, passage) pairs to label, the jobs
that label them (:mod:`engine.annotate.jobs`), and the labelled samples.

- ``utility``: p(NO-RESPONSE) for each passage; with its relevance (from the ``relevance``
  task of the same run, else the sample's labels) it becomes the utility label
  ``{relevant, p_no_response}`` that ``udcg`` reads.
- ``relevance``: an LLM judge labels each passage: UMBRELA's grade 0-3 without reference
  answers, or Figure 5's 1 or 0 against them (:mod:`engine.annotate.relevance`).
- ``grade``: the grader (Figure 6) grades the sample's answer (``metadata.response``)
  as ``metadata.outcome``: correct, wrong or abstained, for ``slotwise correlate``.
- ``claims``: the reference answer split into claims (``expected_output.claims``); claims
  a sample already has are kept.
- ``support``: the support judge decides, for each claim and passage, whether the passage
  supports the claim; the links become the group named by the claim's id.

An answer that cannot be read, or a call that failed for good, labels nothing: the item
is listed in the :class:`Report` (and a relevance pair in the sample's
``metadata.unjudged``), and the next run asks for it again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from engine.annotate.base import Annotator, UtilityItem
from engine.annotate.claims import Agreement, claims_of, groups_of, linked, reference_of
from engine.annotate.jobs import claims_job, grade_job, support_job, utility_job
from engine.annotate.judge import OUTCOMES
from engine.annotate.outcomes import Failure
from engine.annotate.records import (
    long_form,
    mark_human,
    question_of,
    set_relevance,
    set_unjudged,
)
from engine.annotate.relevance import RelevanceJudge, choose_judge, source_of
from engine.annotate.runner import Runner, Stats
from engine.errors import InputError, Problem
from engine.io.records import Output, Sample

__all__ = ["TASKS", "Passage", "Report", "annotate_samples", "listing", "problem_of"]

TASKS = ("utility", "relevance", "grade", "claims", "support")
#: Items a listing names on the console (all of them are in the written dataset).
LISTED = 20


@attrs.frozen
class Passage:
    """A passage of a sample's context to annotate."""

    sample: int
    doc: str
    question: str
    text: str


def problem_of(value: Any) -> str | None:
    """Why a judge job's value labels nothing: ``failed: reason`` for a :class:`Failure`,
    ``unreadable: "the answer"`` for an answer that cannot be read; None for an answer."""
    if isinstance(value, Failure):
        return f"failed: {value.reason}"
    if isinstance(value, Mapping) and value.get("value") is None:
        text = " ".join(str(value.get("text") or "").split())
        return f"unreadable: {text[:120]!r}" + ("..." if len(text) > 120 else "")
    return None


@attrs.define
class Report:
    """What an annotation run did: the runner's tally and what was left unlabelled."""

    stats: Stats
    passages: int = 0
    without_text: int = 0
    judge: RelevanceJudge | None = None
    unreadable: list[str] = attrs.field(factory=list)
    failed: list[str] = attrs.field(factory=list)
    claims_written: int = 0
    claims_split: list[str] = attrs.field(factory=list)
    no_reference: list[str] = attrs.field(factory=list)
    claims_unreadable: list[str] = attrs.field(factory=list)
    no_claims: list[str] = attrs.field(factory=list)
    not_judged: list[str] = attrs.field(factory=list)
    pairs: int = 0
    links: int = 0
    agreement: Agreement | None = None
    last_failure: str | None = None

    def note(self, where: str, value: Any) -> str | None:
        """List ``where`` (sample/doc...) as unreadable or failed when ``value`` is not an
        answer; returns why (None for an answer)."""
        why = problem_of(value)
        if isinstance(value, Failure):
            self.failed.append(where)
            self.last_failure = value.reason
        elif why is not None:
            self.unreadable.append(where)
        return why

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
            (self.unreadable, "judge answer(s) could not be read and were left unlabelled (not cached: asked again on the next run)"),
            (self.failed, "call(s) failed for good and were left unlabelled (asked again on the next run)"),
        )  # fmt: skip
        lines += [listing(items, what) for items, what in listed if items]
        if self.last_failure is not None:
            lines.append(f"the last failure: {self.last_failure}")
        return lines


def listing(items: Sequence[str], what: str) -> str:
    """``"N what: a, b, c, ... (k more)"``, naming at most :data:`LISTED` items."""
    more = f", ... ({len(items) - LISTED} more)" if len(items) > LISTED else ""
    return f"{len(items)} {what}: {', '.join(items[:LISTED])}{more}"


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
    judge: str = "auto",
    announce: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], Report]:
    """The raw samples with the labels of ``tasks`` added, and a report. Everything a task
    needs is checked before any model is called; an :class:`InputError` lists what is missing.

    ``judge`` (with ``relevance``): ``auto``, ``umbrela`` or ``answers``
    (:func:`~engine.annotate.relevance.choose_judge`). ``agreement`` (with ``support``):
    claims that already have a group (a person's links) keep it, and the judge's verdicts
    on them are compared with it (``report.agreement``). ``announce(line)`` hears which
    relevance judge runs, before any call.
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
        judged_samples = list({samples[p.sample].id: samples[p.sample] for p in passages}.values())
        report.judge = choose_judge(judge, judged_samples)
        problems += report.judge.problems(judged_samples)
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
    if report.judge is not None:
        if announce is not None:
            announce(report.judge.describe())
        source = source_of(annotator.name, annotator.model, report.judge.version)
        items = [(samples[p.sample], p.text) for p in passages]
        values = runner.run(report.judge.job(annotator, items, judge_max_tokens))
        for raw in result:
            mark_human(raw)
        for i, (p, (value, _)) in enumerate(zip(passages, values, strict=True)):
            why = report.note(f"{samples[p.sample].id}/{p.doc}", value)
            if why is not None:
                judged[i] = None
                set_unjudged(result[p.sample], p.doc, why)
                continue
            label = report.judge.label(value["value"])
            judged[i] = label > 0
            set_relevance(result[p.sample], p.doc, label, source)
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
            if report.note(f"{samples[p.sample].id}/{p.doc} (utility)", value) is not None:
                continue
            expected = long_form(result[p.sample])
            utility = dict(expected.get("utility") or {})
            utility[p.doc] = {"relevant": relevant, "p_no_response": value}
            expected["utility"] = utility
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
            if report.note(samples[i].id, value) is not None:
                continue
            metadata = dict(result[i].get("metadata") or {})
            metadata["outcome"] = OUTCOMES[value["value"]]
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
        sample_id = samples[index].id
        if isinstance(value, Failure):
            report.note(f"{sample_id} (claims)", value)
            continue
        claims = value["value"]
        if claims is None:
            report.claims_unreadable.append(sample_id)
        elif not claims:
            report.no_claims.append(sample_id)
        else:
            long_form(result[index])["claims"] = [
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
        if report.note(f"{samples[p.sample].id}/{claim['id']}/{p.doc}", value) is not None:
            continue
        verdicts.setdefault(p.sample, {}).setdefault(claim["id"], {})[p.doc] = value["value"] == "A"
    report.pairs = len(pairs)
    found = Agreement() if compare else None
    for index, by_claim in verdicts.items():
        human = groups_of(raws[index])
        label = long_form(result[index])
        groups = dict(label.get("groups") or {})
        for claim_id, judged in by_claim.items():
            if found is not None and claim_id in human:
                found.add(samples[index].id, claim_id, judged, human[claim_id])
                continue
            groups[claim_id] = linked(groups.get(claim_id, []), judged)
            report.links += sum(judged.values())
        label["groups"] = groups
    return found
