"""TREC qrels and run files, and conversion to and from slotwise samples and outputs.

- qrels: ``qid iter docid rel`` (4 whitespace-separated fields; ``iter`` is ignored).
- run: ``qid Q0 docid rank score tag`` (6 fields). The rank column is ignored: documents
  are ordered as trec_eval orders them, by score descending, ties by doc id descending
  (string comparison).

Malformed lines raise :class:`~engine.errors.InputError` listing every bad line.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.batch import _no_gc
from engine.errors import InputError, Problem
from engine.fileio import atomic_write
from engine.records import Output, Sample

__all__ = [
    "Qrels",
    "Run",
    "outputs_to_run",
    "qrels_to_samples",
    "rank_by_score",
    "rank_scored",
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


def rank_scored(run: Mapping[str, Mapping[str, float]]) -> Run:
    """``{qid: {docid: score}}`` (pytrec_eval's run shape) as ranked lists, in trec_eval
    order. Queries whose scores already strictly descend in mapping order (runs are usually
    written that way) keep that order, found with one vectorised check; the others are
    sorted with :func:`rank_by_score`. Raises :class:`InputError` for a score that is not
    a finite number or an id that is not a non-empty string."""
    problems = [
        Problem("a run maps a query id to {doc id: score}", sample_id=str(qid))
        for qid, scored in run.items()
        if not isinstance(scored, Mapping)
    ]
    if problems:
        raise InputError(problems, summary="invalid run")
    lengths = np.fromiter(map(len, run.values()), dtype=np.int64, count=len(run))
    try:
        scores = np.fromiter(
            itertools.chain.from_iterable(s.values() for s in run.values()),
            dtype=np.float64,
            count=int(lengths.sum()),
        )
    except (TypeError, ValueError):
        scores = np.array([math.nan])
    ids_ok = set(map(type, run)) <= {str} and all(
        set(map(type, s)) <= {str} and "" not in s for s in run.values()
    )
    types_ok = all(set(map(type, s.values())) <= {int, float} for s in run.values())
    if not (ids_ok and types_ok and np.isfinite(scores).all()):
        raise InputError(_run_problems(run), summary="invalid run")
    descending = np.ones(scores.size, dtype=np.bool_)
    descending[1:] = scores[1:] < scores[:-1]
    starts = (np.cumsum(lengths) - lengths)[lengths > 0]
    descending[starts] = True  # a query's first document starts afresh
    ordered = np.ones(len(lengths), dtype=np.bool_)
    if starts.size:
        ordered[lengths > 0] = np.logical_and.reduceat(descending, starts)
    return {
        qid: list(scored) if ok else rank_by_score(scored.items())
        for (qid, scored), ok in zip(run.items(), ordered.tolist(), strict=True)
    }


def _run_problems(run: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    problems = []
    for qid, scored in run.items():
        if not isinstance(qid, str) or not qid:
            problems.append(Problem(f"query id {qid!r} is not a non-empty string"))
        for doc, score in scored.items():
            if not isinstance(doc, str) or not doc:
                problems.append(
                    Problem(f"doc id {doc!r} is not a non-empty string", sample_id=str(qid))
                )
            if (
                isinstance(score, bool)
                or not isinstance(score, int | float)
                or not math.isfinite(score)
            ):
                problems.append(
                    Problem(
                        f"score {score!r} of {doc!r} is not a finite number", sample_id=str(qid)
                    )
                )
    return problems


#: Lines per block of the bulk reader: bounds its memory on large files.
_BLOCK_LINES = 1 << 20


def _bulk_fields(path: Path, width: int, keep: tuple[int, ...]) -> list[list[str]] | None:
    """The ``keep`` columns of every line (``width`` fields), read in bulk when the file
    is canonically formatted: fields separated by single spaces, ``\n`` line ends, no
    blank lines or other whitespace. That is checked exactly, with numpy, on the
    separators of each block; None means "use the line-by-line reader" (which words
    any problem)."""
    columns: list[list[str]] = [[] for _ in keep]
    pattern = np.array([ord(" ")] * (width - 1) + [ord("\n")], dtype=np.uint8)
    try:
        with path.open("rb") as handle:
            while True:
                block = b"".join(itertools.islice(handle, _BLOCK_LINES))
                if not block:
                    break
                if not block.endswith(b"\n"):
                    block += b"\n"
                raw = np.frombuffer(block, dtype=np.uint8)
                if (raw < 33).sum() != ((raw == 32) | (raw == 10)).sum():
                    return None  # tabs, carriage returns or other control characters
                separators = raw[(raw == 32) | (raw == 10)]
                if separators.size % width or (separators.reshape(-1, width) != pattern).any():
                    return None
                if b"  " in block or b"\n " in block or b" \n" in block or block[:1] == b" ":
                    return None  # an empty field
                tokens = block.decode("utf-8").split()
                for column, values in zip(keep, columns, strict=True):
                    values.extend(tokens[column::width])
                del tokens
    except (OSError, UnicodeDecodeError):
        return None
    return columns


def _bulk_numbers(texts: list[str]) -> np.ndarray | None:
    """Finite float64 values of number texts; None if any is not one."""
    try:
        values = np.array(texts, dtype=np.float64) if texts else np.zeros(0)
    except ValueError:
        return None
    return values if np.isfinite(values).all() else None


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
    with _no_gc():
        columns = _bulk_fields(path, 4, keep=(0, 2, 3))
        labels = _bulk_numbers(columns[2]) if columns is not None else None
        grouped = None
        if columns is not None and labels is not None:
            grouped = _grouped(columns[0], columns[1], labels)
    if grouped is not None:  # else not canonical, or a document judged twice: see below
        return grouped
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
    with _no_gc():
        columns = _bulk_fields(path, 6, keep=(0, 2, 4))
        scores = _bulk_numbers(columns[2]) if columns is not None else None
        run = None
        if columns is not None and scores is not None:
            run = _grouped(columns[0], columns[1], scores)
    if run is not None:  # else not canonical, or a repeated doc id (every line is kept)
        return rank_scored(run)
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


def _grouped(
    qids: list[str], docs: list[str], values: np.ndarray
) -> dict[str, dict[str, float]] | None:
    """``{qid: {doc: value}}`` from columns, queries in order of first appearance, lines
    in file order; None if a query names a document twice."""
    if not qids:
        return {}
    first: dict[str, int] = {}
    codes = np.fromiter(
        map(first.setdefault, qids, itertools.count()), dtype=np.int64, count=len(qids)
    )
    if (codes[1:] < codes[:-1]).any():  # a query's lines are not contiguous: regroup them
        order = np.argsort(codes, kind="stable")
        codes, values = codes[order], values[order]
        docs = list(operator.itemgetter(*order.tolist())(docs)) if len(docs) > 1 else docs
    bounds = [0, *(np.flatnonzero(codes[1:] != codes[:-1]) + 1).tolist(), len(qids)]
    numbers = values.tolist()
    grouped = {}
    for qid, start, end in zip(first, bounds[:-1], bounds[1:], strict=True):
        pairs = dict(zip(docs[start:end], numbers[start:end], strict=True))
        if len(pairs) != end - start:
            return None
        grouped[qid] = pairs
    return grouped


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
