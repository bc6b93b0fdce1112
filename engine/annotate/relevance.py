"""The relevance judges, and which one runs.

- ``umbrela``: reference-free. UMBRELA's prompt (:data:`~engine.annotate.prompts.UMBRELA_TEMPLATE`)
  grades a (question, passage) pair on the TREC scale 0-3 from the two alone; the grade is
  the label (a gain for nDCG; binary metrics count a label >= their
  ``relevance_threshold``, 1 by default, as relevant).
- ``answers``: the UDCG paper's Figure 5 decides RELEVANT (1) or IRRELEVANT (0) against the
  sample's acceptable answers (``expected_output.answers``).

``auto`` (the default) runs ``answers`` when every sample to judge has acceptable
answers, else ``umbrela`` for all of them: one judge, one label scale, per run. Each label
written carries its source ``ANNOTATOR:MODEL:PROMPT_VERSION``, which names the judge.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from engine.annotate.base import Annotator
from engine.annotate.jobs import relevance_job, umbrela_job
from engine.annotate.prompts import RELEVANCE_VERSION, UMBRELA_VERSION
from engine.annotate.records import question_of
from engine.annotate.runner import Job
from engine.errors import Problem
from engine.io.records import Sample

__all__ = ["JUDGES", "RelevanceJudge", "choose_judge", "source_of"]

JUDGES = ("auto", "umbrela", "answers")


def source_of(annotator: str, model: str, prompt_version: str) -> str:
    """The source of an LLM's label: ``annotator:model:prompt_version``."""
    return f"{annotator}:{model}:{prompt_version}"


@attrs.frozen
class RelevanceJudge:
    """The relevance judge of a run: ``umbrela`` (grades 0-3, no reference answers) or
    ``answers`` (Figure 5: 1 or 0 against the acceptable answers), and why it was chosen."""

    kind: str
    reason: str

    @property
    def version(self) -> str:
        return UMBRELA_VERSION if self.kind == "umbrela" else RELEVANCE_VERSION

    def describe(self) -> str:
        """The judge in words, for the plan line."""
        if self.kind == "umbrela":
            return f"relevance judge {self.version} (reference-free, grades 0-3; {self.reason})"
        return f"relevance judge {self.version} (against the acceptable answers, 1 or 0; {self.reason})"

    def problems(self, samples: Sequence[Sample]) -> list[Problem]:
        """What the samples to judge lack for this judge (a question; answers for Figure 5)."""
        found = []
        for sample in samples:
            if question_of(sample) is None:
                found.append(Problem("no question: set input.question", sample.id, "/input"))
            if self.kind == "answers" and not sample.answers:
                found.append(
                    Problem(
                        "the answer-aware relevance judge needs the acceptable answers: set "
                        "expected_output.answers, or use --judge umbrela (no reference answers)",
                        sample.id,
                        "/expected_output/answers",
                    )
                )
        return found

    def job(
        self,
        annotator: Annotator,
        items: Sequence[tuple[Sample, str]],
        max_tokens: int,
    ) -> Job:
        """The job judging each (sample, passage text)."""
        if self.kind == "umbrela":
            return umbrela_job(
                annotator, [(question_of(s) or "", text) for s, text in items], max_tokens
            )
        return relevance_job(
            annotator,
            [(question_of(s) or "", s.answers or (), text) for s, text in items],
            max_tokens,
        )

    def label(self, value: object) -> int:
        """The relevance label of a readable answer: the grade, or 1/0 for A/B."""
        if self.kind == "umbrela":
            return int(value)  # type: ignore[call-overload]
        return 1 if value == "A" else 0


def choose_judge(choice: str, samples: Sequence[Sample]) -> RelevanceJudge:
    """The judge ``choice`` names (``auto``: see the module) for these samples."""
    if choice not in JUDGES:
        raise ValueError(f"judge must be one of {', '.join(JUDGES)}, got {choice!r}")
    without = sum(not s.answers for s in samples)
    if choice == "umbrela":
        return RelevanceJudge("umbrela", "chosen with --judge umbrela")
    if choice == "answers":
        return RelevanceJudge("answers", "chosen with --judge answers")
    if samples and not without:
        return RelevanceJudge("answers", "every sample has acceptable answers")
    return RelevanceJudge(
        "umbrela", f"{without} of {len(samples)} sample(s) have no acceptable answers"
    )
