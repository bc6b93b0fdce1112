"""What a judge's answer must be, and how it is read: strictly.

Every judge task has an :class:`AnswerFormat`: a JSON object with one field that holds
the answer (a grade letter, a 0-3 score, a claim list, a question). Where the endpoint
supports structured output, the request carries the format's JSON schema
(:meth:`AnswerFormat.schema`), so the model can only answer in it. Any answer is read by
:meth:`AnswerFormat.read`, and only in two ways:

1. **JSON**: the whole answer (blanks around it, and one code fence around the whole of
   it, allowed) is one JSON object, without repeated keys, whose field holds a value the
   format allows (a letter exactly as listed, an integer of the scale, a list of
   non-empty strings, a non-empty string);
2. **the format's free-text pattern**, documented on each format: the whole answer is
   ``A`` or ``A: RELEVANT`` (the option lines the prompt lists), UMBRELA's last line
   ``##final score: 2``, a claim list whose every line is a bullet or a numbered item, a
   question on one line that ends with ``?``.

Anything else is *unreadable* (``None``): "The document is not relevant.", "Grade: not
relevant", a truncated JSON object, two grades, a grade off the scale, an empty answer.
No word or letter is searched for in prose, so a negation can never become a label.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "CLAIMS_FORMAT",
    "GRADE_FORMAT",
    "OUTCOMES",
    "QUESTION_FORMAT",
    "RELEVANCE_FORMAT",
    "SCORE_FORMAT",
    "SUPPORT_FORMAT",
    "AnswerFormat",
    "answers_text",
]

_FENCED = re.compile(r"\A```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.+?)\s*$")
_FINAL_SCORE = re.compile(r"^##\s*final score\s*:\s*([0-9]+)\s*$", re.IGNORECASE)
_MENTIONS_SCORE = re.compile(r"final[ _]score", re.IGNORECASE)
_SPACE = re.compile(r"\s+")


class _Repeated(ValueError):
    """A JSON object repeats a key (json.loads would keep the last one silently)."""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _Repeated("a key is repeated")
    return found


def _body(text: str) -> str:
    """The answer without blanks around it and without one code fence around all of it."""
    stripped = text.strip()
    fenced = _FENCED.match(stripped)
    return fenced.group(1).strip() if fenced else stripped


def _json_object(body: str) -> dict[str, Any] | None:
    """``body`` as one JSON object (nothing before or after it, no repeated key), or None."""
    try:
        value = json.loads(body, object_pairs_hook=_no_repeats)
    except (json.JSONDecodeError, _Repeated):
        return None
    return value if isinstance(value, dict) else None


@attrs.frozen
class AnswerFormat:
    """A judge task's answer: a JSON object whose field ``key`` holds the answer, as
    ``check`` accepts it, or the free text ``free_text`` reads (None: no free-text form).

    ``choices`` lists the allowed values where there are few (letters, scores): the JSON
    schema's ``enum``. ``extra`` names string fields the schema also asks for (the
    motivation the paper's prompts request)."""

    name: str
    key: str
    value_schema: Mapping[str, Any]
    check: Callable[[Any], Any]
    free_text: Callable[[str], Any] | None = None
    extra: tuple[str, ...] = ()

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the answer, for OpenAI-style ``response_format``."""
        properties = {name: {"type": "string"} for name in self.extra}
        properties[self.key] = dict(self.value_schema)
        return {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }

    def response_format(self) -> dict[str, Any]:
        """OpenAI-style ``response_format`` asking for :meth:`schema` strictly."""
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "strict": True, "schema": self.schema()},
        }

    def read(self, text: str) -> Any:
        """The answer's value, or None when the answer is unreadable (see the module)."""
        if not isinstance(text, str):
            return None
        body = _body(text)
        if body.startswith("{"):
            found = _json_object(body)
            return None if found is None or self.key not in found else self.check(found[self.key])
        return self.free_text(body) if self.free_text is not None and body else None


def _letter(labels: Mapping[str, str], value: Any) -> str | None:
    return value if isinstance(value, str) and value in labels else None


def _letter_line(lines: Mapping[str, str], body: str) -> str | None:
    letter, colon, word = _SPACE.sub(" ", body).partition(":")
    return lines.get(f"{letter.strip()}: {word.strip().upper()}" if colon else letter)


def _letters(labels: Mapping[str, str]) -> AnswerFormat:
    """A grade letter among ``labels`` (letter -> its label word): JSON ``"grade"``, or
    the whole answer ``A`` or ``A: RELEVANT`` (a letter with its own word, as the prompt
    lists them)."""
    lines = {letter: letter for letter in labels}
    lines.update({f"{letter}: {word}": letter for letter, word in labels.items()})
    return AnswerFormat(
        name="grade",
        key="grade",
        value_schema={"type": "string", "enum": list(labels)},
        check=functools.partial(_letter, dict(labels)),
        free_text=functools.partial(_letter_line, lines),
        extra=("motivation",),
    )


def _score(value: Any) -> int | None:
    """An integer of UMBRELA's scale 0-3 (not a bool, not a float, not a string)."""
    return value if type(value) is int and 0 <= value <= 3 else None


def _final_score(body: str) -> int | None:
    """UMBRELA's answer: its last non-empty line is ``##final score: N`` (N of 0-3), and
    no other line mentions a final score."""
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if not lines or sum(bool(_MENTIONS_SCORE.search(line)) for line in lines) != 1:
        return None
    found = _FINAL_SCORE.match(lines[-1])
    return _score(int(found.group(1))) if found else None


def _claim_list(value: Any) -> list[str] | None:
    """Non-empty strings, blanks collapsed and repeats dropped; None for any other shape."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    claims = [_SPACE.sub(" ", item).strip() for item in value]
    if not all(claims):
        return None
    return list(dict.fromkeys(claims))


def _bullets(body: str) -> list[str] | None:
    """A claim list in free text: every non-empty line is a bullet or a numbered item."""
    items = []
    for line in body.splitlines():
        if not line.strip():
            continue
        found = _BULLET.match(line)
        if found is None:
            return None
        items.append(found.group(1))
    return _claim_list(items)


def _question(value: Any) -> str | None:
    """A question: a non-empty string on one line that ends with ``?``."""
    if not isinstance(value, str):
        return None
    text = _SPACE.sub(" ", value).strip()
    return text if "\n" not in value.strip() and len(text) > 1 and text.endswith("?") else None


#: Figure 5's letters (A: RELEVANT, B: IRRELEVANT).
RELEVANCE_FORMAT = _letters({"A": "RELEVANT", "B": "IRRELEVANT"})
#: Figure 6's letters.
GRADE_FORMAT = _letters({"A": "CORRECT", "B": "INCORRECT", "C": "ABSTAINED"})
#: The support judge's letters.
SUPPORT_FORMAT = _letters({"A": "SUPPORTED", "B": "NOT SUPPORTED"})
#: UMBRELA's graded relevance 0-3: JSON ``{"final_score": N}`` or ``##final score: N``.
SCORE_FORMAT = AnswerFormat(
    name="final_score",
    key="final_score",
    value_schema={"type": "integer", "enum": [0, 1, 2, 3]},
    check=_score,
    free_text=_final_score,
)
#: A claim list: JSON ``{"claims": [...]}`` or bulleted/numbered lines.
CLAIMS_FORMAT = AnswerFormat(
    name="claims",
    key="claims",
    value_schema={"type": "array", "items": {"type": "string"}},
    check=_claim_list,
    free_text=_bullets,
)
#: A generated question: JSON ``{"question": "...?"}`` or the question alone on one line.
QUESTION_FORMAT = AnswerFormat(
    name="question",
    key="question",
    value_schema={"type": "string"},
    check=_question,
    free_text=_question,
)

#: Figure 6's grades as ``slotwise correlate`` outcomes.
OUTCOMES: Mapping[str, str] = {"A": "correct", "B": "wrong", "C": "abstained"}


def answers_text(answers: Sequence[str]) -> str:
    """The answers as one cache-key text."""
    return json.dumps(list(answers), ensure_ascii=False)
