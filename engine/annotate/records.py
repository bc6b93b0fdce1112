"""Reading and writing the labels of a sample as written (a dict of the dataset file):
its question, its ``expected_output`` in long form, its relevance labels with their
sources (``metadata.label_sources``) and the pairs a judge left without a label
(``metadata.unjudged``: document -> why)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.evaluation.label_sources import HUMAN, SOURCES_KEY
from engine.io import schemas
from engine.io.records import Sample

__all__ = [
    "UNJUDGED_KEY",
    "long_form",
    "mark_human",
    "question_of",
    "set_relevance",
    "set_unjudged",
    "sources_of",
]

#: The metadata key that maps documents a judge was asked about, but could not label, to why.
UNJUDGED_KEY = "unjudged"


def question_of(sample: Sample) -> str | None:
    """``input.question``, a string input, or ``metadata.question``."""
    value = sample.input
    if isinstance(value, Mapping):
        value = value.get("question")
    if not isinstance(value, str) or not value:
        value = sample.metadata.get("question")
    return value if isinstance(value, str) and value else None


def long_form(raw: dict[str, Any]) -> dict[str, Any]:
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


def sources_of(metadata: Mapping[str, Any] | None) -> Mapping[str, str]:
    """A sample's document -> label source (documents not listed: ``human``)."""
    found = (metadata or {}).get(SOURCES_KEY)
    return found if isinstance(found, Mapping) else {}


def mark_human(raw: dict[str, Any]) -> None:
    """Give each of the sample's relevance labels without a source the source ``human``."""
    if raw.get("expected_output") is None:
        return
    relevance = long_form(raw).get("relevance")
    if not relevance:
        return
    metadata = raw.setdefault("metadata", {})
    metadata[SOURCES_KEY] = {**dict.fromkeys(map(str, relevance), HUMAN), **sources_of(metadata)}


def set_relevance(raw: dict[str, Any], doc: str, label: float, source: str) -> None:
    """Label ``doc`` (replacing a label it had) with its source; the document leaves
    ``metadata.unjudged``."""
    expected = long_form(raw)
    relevance = expected.get("relevance")
    if isinstance(relevance, list):
        relevance = dict.fromkeys(relevance, 1)
    expected["relevance"] = {**(relevance or {}), doc: label}
    metadata = raw.setdefault("metadata", {})
    metadata[SOURCES_KEY] = {**sources_of(metadata), doc: source}
    unjudged = {d: why for d, why in (metadata.get(UNJUDGED_KEY) or {}).items() if d != doc}
    if unjudged:
        metadata[UNJUDGED_KEY] = unjudged
    else:
        metadata.pop(UNJUDGED_KEY, None)


def set_unjudged(raw: dict[str, Any], doc: str, why: str) -> None:
    """Record that a judge was asked about ``doc`` and gave no label, and why."""
    metadata = raw.setdefault("metadata", {})
    metadata[UNJUDGED_KEY] = {**(metadata.get(UNJUDGED_KEY) or {}), doc: why}
