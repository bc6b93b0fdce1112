"""Utility and relevance annotation with LLMs (``slotwise annotate``).

Annotators are plugins in the entry-point group ``slotwise.annotators``: ``transformers``
(a local causal LM, p(NO-RESPONSE) from its logits, as the UDCG reference computes it)
and ``openai-compatible`` (a chat-completions endpoint: logprobs, or Monte-Carlo
sampling). Both also generate, for the LLM-as-judge relevance annotator, the answer
grader, the claims split from reference answers and the judge of their support
(:mod:`engine.annotate.claims`). Judge answers are read strictly
(:mod:`engine.annotate.judge`). Results are cached in SQLite (:class:`Cache`), so runs
resume and re-runs are free. :mod:`engine.annotate.holes` pools runs and fills the holes
of a dataset's relevance labels, each label with its source, with the reference-free or
the answer-aware judge (:mod:`engine.annotate.relevance`); :mod:`engine.annotate.synthesize`
makes questions from a corpus. :mod:`engine.annotate.stand_in` is a stand-in server (word
rules, not a model) for walkthroughs and tests.
"""

from engine.annotate.base import (
    GROUP,
    AnnotationError,
    Annotator,
    AnnotatorLoadError,
    AnnotatorRegistry,
    BatchResult,
    RateLimited,
    RetryableError,
    UnknownAnnotatorError,
    UtilityItem,
)
from engine.annotate.cache import Cache
from engine.annotate.holes import Filling, Pool, fill_holes, pool, relevance_agreement
from engine.annotate.outcomes import Failure
from engine.annotate.relevance import JUDGES, RelevanceJudge, choose_judge
from engine.annotate.runner import AnnotationInterrupted, Runner, Stats
from engine.annotate.synthesize import Synthesis, read_corpus, synthesize
from engine.annotate.tasks import TASKS, Report, annotate_samples

__all__ = [
    "GROUP",
    "JUDGES",
    "TASKS",
    "AnnotationError",
    "AnnotationInterrupted",
    "Annotator",
    "AnnotatorLoadError",
    "AnnotatorRegistry",
    "BatchResult",
    "Cache",
    "Failure",
    "Filling",
    "Pool",
    "RateLimited",
    "RelevanceJudge",
    "Report",
    "RetryableError",
    "Runner",
    "Stats",
    "Synthesis",
    "UnknownAnnotatorError",
    "UtilityItem",
    "annotate_samples",
    "choose_judge",
    "fill_holes",
    "pool",
    "read_corpus",
    "relevance_agreement",
    "synthesize",
]
