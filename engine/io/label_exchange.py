"""Handing a drawn sample (``slotwise sample``) to people and reading their grades back: the formats, and
nothing that pools or scores.

- **The handout**, one :class:`Task` (a question and a passage to grade) a row:
  CSV and JSONL with the question, the passage and the grade scale, or Label Studio's
  import JSON (``[{"data": {...}}]``) with its labelling config (``<Choices>``, one
  ``<Choice>`` a grade): :func:`write_handout`.
- **The answers**: the handout's CSV/JSONL with ``grade`` (and ``annotator``) filled
  in, Label Studio's JSON export (``annotations[].result[].value.choices``, several
  annotators a task) or its JSON-MIN/CSV exports: :func:`read_answers`, every row
  located (file, line or task and annotation).
- **The human labels**: :func:`resolve` checks the answers against the pairs that must be
  graded (unknown ids, rows outside the sample, grades off the scale, ungraded pairs,
  annotators who disagree) and settles each pair's label, keeping every annotator's
  grade and where it was read (the provenance ``slotwise labels import`` writes).
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import attrs

from engine.errors import InputError, Problem
from engine.io.files import format_suffix, read_document, read_jsonl, read_text
from engine.io.writer import atomic_write

__all__ = [
    "FORMATS",
    "RESOLUTIONS",
    "SCALES",
    "Answer",
    "Resolved",
    "Scale",
    "Task",
    "label_config",
    "read_answers",
    "resolve",
    "write_handout",
]

#: The handout formats :func:`write_handout` writes.
FORMATS = ("csv", "jsonl", "label-studio")
#: How :func:`resolve` settles annotators who gave one pair different grades (``none``:
#: it does not; each disagreement is a problem).
RESOLUTIONS = ("none", "majority", "mean", "median", "min", "max")
#: Label Studio's names for the config's parts: the passage's ``<Text>``, the ``<Choices>``.
CONTROL, PASSAGE = "grade", "passage"
CSV_COLUMNS = (
    "task",
    "query_id",
    "doc_id",
    "stratum",
    "question",
    "passage",
    "scale",
    "scale_guide",
    "grade",
    "annotator",
)


@attrs.frozen
class Scale:
    """A grade scale: its name and each grade with its wording. A choice is written
    ``"GRADE = WORDING"``; an answer is that text or the bare grade."""

    name: str
    grades: tuple[tuple[int, str], ...]
    _by_text: Mapping[str, int] = attrs.field(init=False, repr=False, eq=False)

    @_by_text.default
    def _texts(self) -> dict[str, int]:
        return {text: g for g, w in self.grades for text in (str(g), f"{g} = {w}")}

    def choice(self, grade: int) -> str:
        return f"{grade} = {dict(self.grades)[grade]}"

    @property
    def choices(self) -> list[str]:
        return [self.choice(grade) for grade, _ in self.grades]

    @property
    def guide(self) -> str:
        """The scale in one line, for a CSV cell."""
        return "; ".join(self.choices)

    def grade_of(self, answer: Any) -> int | None:
        """The grade an answer names (``2``, ``"2"`` or its choice text), None when off the scale."""
        if isinstance(answer, str):
            return self._by_text.get(answer.strip())
        if isinstance(answer, int) and not isinstance(answer, bool):
            return self._by_text.get(str(answer))
        return None


#: The scales a handout can use. ``umbrela``: the TREC graded scale 0-3 in UMBRELA's
#: wording (the scale ``slotwise annotate``'s reference-free judge grades on);
#: ``binary``: relevant or not.
SCALES = {
    "umbrela": Scale(
        "umbrela",
        (
            (0, "the passage has nothing to do with the question"),
            (1, "the passage seems related to the question but does not answer it"),
            (
                2,
                "the passage has some answer for the question, but the answer may be a bit "
                "unclear, or hidden amongst extraneous information",
            ),
            (3, "the passage is dedicated to the question and contains the exact answer"),
        ),
    ),
    "binary": Scale(
        "binary",
        (
            (0, "not relevant: the passage does not help answer the question"),
            (1, "relevant: the passage helps answer the question"),
        ),
    ),
}


# -- the handout -----------------------------------------------------------------------------


@attrs.frozen
class Task:
    """One pair to grade: the question and the passage people read."""

    query_id: str
    doc_id: str
    question: str
    passage: str
    stratum: str | None = None

    @property
    def key(self) -> str:
        return f"{self.query_id}/{self.doc_id}"


def label_config(scale: Scale) -> str:
    """Label Studio's labelling config for the scale: the question, the passage, and one
    required single choice a grade (its value the choice text)."""
    choices = "\n".join(f"    <Choice value={quoteattr(choice)}/>" for choice in scale.choices)
    return (
        "<View>\n"
        '  <Header value="Question"/>\n'
        '  <Text name="question" value="$question"/>\n'
        '  <Header value="Passage"/>\n'
        f'  <Text name="{PASSAGE}" value="$passage"/>\n'
        f'  <Header value="How well does the passage answer the question? ({scale.name} scale)"/>\n'
        f'  <Choices name="{CONTROL}" toName="{PASSAGE}" choice="single-radio" required="true">\n'
        f"{choices}\n"
        "  </Choices>\n"
        "</View>\n"
    )


def _row(task: Task, scale: Scale) -> dict[str, Any]:
    return {
        "task": task.key,
        "query_id": task.query_id,
        "doc_id": task.doc_id,
        "stratum": task.stratum,
        "question": task.question,
        "passage": task.passage,
        "scale": scale.name,
    }


def write_handout(path: str | Path, tasks: Sequence[Task], scale: Scale, fmt: str) -> list[Path]:
    """Write the tasks for people to grade, atomically; the paths written (Label Studio:
    the tasks and, beside them, ``PATH.label-config.xml``)."""
    path = Path(path)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\r\n")
        writer.writeheader()
        for task in tasks:
            row = _row(task, scale)
            writer.writerow(
                {
                    **row,
                    "stratum": row["stratum"] or "",
                    "scale_guide": scale.guide,
                    "grade": "",
                    "annotator": "",
                }
            )
        atomic_write(path, buffer.getvalue())
        return [path]
    if fmt == "jsonl":
        grades = {str(grade): wording for grade, wording in scale.grades}
        lines = [
            json.dumps(
                {**_row(task, scale), "scale_guide": grades, "grade": None, "annotator": None},
                ensure_ascii=False,
            )
            + "\n"
            for task in tasks
        ]
        atomic_write(path, "".join(lines))
        return [path]
    if fmt == "label-studio":
        document = [{"data": _row(task, scale)} for task in tasks]
        config = path.with_name(f"{path.stem}.label-config.xml")
        atomic_write(path, json.dumps(document, ensure_ascii=False, indent=1) + "\n")
        atomic_write(config, label_config(scale))
        return [path, config]
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")


# -- the answers -----------------------------------------------------------------------------


@attrs.frozen
class Answer:
    """One annotator's grade of one pair (``grade`` None: left empty, ``skipped``: the
    annotator skipped the task), and where it was read (``source``, ``line`` or
    ``pointer``)."""

    query_id: str
    doc_id: str
    annotator: str
    grade: int | None
    source: str
    line: int | None = None
    pointer: str = ""
    skipped: bool = False
    task: Any = None
    """The Label Studio task's id (what its interface shows), where there is one."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.query_id, self.doc_id)

    @property
    def _task(self) -> str:
        return "" if self.task is None else f" (task {self.task})"

    @property
    def where(self) -> str:
        if self.line is not None:
            return f"{self.source}:{self.line}"
        return f"{self.source} {self.pointer}{self._task}"

    def problem(self, message: str) -> Problem:
        return Problem(
            f"{self.doc_id}{self._task}: {message}",
            self.query_id,
            self.pointer,
            self.source,
            self.line,
        )


def _id(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) and value.strip() else None


def _annotator(value: Any, default: str) -> str:
    """An annotator named in a row (a name, an email, a Label Studio user object or id)."""
    if isinstance(value, Mapping):
        value = value.get("email") or value.get("username") or value.get("id")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # a Label Studio user id, as its CSV export writes it
    return value.strip() if isinstance(value, str) and value.strip() else default


def _from_row(
    row: Mapping[str, Any],
    scale: Scale,
    source: str,
    default: str,
    *,
    line: int | None,
    pointer: str,
) -> tuple[Answer | None, list[Problem]]:
    """A flat row (CSV, JSONL, JSON-MIN): ``query_id``, ``doc_id``, ``grade``, ``annotator``."""
    query, doc = _id(row.get("query_id")), _id(row.get("doc_id"))
    if query is None or doc is None:
        missing = " and ".join(n for n, v in (("query_id", query), ("doc_id", doc)) if v is None)
        return None, [Problem(f"no {missing}", query, pointer, source, line)]
    named = row.get("scale")
    if named not in (None, "", scale.name):
        return None, [
            Problem(
                f"{doc}: graded on the {named!r} scale, not {scale.name!r}",
                query,
                pointer,
                source,
                line,
            )
        ]
    annotator = _annotator(row.get("annotator"), default)
    value = row.get(CONTROL)
    if value is None or (isinstance(value, str) and not value.strip()):
        return Answer(query, doc, annotator, None, source, line, pointer), []
    grade = scale.grade_of(value)
    answer = Answer(query, doc, annotator, grade, source, line, pointer)
    if grade is None:
        grades = ", ".join(str(g) for g, _ in scale.grades)
        return None, [
            answer.problem(f"grade {value!r} is not on the {scale.name} scale ({grades})")
        ]
    return answer, []


def _label_studio(
    tasks: list[Any], scale: Scale, source: str, default: str
) -> tuple[list[Answer], list[Problem]]:
    """Label Studio's JSON export: each task's data names the pair, each annotation's
    ``result`` holds the ``grade`` choice."""
    answers: list[Answer] = []
    problems: list[Problem] = []
    for index, task in enumerate(tasks):
        data = task.get("data") if isinstance(task, Mapping) else None
        if not isinstance(data, Mapping):
            problems.append(Problem("a task without data", None, f"/{index}/data", source))
            continue
        query, doc = _id(data.get("query_id")), _id(data.get("doc_id"))
        if query is None or doc is None:
            problems.append(
                Problem(
                    "a task without data.query_id and data.doc_id", query, f"/{index}/data", source
                )
            )
            continue
        if data.get("scale") not in (None, scale.name):
            message = f"{doc}: graded on the {data['scale']!r} scale, not {scale.name!r}"
            problems.append(Problem(message, query, f"/{index}/data/scale", source))
            continue
        annotations = task.get("annotations") or []
        task_id = task.get("id")
        for number, annotation in enumerate(annotations):
            pointer = f"/{index}/annotations/{number}"
            if not isinstance(annotation, Mapping):
                problems.append(
                    Problem(f"{doc}: an annotation is an object", query, pointer, source)
                )
                continue
            annotator = _annotator(annotation.get("completed_by"), default)
            if annotation.get("was_cancelled"):
                answers.append(
                    Answer(query, doc, annotator, None, source, None, pointer, True, task_id)
                )
                continue
            choices = [
                choice
                for result in annotation.get("result") or []
                if isinstance(result, Mapping) and result.get("from_name") == CONTROL
                for choice in (result.get("value") or {}).get("choices") or []
            ]
            grade = scale.grade_of(choices[0]) if len(choices) == 1 else None
            answer = Answer(query, doc, annotator, grade, source, None, pointer, task=task_id)
            if len(choices) > 1:
                bad = attrs.evolve(answer, pointer=pointer + "/result")
                problems.append(bad.problem(f"{len(choices)} grades chosen ({choices})"))
                continue
            if choices and grade is None:
                problems.append(
                    answer.problem(f"choice {choices[0]!r} is not on the {scale.name} scale")
                )
                continue
            answers.append(answer)
    return answers, problems


def read_answers(path: str | Path, scale: Scale) -> tuple[list[Answer], list[Problem]]:
    """The grades in an answers file (CSV, JSONL, or JSON: Label Studio's export, or a
    list of flat rows as its JSON-MIN export) and the problems of its rows. A row that
    names no annotator is the file's (its name without the suffix)."""
    path = Path(path)
    source, default = str(path), path.name.split(".")[0]
    suffix = format_suffix(path)
    answers: list[Answer] = []
    problems: list[Problem] = []

    def add(found: Answer | None, bad: list[Problem]) -> None:
        problems.extend(bad)
        if found is not None:
            answers.append(found)

    if suffix == ".csv":
        text = read_text(path)
        reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
        missing = [c for c in ("query_id", "doc_id", CONTROL) if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError([Problem(f"no column {', '.join(missing)}", source=source, line=1)])
        start = 2
        for row in reader:
            add(*_from_row(row, scale, source, default, line=start, pointer=""))
            start = reader.line_num + 1
    elif suffix == ".jsonl":
        try:
            for line, row in read_jsonl(path):
                if isinstance(row, Mapping):
                    add(*_from_row(row, scale, source, default, line=line, pointer=""))
                else:
                    problems.append(Problem("a row is a JSON object", source=source, line=line))
        except InputError as error:
            problems.extend(error.problems)
    elif suffix == ".json":
        document = read_document(path)  # Label Studio writes its export on one line
        if not isinstance(document, list):
            raise InputError(
                [Problem("a JSON answers file is a list of tasks or rows", source=source)]
            )
        if any(isinstance(t, Mapping) and "data" in t for t in document):
            found, bad = _label_studio(document, scale, source, default)
            answers += found
            problems += bad
        else:
            for index, row in enumerate(document):
                if isinstance(row, Mapping):
                    add(*_from_row(row, scale, source, default, line=None, pointer=f"/{index}"))
                else:
                    problems.append(
                        Problem("a row is a JSON object", pointer=f"/{index}", source=source)
                    )
    else:
        raise InputError(
            [Problem("answers are .csv, .jsonl or .json (Label Studio's export)", source=source)]
        )
    return answers, problems


# -- the human labels ------------------------------------------------------------------------


@attrs.frozen
class Resolved:
    """The human label of each graded pair, each pair's grades by annotator, and counts."""

    labels: Mapping[tuple[str, str], float]
    grades: Mapping[tuple[str, str], Mapping[str, int]]
    sources: Mapping[tuple[str, str], Mapping[str, str]]
    how: Mapping[tuple[str, str], str]
    empty: int
    skipped: int

    def lines(self) -> list[str]:
        kinds = Counter(self.how.values())
        annotators = Counter(a for grades in self.grades.values() for a in grades)
        said = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
        by = ", ".join(f"{name} {count}" for name, count in sorted(annotators.items()))
        return [
            f"{len(self.labels)} human labels ({said}); grades by annotator: {by}; "
            f"{self.empty} row(s) left ungraded and {self.skipped} task(s) skipped by an "
            "annotator whose pair another annotator graded"
        ]


def _settle(grades: list[int], how: str) -> float | None:
    """One label from several annotators' grades (None: a tie under ``majority``)."""
    if how == "mean":
        return sum(grades) / len(grades)
    if how == "median":
        ordered = sorted(grades)
        middle = len(ordered) // 2
        return (
            float(ordered[middle])
            if len(ordered) % 2
            else (ordered[middle - 1] + ordered[middle]) / 2
        )
    if how == "min":
        return float(min(grades))
    if how == "max":
        return float(max(grades))
    counts = Counter(grades).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return float(counts[0][0])


def resolve(
    answers: Iterable[Answer],
    expected: Sequence[tuple[str, str]],
    *,
    queries: Iterable[str],
    sampled: Iterable[str],
    how: str = "none",
    unit: str = "query",
) -> Resolved:
    """Check the answers against the pairs that must be graded (``expected``, in order)
    and settle each pair's label. ``queries``: every query of the dataset; ``sampled``:
    those drawn. Raises :class:`InputError` listing every problem: a query not in the
    dataset, one not drawn, a document outside the pairs to grade, an annotator grading a
    pair twice, a pair no one graded, and, with ``how`` ``none``, annotators who disagree
    (each named with their grade and where; ``majority``: a tie)."""
    if how not in RESOLUTIONS:
        raise ValueError(f"how must be one of {', '.join(RESOLUTIONS)}, got {how!r}")
    known, drawn, wanted = set(queries), set(sampled), set(expected)
    problems: list[Problem] = []
    by_pair: dict[tuple[str, str], dict[str, Answer]] = {}
    empty: dict[tuple[str, str], int] = {}
    skipped: dict[tuple[str, str], int] = {}
    for answer in answers:
        if answer.query_id not in known:
            problems.append(
                answer.problem(f"unknown query id {answer.query_id!r} (not in the dataset)")
            )
            continue
        if answer.query_id not in drawn:
            problems.append(answer.problem("the query is not in the sample"))
            continue
        if answer.key not in wanted:
            outside = "not a drawn pair" if unit == "pair" else "not among the query's pooled pairs"
            problems.append(answer.problem(f"unknown document id {answer.doc_id!r}: {outside}"))
            continue
        if answer.grade is None:
            counts = skipped if answer.skipped else empty
            counts[answer.key] = counts.get(answer.key, 0) + 1
            continue
        mine = by_pair.setdefault(answer.key, {})
        first = mine.get(answer.annotator)
        if first is not None:
            problems.append(
                answer.problem(
                    f"{answer.annotator} graded it twice: {first.grade} ({first.where}) and "
                    f"{answer.grade} ({answer.where})"
                )
            )
            continue
        mine[answer.annotator] = answer
    labels: dict[tuple[str, str], float] = {}
    how_of: dict[tuple[str, str], str] = {}
    for key in expected:
        found = by_pair.get(key)
        if not found:
            left = []
            if empty.get(key):
                left.append(f"{empty[key]} row(s) left empty")
            if skipped.get(key):
                left.append(f"skipped by {skipped[key]} annotator(s)")
            because = f" ({', '.join(left)})" if left else ""
            problems.append(Problem(f"{key[1]}: not graded{because}", key[0]))
            continue
        grades = [a.grade for a in found.values() if a.grade is not None]
        if len(set(grades)) == 1:
            labels[key] = float(grades[0])
            how_of[key] = "unanimous" if len(grades) > 1 else "single"
            continue
        named = ", ".join(f"{a.annotator} {a.grade} ({a.where})" for a in found.values())
        settled = None if how == "none" else _settle(grades, how)
        if settled is None:
            why = "a tie, no majority" if how == "majority" else "choose --resolve"
            problems.append(Problem(f"{key[1]}: annotators disagree: {named} ({why})", key[0]))
            continue
        labels[key] = settled
        how_of[key] = how
    if problems:
        raise InputError(problems, summary="cannot read the human labels")
    grades_of = {
        key: {name: a.grade for name, a in found.items() if a.grade is not None}
        for key, found in by_pair.items()
    }
    sources = {key: {name: a.where for name, a in found.items()} for key, found in by_pair.items()}
    return Resolved(
        labels=labels,
        grades=grades_of,  # type: ignore[arg-type]
        sources=sources,
        how=how_of,
        empty=sum(empty.get(k, 0) for k in labels),
        skipped=sum(skipped.get(k, 0) for k in labels),
    )
