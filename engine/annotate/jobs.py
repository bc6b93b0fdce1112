"""The annotation jobs: for each task, its cache entries (keyed by annotator, model,
settings, prompt version and input texts) and the call that computes a batch of them,
here or on a Ray worker.

A judge job's value is ``{"value": V, "text": answer}``: ``V`` is what its
:class:`~engine.annotate.judge.AnswerFormat` read from the answer, None when the answer
is unreadable. Only readable answers are cached, and a cached answer is read again by the
format (the runner's ``reread``), so an answer is always read by today's reader.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from engine.annotate.base import Annotator, BatchResult, Throttle, UtilityItem
from engine.annotate.cache import Entry, cache_key
from engine.annotate.judge import (
    CLAIMS_FORMAT,
    GRADE_FORMAT,
    QUESTION_FORMAT,
    RELEVANCE_FORMAT,
    SCORE_FORMAT,
    SUPPORT_FORMAT,
    AnswerFormat,
    answers_text,
)
from engine.annotate.prompts import (
    CLAIMS_VERSION,
    GRADE_VERSION,
    QUESTION_VERSION,
    RELEVANCE_VERSION,
    SUPPORT_VERSION,
    UMBRELA_VERSION,
    UTILITY_VERSION,
    claims_prompt,
    grade_prompt,
    question_prompt,
    relevance_prompt,
    support_prompt,
    umbrela_prompt,
)
from engine.annotate.runner import Job, Remote

__all__ = [
    "claims_job",
    "estimate",
    "grade_job",
    "question_job",
    "relevance_job",
    "support_job",
    "umbrela_job",
    "utility_job",
]


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


def _job(
    task: str,
    entries: list[Entry],
    annotator: Annotator,
    call: Any,
    inputs: Sequence[Any],
    **reading: Any,
) -> Job:
    """A job whose batches are ``call(annotator, [inputs...], throttle)``, here or on a
    Ray worker (``call`` is a module-level function or a partial of one: picklable)."""

    def compute(indices: Sequence[int], throttle: Throttle) -> BatchResult:
        return call(annotator, [inputs[i] for i in indices], throttle)  # type: ignore[no-any-return]

    return Job(task, entries, compute, Remote(annotator, call, inputs), **reading)


def _utility_call(
    annotator: Annotator, items: Sequence[UtilityItem], throttle: Throttle
) -> BatchResult:
    result = annotator.p_no_response(items, throttle)
    values = [min(1.0, max(0.0, float(v))) for v in result.values]
    return attrs.evolve(result, values=values)


def utility_job(annotator: Annotator, items: Sequence[UtilityItem]) -> Job:
    """p(NO-RESPONSE) of each (question, passage)."""
    texts = [(i.question, i.passage) for i in items]
    entries = _entries(annotator, "utility", UTILITY_VERSION, texts)
    return _job("utility", entries, annotator, _utility_call, list(items))


def _answer(answer_format: AnswerFormat, text: str) -> dict[str, Any]:
    return {"value": answer_format.read(text), "text": text}


def _reread(answer_format: AnswerFormat, cached: Any) -> dict[str, Any]:
    text = cached.get("text") if isinstance(cached, Mapping) else None
    return _answer(answer_format, text if isinstance(text, str) else "")


def _is_answer(value: Mapping[str, Any]) -> bool:
    return value["value"] is not None


@functools.cache
def _takes_format(cls: type[Any]) -> bool:
    """Whether an annotator class's ``generate`` takes ``answer_format`` (older plugins don't)."""
    return "answer_format" in inspect.signature(cls.generate).parameters


def _generate_call(
    answer_format: AnswerFormat,
    max_tokens: int,
    annotator: Annotator,
    messages: Sequence[list[dict[str, str]]],
    throttle: Throttle,
) -> BatchResult:
    if _takes_format(type(annotator)):
        result = annotator.generate(messages, max_tokens, throttle, answer_format=answer_format)
    else:
        result = annotator.generate(messages, max_tokens, throttle)
    values = [_answer(answer_format, t if isinstance(t, str) else "") for t in result.values]
    return attrs.evolve(result, values=values)


def _judge_job(
    annotator: Annotator,
    task: str,
    version: str,
    prompts: Sequence[str],
    texts: Sequence[Sequence[str]],
    answer_format: AnswerFormat,
    max_tokens: int,
) -> Job:
    """Greedy answers to one-turn prompts, each read strictly by ``answer_format``; the
    request's structured-output setting is part of the cache key."""
    messages = [[{"role": "user", "content": prompt}] for prompt in prompts]
    call = functools.partial(_generate_call, answer_format, max_tokens)
    structured = getattr(annotator, "structured", None)
    extra = f";judge_max_tokens={max_tokens}" + (f";structured={structured}" if structured else "")
    entries = _entries(annotator, task, version, texts, extra=extra)
    reread = functools.partial(_reread, answer_format)
    return _job(
        task,
        entries,
        annotator,
        call,
        messages,
        reread=reread,
        readable=_is_answer,
        prompts=prompts,
    )


def relevance_job(
    annotator: Annotator, items: Sequence[tuple[str, Sequence[str], str]], max_tokens: int = 256
) -> Job:
    """Figure 5 for each (question, answers, passage); values read as ``A`` or ``B``."""
    prompts = [relevance_prompt(q, a, p) for q, a, p in items]
    texts = [(q, answers_text(a), p) for q, a, p in items]
    return _judge_job(
        annotator, "relevance", RELEVANCE_VERSION, prompts, texts, RELEVANCE_FORMAT, max_tokens
    )


def umbrela_job(
    annotator: Annotator, items: Sequence[tuple[str, str]], max_tokens: int = 256
) -> Job:
    """UMBRELA for each (question, passage), no reference answer; values read as 0-3."""
    prompts = [umbrela_prompt(q, p) for q, p in items]
    return _judge_job(
        annotator, "relevance", UMBRELA_VERSION, prompts, items, SCORE_FORMAT, max_tokens
    )


def grade_job(
    annotator: Annotator, items: Sequence[tuple[str, Sequence[str], str]], max_tokens: int = 256
) -> Job:
    """Figure 6 for each (question, answers, predicted answer); values ``A``, ``B`` or ``C``."""
    prompts = [grade_prompt(q, a, r) for q, a, r in items]
    texts = [(q, answers_text(a), r) for q, a, r in items]
    return _judge_job(annotator, "grade", GRADE_VERSION, prompts, texts, GRADE_FORMAT, max_tokens)


def claims_job(
    annotator: Annotator, items: Sequence[tuple[str, str]], max_tokens: int = 256
) -> Job:
    """The claims of each (question, reference answer); values are claim lists."""
    prompts = [claims_prompt(q, r) for q, r in items]
    return _judge_job(
        annotator, "claims", CLAIMS_VERSION, prompts, items, CLAIMS_FORMAT, max_tokens
    )


def support_job(
    annotator: Annotator, items: Sequence[tuple[str, str, str]], max_tokens: int = 256
) -> Job:
    """The support judge for each (question, claim, passage); values ``A`` or ``B``."""
    prompts = [support_prompt(q, c, p) for q, c, p in items]
    return _judge_job(
        annotator, "support", SUPPORT_VERSION, prompts, items, SUPPORT_FORMAT, max_tokens
    )


def question_job(annotator: Annotator, passages: Sequence[str], max_tokens: int = 256) -> Job:
    """A question each passage answers; values are questions."""
    prompts = [question_prompt(p) for p in passages]
    texts = [(p,) for p in passages]
    return _judge_job(
        annotator, "question", QUESTION_VERSION, prompts, texts, QUESTION_FORMAT, max_tokens
    )


def estimate(
    annotator: Annotator, prompts: Sequence[str], max_tokens: int
) -> tuple[int, float | None]:
    """Prompt tokens (4 characters a token) and, if the annotator has ``prices`` (USD per
    million prompt and completion tokens), the most the calls can cost."""
    tokens = sum(len(p) for p in prompts) // 4 + len(prompts)
    prices = getattr(annotator, "prices", None)
    if prices is None:
        return tokens, None
    return tokens, (tokens * prices[0] + len(prompts) * max_tokens * prices[1]) / 1e6
