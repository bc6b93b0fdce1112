"""The annotator protocol, its data records, its errors, and the registry of annotator
plugins (entry-point group ``slotwise.annotators``), which behaves as the metric registry
does: names are listed without importing anything, a plugin is imported only when asked
for, and a plugin that fails to import is reported with its distribution and cause."""

from __future__ import annotations

import difflib
import importlib.metadata
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs

from engine.annotate.judge import AnswerFormat
from engine.errors import SlotwiseError
from engine.evaluation.registry import installed_entry_points
from engine.logs import log

__all__ = [
    "GROUP",
    "AnnotationError",
    "AnnotationInterrupted",
    "Annotator",
    "AnnotatorLoadError",
    "AnnotatorRegistry",
    "BatchResult",
    "ItemError",
    "RateLimited",
    "RetryableError",
    "Throttle",
    "UnknownAnnotatorError",
    "UtilityItem",
    "rebuild_annotator",
]

GROUP = "slotwise.annotators"

Throttle = Callable[[], None]
"""Called by an annotator before each model request; the runner's rate limit."""


class AnnotationError(SlotwiseError, RuntimeError):
    """Annotation failed for good: a bad model path, an endpoint that keeps failing, an
    answer that cannot be read. Work finished before the failure is in the cache."""


class AnnotationInterrupted(AnnotationError):
    """The run was interrupted (Ctrl-C); finished batches are in the cache."""


class RetryableError(AnnotationError):
    """A failure worth retrying (connection refused, timeout, HTTP 429/5xx, garbled body);
    ``retry_after``: the seconds the server asked to wait (its ``Retry-After``), if any.
    ``calls``, ``prompt_tokens``, ``completion_tokens``: what the failed attempt cost (an
    annotator that knows sets them; else one call), counted in the run's tally."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.calls, self.prompt_tokens, self.completion_tokens = 1, 0, 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.retry_after), self.__dict__)


class RateLimited(RetryableError):
    """The endpoint's limit (HTTP 429, or 503, with ``Retry-After``): waited out without
    spending a retry, within the runner's ``max_wait``."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, retry_after)
        self.retry_after: float = retry_after


class ItemError(AnnotationError):
    """A failure of these items alone, not worth retrying (the endpoint refused the
    request: HTTP 400, 413, 422): they are listed as failed, and the others go on."""


class AnnotatorLoadError(SlotwiseError, ImportError):
    """An annotator plugin could not be imported or is not an annotator; the cause is kept."""

    def __init__(self, name: str, distribution: str | None, reason: str) -> None:
        self.name = name
        self.distribution = distribution
        self.reason = reason
        source = f" from distribution {distribution!r}" if distribution else ""
        super().__init__(f"annotator {name!r}{source} failed to load: {reason}")


class UnknownAnnotatorError(SlotwiseError, LookupError):
    """No installed annotator has this name."""

    def __init__(self, name: str, available: Sequence[str]) -> None:
        close = difflib.get_close_matches(name, available, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        super().__init__(
            f"Unknown annotator {name!r}.{hint} Available: {', '.join(available) or 'none'}"
        )

    def __str__(self) -> str:
        return str(self.args[0])


@attrs.frozen
class UtilityItem:
    """One (question, passage) whose p(NO-RESPONSE) is wanted."""

    question: str
    passage: str


@attrs.frozen
class BatchResult:
    """What one annotator call returned for a batch: one value per item, in order, and
    what it cost (requests or forward passes, tokens) and which passages were truncated."""

    values: list[Any]
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncated: list[bool] = attrs.field(factory=list)


@runtime_checkable
class Annotator(Protocol):
    """An LLM backend that annotates passages: it reads p(NO-RESPONSE) for (question,
    passage) pairs under the Figure 4 prompt, and generates short answers to chat prompts
    (for the relevance judge and the answer grader).

    ``name`` is the entry-point name; ``model`` and :meth:`cache_key` identify the
    answers it gives, so they are part of every cache key. Methods take a batch and call
    ``throttle()`` before each request they make; they raise :class:`RetryableError` for
    failures worth retrying and :class:`AnnotationError` for the others.
    """

    name: ClassVar[str]
    model: str

    def cache_key(self) -> str:
        """The settings that change the answers (estimator, samples, temperature...)."""
        ...

    def p_no_response(self, items: Sequence[UtilityItem], throttle: Throttle) -> BatchResult:
        """p(NO-RESPONSE) in [0, 1] for each item."""
        ...

    def generate(
        self,
        prompts: Sequence[list[dict[str, str]]],
        max_tokens: int,
        throttle: Throttle,
        answer_format: AnswerFormat | None = None,
    ) -> BatchResult:
        """Greedy (temperature 0) answers to chat prompts, as strings. ``answer_format``:
        the JSON the answers must be (:meth:`AnswerFormat.schema`), for an annotator that
        can constrain its output (structured output); the answers are read strictly by it
        in any case. An annotator whose ``generate`` lacks the parameter gets none."""
        ...

    def close(self) -> None:
        """Release the model or connections."""
        ...


def rebuild_annotator(
    cls: type[Any], model: str, options: dict[str, Any], env: dict[str, str]
) -> Any:
    """``cls(model, **options)`` after setting the environment variables ``env`` (an API
    key read from the environment): what a pickled annotator carries to a Ray worker,
    which builds (and loads the model) itself."""
    os.environ.update(env)
    return cls(model, **options)


def check_annotator_class(cls: Any) -> list[str]:
    """Why ``cls`` is not an annotator class (empty when it is)."""
    if not isinstance(cls, type):
        return [f"{cls!r} is not a class"]
    reasons = [
        f"it has no {attr}()"
        for attr in ("cache_key", "p_no_response", "generate", "close")
        if not callable(getattr(cls, attr, None))
    ]
    if not isinstance(getattr(cls, "name", None), str):
        reasons.append("it has no class-level name")
    return reasons


@attrs.frozen
class _Candidate:
    name: str
    entry_point: importlib.metadata.EntryPoint
    distribution: str | None


class AnnotatorRegistry:
    """Installed annotators by name. ``entry_points`` replaces discovery, for tests."""

    def __init__(
        self, entry_points: Callable[[], Iterable[importlib.metadata.EntryPoint]] | None = None
    ) -> None:
        self._find = entry_points or (lambda: installed_entry_points(GROUP))
        self._candidates: dict[str, list[_Candidate]] | None = None

    def candidates(self) -> dict[str, list[_Candidate]]:
        if self._candidates is None:
            found: dict[str, list[_Candidate]] = {}
            seen = set()
            for ep in self._find():
                if (ep.name, ep.value) in seen:
                    continue
                seen.add((ep.name, ep.value))
                dist = getattr(ep, "dist", None)
                distribution = dist.metadata["Name"] if dist is not None else None
                found.setdefault(ep.name, []).append(_Candidate(ep.name, ep, distribution))
            self._candidates = dict(sorted(found.items()))
        return self._candidates

    def names(self) -> list[str]:
        """Every installed annotator name, without importing any plugin."""
        return list(self.candidates())

    def get(self, name: str) -> type[Any]:
        """The annotator class for ``name``, importing only its plugin."""
        candidates = self.candidates().get(name)
        if not candidates:
            raise UnknownAnnotatorError(name, self.names())
        if len(candidates) > 1:
            claims = "; ".join(
                f"{c.distribution or 'unknown distribution'} ({c.entry_point.value})"
                for c in candidates
            )
            raise AnnotatorLoadError(
                name, None, f"the name is claimed by several plugins: {claims}"
            )
        candidate = candidates[0]
        try:
            cls = candidate.entry_point.load()
        except Exception as error:
            reason = f"{type(error).__name__}: {error}"
            log.warning(
                "plugin.load_failed",
                annotator=name,
                distribution=candidate.distribution,
                reason=reason,
            )
            raise AnnotatorLoadError(name, candidate.distribution, reason) from error
        reasons = check_annotator_class(cls)
        if not reasons and cls.name != name:
            reasons = [f"its name {cls.name!r} differs from its entry point name"]
        if reasons:
            reason = (
                f"{candidate.entry_point.value} is not a slotwise annotator: {'; '.join(reasons)}"
            )
            log.warning(
                "plugin.load_failed",
                annotator=name,
                distribution=candidate.distribution,
                reason=reason,
            )
            raise AnnotatorLoadError(name, candidate.distribution, reason)
        return cls  # type: ignore[no-any-return]
