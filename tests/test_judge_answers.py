"""Judge answers are read strictly: a JSON object of the answer format, or the format's
one documented free-text pattern. Adversarial answers (negations, hedges, truncated JSON,
two grades, grades off the scale, empty) are unreadable, never a label."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from engine.annotate import prompts
from engine.annotate.judge import (
    CLAIMS_FORMAT,
    GRADE_FORMAT,
    QUESTION_FORMAT,
    RELEVANCE_FORMAT,
    SCORE_FORMAT,
    SUPPORT_FORMAT,
    AnswerFormat,
)

DATA = Path(__file__).resolve().parent / "data"

#: Answers no judge format may read as a label (the issue's, and their kin).
ADVERSARIAL = [
    "The document is not relevant.",
    "Grade: not relevant",
    "This passage isn't relevant to the question.",
    '{"motivation": "The document is not relevant',
    '{"motivation": "The document is not relevant", "grade": ',
    "The answer is not correct.",
    "I think it is probably relevant, but I am not sure.",
    "RELEVANT",
    "IRRELEVANT",
    "not RELEVANT",
    "A or B",
    "Grade A",
    "grade: A",
    "A.",
    "a",
    "The grade is A.",
    'Sure! {"motivation": "fits", "grade": "A"}',
    '{"motivation": "fits", "grade": "A"} Hope this helps.',
    '{"grade": "A"}\n{"grade": "B"}',
    '{"grade": "A", "grade": "B"}',
    '{"grade": ["A"]}',
    '{"grade": null}',
    '{"Grade": "A"}',
    '["A"]',
    '```json\n{"grade": "A"',
    "",
    "   \n ",
    "##final score: 2 (not relevant)",
    "##final score: 5",
    "##final score: -1",
    "##final score: 2.5",
    "##final score: two",
    "##final score: 1\n##final score: 3",
    "final score: 3",
    "Final score 3",
    "3",
    '{"final_score": 4}',
    '{"final_score": "3"}',
    '{"final_score": 3.0}',
    '{"final_score": true}',
    '{"final_score": 3, "final_score": 0}',
    "SUPPORTED",
    "NOT SUPPORTED",
    "It does not support the claim.",
    "CORRECT",
    "INCORRECT",
]

LETTER_FORMATS = [RELEVANCE_FORMAT, GRADE_FORMAT, SUPPORT_FORMAT]


class TestAdversarial:
    @pytest.mark.parametrize("answer", ADVERSARIAL)
    @pytest.mark.parametrize(
        "answer_format", [*LETTER_FORMATS, SCORE_FORMAT], ids=["fig5", "fig6", "support", "umbrela"]
    )
    def test_never_a_label(self, answer_format: AnswerFormat, answer: str) -> None:
        """No adversarial answer is read as a grade by any judge format."""
        assert answer_format.read(answer) is None

    @pytest.mark.parametrize(
        "answer",
        [
            "Sure:\n- one claim",
            "- one\nand then prose",
            '{"claims": ["A.", "B',
            '{"claims": [1, 2]}',
            '{"claims": ["A.", ""]}',
            '{"claims": "A."}',
            '["A.", "B."]',
            "I cannot split this.",
            "",
        ],
    )
    def test_claims_never_from_prose(self, answer: str) -> None:
        """A claim list is JSON or bullets only: prose, truncation and odd shapes are unreadable."""
        assert CLAIMS_FORMAT.read(answer) is None

    @pytest.mark.parametrize(
        "answer",
        ["What is X", "What is X?\nWhy?", '{"question": ""}', ""],
    )
    def test_questions_never_from_prose(self, answer: str) -> None:
        """A question is one line that ends with '?', or JSON holding one."""
        assert QUESTION_FORMAT.read(answer) is None


class TestReadable:
    @pytest.mark.parametrize(
        ("answer", "letter"),
        [
            ('{"motivation": "it has the answer", "grade": "A"}', "A"),
            ('  {"grade": "B", "motivation": "no"}  ', "B"),
            ('```json\n{"motivation": "no", "grade": "B"}\n```', "B"),
            ('```\n{"motivation": "m", "grade": "A"}\n```', "A"),
            ("A", "A"),
            ("B", "B"),
            ("A: RELEVANT", "A"),
            ("B: IRRELEVANT", "B"),
            ("b: irrelevant", None),  # the letter as listed: upper case
            ("B: RELEVANT", None),  # a letter with the other's word
        ],
    )
    def test_relevance_letters(self, answer: str, letter: str | None) -> None:
        """Figure 5's answer: the JSON object, or the whole answer one of its option lines."""
        assert RELEVANCE_FORMAT.read(answer) == letter

    def test_grades_and_support(self) -> None:
        """Figure 6's C and the support judge's two-word label read as listed."""
        assert GRADE_FORMAT.read('{"motivation": "m", "grade": "C"}') == "C"
        assert GRADE_FORMAT.read("B: INCORRECT") == "B"
        assert GRADE_FORMAT.read("A: INCORRECT") is None
        assert SUPPORT_FORMAT.read("B: NOT SUPPORTED") == "B"
        assert SUPPORT_FORMAT.read("A: NOT SUPPORTED") is None

    @pytest.mark.parametrize(
        ("answer", "score"),
        [
            ("##final score: 0", 0),
            ("##final score: 3", 3),
            ("## Final Score : 2", 2),
            ("M: 2\nT: 1\n##final score: 2", 2),
            ('{"final_score": 1}', 1),
            ('```json\n{"final_score": 3}\n```', 3),
        ],
    )
    def test_umbrela_scores(self, answer: str, score: int) -> None:
        """UMBRELA's answer: its last line ##final score: N, or {"final_score": N}."""
        assert SCORE_FORMAT.read(answer) == score

    def test_claims(self) -> None:
        """JSON lists and bulleted or numbered lines; blanks collapsed, repeats dropped."""
        assert CLAIMS_FORMAT.read('{"claims": ["A is B.", " C  is D. ", "A is B."]}') == [
            "A is B.",
            "C is D.",
        ]
        assert CLAIMS_FORMAT.read("1. First fact.\n2) Second fact.\n") == [
            "First fact.",
            "Second fact.",
        ]
        assert CLAIMS_FORMAT.read("- one\n* two\n• three") == ["one", "two", "three"]
        assert CLAIMS_FORMAT.read('{"claims": []}') == []

    def test_questions(self) -> None:
        assert QUESTION_FORMAT.read("What is the refund window?") == "What is the refund window?"
        assert QUESTION_FORMAT.read('{"question": "Why  so?"}') == "Why so?"


class TestSchemas:
    @pytest.mark.parametrize(
        ("answer_format", "answer"),
        [
            (RELEVANCE_FORMAT, {"motivation": "m", "grade": "A"}),
            (GRADE_FORMAT, {"motivation": "m", "grade": "C"}),
            (SUPPORT_FORMAT, {"motivation": "m", "grade": "B"}),
            (SCORE_FORMAT, {"final_score": 2}),
            (CLAIMS_FORMAT, {"claims": ["x."]}),
            (QUESTION_FORMAT, {"question": "Why?"}),
        ],
    )
    def test_what_the_schema_admits_is_read(
        self, answer_format: AnswerFormat, answer: dict
    ) -> None:
        """An answer valid under the structured-output schema is a readable answer, and
        the schema refuses a value off the scale."""
        import json

        schema = answer_format.schema()
        jsonschema.validate(answer, schema)
        assert answer_format.read(json.dumps(answer)) is not None
        bad = {**answer, answer_format.key: 7}
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)

    def test_response_format_is_openai_style(self) -> None:
        found = SCORE_FORMAT.response_format()
        assert found["type"] == "json_schema"
        assert found["json_schema"]["strict"] is True
        assert found["json_schema"]["schema"]["additionalProperties"] is False


class TestUmbrelaPrompt:
    def test_verbatim(self) -> None:
        """The reference-free prompt is UMBRELA's, as in the authors' repository."""
        expected = (DATA / "umbrela" / "qrel_zeroshot_bing.txt").read_text(encoding="utf-8")
        assert expected == prompts.UMBRELA_TEMPLATE
        filled = prompts.umbrela_prompt("how long is the return window", "Returns: 30 days.")
        assert "Query: how long is the return window\nPassage: Returns: 30 days.\n" in filled
