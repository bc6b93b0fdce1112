"""TREC qrels and run files, and conversion to and from slotwise samples and outputs.

- qrels: ``qid iter docid rel`` (4 whitespace-separated fields; ``iter`` is ignored).
- run: ``qid Q0 docid rank score tag`` (6 fields). The rank column is ignored: documents
  are ordered as trec_eval orders them, by score descending, ties by doc id descending
  (string comparison).

Malformed lines raise :class:`~engine.errors.InputError` listing every bad line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import InputError, Problem
from engine.fileio import atomic_write
from engine.records import Output, Sample

__all__ = [
    "Qrels",
    "Run",
    "outputs_to_run",
    "qrels_to_samples",
    "rank_by_score",
    "read_qrels",
    "read_run",
    "run_to_outputs",
    "samples_to_qrels",
    "write_qrels",
    "write_run",
]

#: qid -> docid -> graded label
Qrels = dict[str, dict[str, float]]
#: qid -> ranked docids, rank 1 first
Run = dict[str, list[str]]

_LONG_FORM_KEYS = frozenset({"relevance", "utility", "answers", "groups"})


def rank_by_score(scored: Iterable[tuple[str, float]]) -> list[str]:
    """Doc ids ordered as trec_eval orders a run: score descending, then doc id descending."""
    return [doc for doc, _ in sorted(scored, key=lambda pair: (pair[1], pair[0]), reverse=True)]


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank line."""
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                fields = line.split()
                if fields:
                    yield number, fields
    except OSError as error:
        raise InputError(
            [Problem(f"cannot read file: {error.strerror or error}", source=str(path))]
        ) from None
    except UnicodeDecodeError as error:
        raise InputError([Problem(f"not UTF-8 text: {error.reason}", source=str(path))]) from None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """``{qid: {docid: label}}`` from a qrels file, in file order."""
    path = Path(path)
    qrels: Qrels = {}
    problems: list[Problem] = []
    for number, fields in _lines(path):
        if len(fields) != 4:
            problems.append(
                _bad(path, number, f"expected 4 fields 'qid iter docid rel', got {len(fields)}")
            )
            continue
        qid, _, doc, text = fields
        label = _number(text)
        if label is None:
            problems.append(_bad(path, number, f"relevance {text!r} is not a finite number"))
        elif doc in qrels.setdefault(qid, {}):
            problems.append(_bad(path, number, f"document {doc!r} judged twice for query {qid!r}"))
        else:
            qrels[qid][doc] = label
    if problems:
        raise InputError(problems, summary=f"malformed qrels {path}")
    return qrels


def read_run(path: str | os.PathLike[str]) -> Run:
    """``{qid: [docid, ...]}`` from a run file, each list in trec_eval order (see
    :func:`rank_by_score`). Repeated doc ids are kept; the engine drops and counts them."""
    path = Path(path)
    scored: dict[str, list[tuple[str, float]]] = {}
    problems: list[Problem] = []
    for number, fields in _lines(path):
        if len(fields) != 6:
            problems.append(
                _bad(
                    path,
                    number,
                    f"expected 6 fields 'qid Q0 docid rank score tag', got {len(fields)}",
                )
            )
            continue
        qid, _, doc, _, text, _ = fields
        score = _number(text)
        if score is None:
            problems.append(_bad(path, number, f"score {text!r} is not a finite number"))
        else:
            scored.setdefault(qid, []).append((doc, score))
    if problems:
        raise InputError(problems, summary=f"malformed run {path}")
    return {qid: rank_by_score(pairs) for qid, pairs in scored.items()}


def _bad(path: Path, line: int, message: str) -> Problem:
    return Problem(message, source=str(path), line=line)


def _label_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def write_qrels(path: str | os.PathLike[str], qrels: Mapping[str, Mapping[str, float]]) -> None:
    """Write ``qid 0 docid rel`` lines (atomically)."""
    lines = [
        f"{qid} 0 {doc} {_label_text(label)}\n"
        for qid, labels in qrels.items()
        for doc, label in labels.items()
    ]
    atomic_write(path, "".join(lines))


def write_run(
    path: str | os.PathLike[str], run: Mapping[str, Sequence[str]], tag: str = "slotwise"
) -> None:
    """Write ``qid Q0 docid rank score tag`` lines (atomically). Scores are
    ``n - rank + 1``, strictly descending, so :func:`read_run` restores the same order."""
    lines = [
        f"{qid} Q0 {doc} {rank} {len(docs) - rank + 1} {tag}\n"
        for qid, docs in run.items()
        for rank, doc in enumerate(docs, start=1)
    ]
    atomic_write(path, "".join(lines))


def _label_value(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def qrels_to_samples(qrels: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """Raw samples ``{"id": qid, "expected_output": {docid: label}}``, one per query.

    A query judging a document named like a long-form key (``relevance``, ...) gets the
    long form ``{"relevance": {...}}`` so the labels cannot be misread.
    """
    samples = []
    for qid, labels in qrels.items():
        graded = {doc: _label_value(label) for doc, label in labels.items()}
        expected: dict[str, Any] = (
            {"relevance": graded} if _LONG_FORM_KEYS & graded.keys() else graded
        )
        samples.append({"id": qid, "expected_output": expected})
    return samples


def samples_to_qrels(samples: Iterable[Sample | Mapping[str, Any]]) -> Qrels:
    """The relevance labels of samples (raw dicts or :class:`Sample`) as qrels; samples
    without relevance labels are left out."""
    qrels: Qrels = {}
    for item in samples:
        sample = item if isinstance(item, Sample) else Sample.from_raw(item)
        if sample.relevance is not None:
            qrels[sample.id] = dict(sample.relevance)
    return qrels


def run_to_outputs(run: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Outputs ``{sample_id: [docid, ...]}`` (bare ranked lists) for ``Dataset.evaluate``."""
    return {qid: list(docs) for qid, docs in run.items()}


def outputs_to_run(outputs: Mapping[str, Any]) -> Run:
    """A run from outputs: raw ``actual_output`` values (bare lists or ``{"retrieved": ...}``)
    or :class:`Output` objects; ``None`` (no output) is left out."""
    run: Run = {}
    for sample_id, actual in outputs.items():
        if actual is None:
            continue
        output = actual if isinstance(actual, Output) else Output.from_raw(actual)
        run[str(sample_id)] = list(output.retrieved)
    return run
