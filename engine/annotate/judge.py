"""LLM-as-judge: passage relevance (the paper's Figure 5), answer grading (Figure 6),
claim support, and the claims split from a reference answer.

The judge prompts ask for a JSON object ``{"motivation": ..., "grade": ...}``. Models wrap
it in code fences, add prose around it, or answer ``"A: RELEVANT"``; :func:`read_grade`
accepts all of that: the first JSON object with a ``grade``, else a ``grade: X`` pattern,
else the label words (IRRELEVANT before RELEVANT, INCORRECT before CORRECT, NOT SUPPORTED
before SUPPORTED). An answer none of these read gives None: the passage or context is left
unlabelled and counted. :func:`read_claims` reads a claim list just as leniently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "GRADE_LABELS",
    "OUTCOMES",
    "RELEVANCE_LABELS",
    "SUPPORT_LABELS",
    "read_claims",
    "read_grade",
]

#: Figure 5's letters.
RELEVANCE_LABELS: Mapping[str, str] = {"A": "RELEVANT", "B": "IRRELEVANT"}
#: Figure 6's letters.
GRADE_LABELS: Mapping[str, str] = {"A": "CORRECT", "B": "INCORRECT", "C": "ABSTAINED"}
#: The support judge's letters.
SUPPORT_LABELS: Mapping[str, str] = {"A": "SUPPORTED", "B": "NOT SUPPORTED"}
#: Figure 6's grades as ``slotwise correlate`` outcomes.
OUTCOMES: Mapping[str, str] = {"A": "correct", "B": "wrong", "C": "abstained"}

_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)
_GRADE_FIELD = re.compile(r"""["']?grade["']?\s*[:=]\s*["']?\s*([A-Za-z]+)""", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.+?)\s*$", re.MULTILINE)
_SPACE = re.compile(r"\s+")


def _letter(value: Any, labels: Mapping[str, str]) -> str | None:
    """ "A", "a", "A: RELEVANT", "RELEVANT" -> "A"."""
    if not isinstance(value, str):
        return None
    text = value.strip().strip("\"'").upper()
    head = re.match(r"([A-Z])\b", text)
    if head and head.group(1) in labels:
        return head.group(1)
    return _by_words(text, labels)


def _by_words(text: str, labels: Mapping[str, str]) -> str | None:
    # longer words first: IRRELEVANT contains RELEVANT, INCORRECT contains CORRECT
    for letter, word in sorted(labels.items(), key=lambda item: -len(item[1])):
        if re.search(rf"\b{word}\b", text, re.IGNORECASE):
            return letter
    return None


def read_grade(text: str, labels: Mapping[str, str]) -> str | None:
    """The grade letter of a judge's answer, or None if it cannot be read."""
    cleaned = _FENCE.sub("", text)
    candidates: list[Any] = []
    try:
        candidates.append(json.loads(cleaned))
    except json.JSONDecodeError:
        for match in _OBJECT.finditer(cleaned):
            try:
                candidates.append(json.loads(match.group(0)))
            except json.JSONDecodeError:
                continue
    for candidate in candidates:
        if isinstance(candidate, dict):
            grade = next((v for k, v in candidate.items() if str(k).lower() == "grade"), None)
            letter = _letter(grade, labels)
            if letter is not None:
                return letter
    field = _GRADE_FIELD.search(cleaned)
    if field is not None:
        letter = _letter(field.group(1), labels)
        if letter is not None:
            return letter
    return _by_words(cleaned, labels)


def _json_values(text: str) -> list[Any]:
    """Every JSON value that starts at a ``{`` or ``[`` of the text, in order."""
    decoder = json.JSONDecoder()
    values = []
    for start in (m.start() for m in re.finditer(r"[\[{]", text)):
        try:
            values.append(decoder.raw_decode(text, start)[0])
        except json.JSONDecodeError:
            continue
    return values


def _claim_texts(value: Any) -> list[str] | None:
    """The claims of ``{"claims": [...]}`` or of a bare list, whose items are strings or
    objects with a ``text`` or ``claim``; None for any other shape."""
    if isinstance(value, dict):
        value = next((v for k, v in value.items() if str(k).lower() == "claims"), None)
    if not isinstance(value, list):
        return None
    texts = []
    for item in value:
        if isinstance(item, dict):
            item = next((v for k, v in item.items() if str(k).lower() in ("text", "claim")), None)
        if not isinstance(item, str):
            return None
        texts.append(item)
    return texts


def read_claims(text: str) -> list[str] | None:
    """The claims of a claim-splitting answer: the first JSON ``{"claims": [...]}`` or list
    of strings (code fences and prose around it allowed), else its numbered or bulleted
    lines; blanks collapsed, empty and repeated claims dropped. ``[]`` when the answer
    lists no claim, None when it cannot be read."""
    cleaned = _FENCE.sub("", text)
    found = next((c for c in map(_claim_texts, _json_values(cleaned)) if c is not None), None)
    if found is None:
        found = [m.group(1) for m in _BULLET.finditer(cleaned)] or None
    if found is None:
        return None
    claims = (_SPACE.sub(" ", claim).strip() for claim in found)
    return list(dict.fromkeys(claim for claim in claims if claim))


def answers_text(answers: Sequence[str]) -> str:
    """The answers as one cache-key text."""
    return json.dumps(list(answers), ensure_ascii=False)
