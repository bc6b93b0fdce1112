"""Evaluation questions made from a corpus (``slotwise synthesize``), for a team that has
documents but no questions.

1. **Draw** passages, in an order fixed by the seed: uniformly, or stratified by a field
   (the field's values take turns, each value's passages in their own seeded order, so
   a rare value is drawn as often as a common one while it has passages left).
2. **Write** a question for each (prompt :data:`~engine.annotate.prompts.QUESTION_TEMPLATE`).
3. **Drop** repeated questions (the same words, case and punctuation aside) and questions
   that UMBRELA's reference-free judge does not grade as answered by their own passage
   (a grade below ``min_grade``, 2 by default: "has some answer").
4. **Keep** the first ``questions`` that survive, in drawing order: each a sample whose
   label is its source passage, graded by the judge, with the label source
   ``ANNOTATOR:MODEL:slotwise-question-v1``.

Everything goes through the runner and its cache (a killed run resumes, a re-run is free),
and the plan is said before any call: passages drawn and the most calls they can cost.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from engine.annotate.base import Annotator
from engine.annotate.jobs import estimate, question_job, umbrela_job
from engine.annotate.outcomes import Failure
from engine.annotate.prompts import QUESTION_VERSION, UMBRELA_VERSION
from engine.annotate.relevance import source_of
from engine.annotate.runner import Runner
from engine.annotate.tasks import listing, problem_of
from engine.errors import InputError, Problem
from engine.evaluation.label_sources import SOURCES_KEY
from engine.io.files import read_jsonl

__all__ = ["Passage", "Synthesis", "draw", "read_corpus", "synthesize"]

_NOT_WORD = re.compile(r"[\W_]+")


@attrs.frozen
class Passage:
    """A corpus passage: its id, text and the value of the stratifying field (if any)."""

    id: str
    text: str
    stratum: str | None = None


def _field(record: Mapping[str, Any], name: str) -> Any:
    metadata = record.get("metadata")
    if isinstance(metadata, Mapping) and name in metadata:
        return metadata[name]
    return record.get(name)


def read_corpus(path: str | Path, stratify: str | None = None) -> list[Passage]:
    """The passages of a JSONL corpus, one ``{"id", "text", "metadata"?}`` a line;
    ``stratify`` names a field of ``metadata`` (or of the line) every passage must have.
    Every bad line is reported (line, pointer, reason) before anything is drawn."""
    passages, problems, seen = [], [], set()

    def problem(line: int, message: str, doc: str | None = None, pointer: str = "") -> None:
        problems.append(Problem(message, doc, pointer, str(path), line))

    for line, record in read_jsonl(Path(path)):
        if not isinstance(record, Mapping):
            problem(line, "a corpus line is a JSON object")
            continue
        doc, text = record.get("id"), record.get("text")
        if isinstance(doc, int) and not isinstance(doc, bool):
            doc = str(doc)
        if not isinstance(doc, str) or not doc:
            problem(line, "no id: a non-empty string", pointer="/id")
            continue
        if not isinstance(text, str) or not text.strip():
            problem(line, "no text", doc, "/text")
            continue
        if doc in seen:
            problem(line, "a repeated passage id", doc, "/id")
            continue
        seen.add(doc)
        value = None
        if stratify is not None:
            value = _field(record, stratify)
            if value is None or isinstance(value, Mapping | list):
                problem(
                    line,
                    f"no {stratify!r} to stratify by (metadata.{stratify}, a string or number)",
                    doc,
                    f"/metadata/{stratify}",
                )
                continue
            value = str(value)
        passages.append(Passage(doc, text, value))
    if problems:
        raise InputError(problems, summary=f"cannot read the corpus {path}")
    if not passages:
        raise InputError([Problem("the corpus has no passage", source=str(path))])
    return passages


def draw(passages: Sequence[Passage], count: int, *, seed: int = 0) -> list[Passage]:
    """``count`` passages (or all there are) in a seeded order: uniformly, or, when they
    have strata, the strata's values taking turns (in sorted order)."""
    generator = random.Random(seed)
    if all(p.stratum is None for p in passages):
        order = list(passages)
        generator.shuffle(order)
        return order[:count]
    strata: dict[str, list[Passage]] = {}
    for passage in passages:
        strata.setdefault(str(passage.stratum), []).append(passage)
    queues = []
    for value in sorted(strata):
        members = strata[value]
        generator.shuffle(members)
        queues.append(members)
    drawn: list[Passage] = []
    while len(drawn) < count and any(queues):
        for queue in queues:
            if queue and len(drawn) < count:
                drawn.append(queue.pop(0))
    return drawn


def _normal(question: str) -> str:
    return " ".join(_NOT_WORD.sub(" ", question.casefold()).split())


@attrs.define
class Synthesis:
    """What question making did: passages drawn, questions written and dropped (and
    why), kept; the plan before any call."""

    source: str
    wanted: int
    corpus: int
    drawn: int = 0
    strata: int = 0
    cached: int = 0
    calls_at_most: int = 0
    prompt_tokens: int = 0
    cost: float | None = None
    written: int = 0
    duplicates: list[str] = attrs.field(factory=list)
    unanswered: list[str] = attrs.field(factory=list)
    unreadable: list[str] = attrs.field(factory=list)
    failed: list[str] = attrs.field(factory=list)
    last_failure: str | None = None
    kept: int = 0

    def plan_line(self, max_tokens: int) -> str:
        how = f"stratified over {self.strata} values" if self.strata else "uniformly"
        cost = (
            ""
            if self.cost is None
            else f"; estimated cost at most ${self.cost:.4f} (~{self.prompt_tokens} prompt "
            f"tokens at 4 characters a token, at most {max_tokens} completion tokens each)"
        )
        return (
            f"synthesize: {self.wanted} question(s) wanted from {self.corpus} passages; "
            f"{self.drawn} drawn {how}; at most {self.calls_at_most} model calls (a question "
            f"and its check per passage; {self.cached} questions from the cache){cost}"
        )

    def note(self, where: str, value: Any) -> bool:
        """Whether ``value`` is an answer; lists ``where`` as unreadable or failed if not."""
        if isinstance(value, Failure):
            self.failed.append(where)
            self.last_failure = value.reason
            return False
        if problem_of(value) is not None:
            self.unreadable.append(where)
            return False
        return True

    def lines(self) -> list[str]:
        lines = [
            f"synthesize: {self.written} question(s) written for {self.drawn} passages; "
            f"{self.kept} kept (source {self.source})"
        ]
        listed = (
            (self.duplicates, "repeated question(s) dropped (passage ids)"),
            (self.unanswered, "question(s) the judge did not grade as answered by their passage, dropped (passage ids)"),
            (self.unreadable, "answer(s) could not be read (not cached: asked again on the next run)"),
            (self.failed, "call(s) failed for good (asked again on the next run)"),
        )  # fmt: skip
        lines += [listing(items, what) for items, what in listed if items]
        if self.last_failure is not None:
            lines.append(f"the last failure: {self.last_failure}")
        if self.kept < self.wanted:
            lines.append(
                f"only {self.kept} of the {self.wanted} questions wanted: draw more passages "
                "(--oversample) or lower --min-grade"
            )
        return lines


def synthesize(
    passages: Sequence[Passage],
    annotator: Annotator,
    runner: Runner,
    *,
    questions: int,
    seed: int = 0,
    oversample: float = 1.25,
    min_grade: int = 2,
    judge_max_tokens: int = 256,
    announce: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], Synthesis]:
    """Samples with a question each, made from ``passages`` (see the module), and what was
    done. ``oversample``: draw that many passages per question wanted, for the ones
    dropped. ``announce(line)`` hears the plan before any model call."""
    if questions < 1 or oversample < 1 or not 0 <= min_grade <= 3:
        raise ValueError("questions >= 1, oversample >= 1 and 0 <= min_grade <= 3")
    drawn = draw(passages, math.ceil(questions * oversample), seed=seed)
    found = Synthesis(
        source_of(annotator.name, annotator.model, QUESTION_VERSION), questions, len(passages)
    )
    found.drawn = len(drawn)
    found.strata = len({p.stratum for p in drawn if p.stratum is not None})
    asking = question_job(annotator, [p.text for p in drawn], judge_max_tokens)
    cached, fresh = runner.lookup(asking)
    found.cached = sum(1 for e in asking.entries if e.key in cached)
    found.calls_at_most = -(-len(fresh) // runner.batch_size) + -(-len(drawn) // runner.batch_size)
    # the checks' prompts hold questions not yet written: a passage's text stands for them
    prompts = [asking.prompts[i] for i in fresh] + [p.text for p in drawn]
    found.prompt_tokens, found.cost = estimate(annotator, prompts, judge_max_tokens)
    if announce is not None:
        announce(found.plan_line(judge_max_tokens))
    written: list[tuple[Passage, str]] = []
    seen: set[str] = set()
    for passage, (value, _) in zip(drawn, runner.run(asking), strict=True):
        if not found.note(f"{passage.id} (question)", value):
            continue
        found.written += 1
        normal = _normal(value["value"])
        if normal in seen:
            found.duplicates.append(passage.id)
            continue
        seen.add(normal)
        written.append((passage, value["value"]))
    checks = runner.run(umbrela_job(annotator, [(q, p.text) for p, q in written], judge_max_tokens))
    judge = source_of(annotator.name, annotator.model, UMBRELA_VERSION)
    samples: list[dict[str, Any]] = []
    for (passage, question), (value, _) in zip(written, checks, strict=True):
        if not found.note(f"{passage.id} (check)", value):
            continue
        grade = int(value["value"])
        if grade < min_grade:
            found.unanswered.append(f"{passage.id} (grade {grade})")
            continue
        if len(samples) == questions:
            continue
        metadata: dict[str, Any] = {
            SOURCES_KEY: {passage.id: found.source},
            "synthesized": {"passage": passage.id, "judge": judge, "grade": grade},
        }
        if passage.stratum is not None:
            metadata["stratum"] = passage.stratum
        samples.append(
            {
                "id": f"syn-{passage.id}",
                "input": {"question": question},
                "expected_output": {"relevance": {passage.id: grade}},
                "metadata": metadata,
            }
        )
    found.kept = len(samples)
    return samples, found
