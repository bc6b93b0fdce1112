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
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine import schemas
from engine.batch import _no_gc
from engine.errors import InputError, Problem
from engine.fileio import atomic_write
from engine.records import Output, Sample

__all__ = [
    "Qrels",
    "Run",
    "outputs_to_run",
    "qrels_samples",
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


#: Bytes per block of the bulk reader (whole lines): bounds its memory on large files.
_BLOCK_BYTES = 1 << 25

IdColumn = tuple[np.ndarray, list[str]]


def _blocks(handle: Any) -> Iterator[bytes]:
    """A binary file in blocks of whole lines, about ``_BLOCK_BYTES`` each; a last line
    without ``\n`` gets one."""
    rest = b""
    while chunk := handle.read(_BLOCK_BYTES):
        block = rest + chunk
        cut = block.rfind(b"\n") + 1
        rest = block[cut:]
        if cut:
            yield block[:cut]
    if rest:
        yield rest + b"\n"


def _first_positions(values: list[bytes], offset: int, seen: dict[bytes, int]) -> np.ndarray:
    """For each value, the position (counting from ``offset``) of its first appearance
    across calls sharing ``seen``: one C-level pass, no Python step per value. Codes
    are made dense at the end by :func:`_dense`."""
    positions = map(seen.setdefault, values, itertools.count(offset))
    return np.fromiter(positions, dtype=np.int64, count=len(values))


def _dense(positions: np.ndarray, seen: dict[bytes, int]) -> IdColumn:
    """(codes 0, 1, ... in order of first appearance, distinct ids decoded) from first
    positions."""
    table = np.zeros(positions.size, dtype=np.int64)
    table[np.fromiter(seen.values(), dtype=np.int64, count=len(seen))] = np.arange(len(seen))
    return table[positions], [value.decode("utf-8") for value in seen]


def _bulk_columns(
    path: Path, width: int, ids: tuple[int, int], number: int
) -> tuple[IdColumn, IdColumn, np.ndarray] | None:
    """The two ``ids`` columns of every line (``width`` fields) as (codes, distinct ids),
    and the ``number`` column as finite float64, read in bulk when the file is
    canonically formatted: fields separated by single spaces, ``\n`` line ends, no blank
    lines or other whitespace, every number finite. That is checked exactly, with numpy,
    on the separators of each block; None means "use the line-by-line reader" (which
    words any problem). Fields are split as bytes (a block that is not ASCII must also
    split into the same fields as text) and only distinct ids are kept and decoded, not
    one string per line: memory, not parsing, is what grows with the file."""
    pattern = np.array([ord(" ")] * (width - 1) + [ord("\n")], dtype=np.uint8)
    vocabularies: tuple[dict[bytes, int], dict[bytes, int]] = ({}, {})
    codes: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    numbers: list[np.ndarray] = []
    lines = 0
    try:
        with path.open("rb") as handle:
            for block in _blocks(handle):
                raw = np.frombuffer(block, dtype=np.uint8)
                separators = (raw == 32) | (raw == 10)
                if np.count_nonzero(raw < 33) != np.count_nonzero(separators):
                    return None  # tabs, carriage returns or other control characters
                found = raw[separators]
                if found.size % width or (found.reshape(-1, width) != pattern).any():
                    return None
                if separators[0] or (separators[1:] & separators[:-1]).any():
                    return None  # an empty field: two separators in a row, or one first
                del raw, separators, found
                tokens = block.split()
                if not block.isascii() and len(block.decode("utf-8").split()) != len(tokens):
                    return None  # Unicode whitespace: the line reader splits it as text
                for column, vocabulary, parts in zip(ids, vocabularies, codes, strict=True):
                    parts.append(_first_positions(tokens[column::width], lines, vocabulary))
                values = np.array(tokens[number::width], dtype=np.float64)
                lines += values.size
                del tokens
                if not np.isfinite(values).all():
                    return None
                numbers.append(values)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    first, second = (
        _dense(np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64), vocabulary)
        for parts, vocabulary in zip(codes, vocabularies, strict=True)
    )
    return first, second, np.concatenate(numbers) if numbers else np.zeros(0)


def _query_bounds(queries: np.ndarray, count: int) -> list[int]:
    """Start offsets of each query's lines (codes sorted, every code present), plus the end."""
    return [0, *np.cumsum(np.bincount(queries, minlength=count)).tolist()]


def _names(codes: np.ndarray, ids: list[str]) -> list[str]:
    """The id string of each code, as a list (shared string objects, no copies)."""
    table = np.empty(len(ids), dtype=object)
    table[:] = ids
    names: list[str] = table[codes].tolist()
    return names


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
        grouped = _bulk_qrels(path)
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
        ranked = _bulk_run(path)
    if ranked is not None:  # else not canonical: the line reader words the problems
        return ranked
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


def _bulk_qrels(path: Path) -> Qrels | None:
    """:func:`read_qrels` for a canonical file, from its columns; None if the file is not
    canonical or judges a document twice for a query (the line reader words those)."""
    bulk = _bulk_columns(path, 4, ids=(0, 2), number=3)
    if bulk is None:
        return None
    (queries, qids), (docs, doc_ids), labels = bulk
    keys = np.sort((queries << np.int64(32)) | docs)
    if (keys[1:] == keys[:-1]).any():
        return None
    order = np.argsort(queries, kind="stable")  # group each query's lines, in file order
    names, values = _names(docs[order], doc_ids), labels[order].tolist()
    bounds = _query_bounds(queries, len(qids))
    return {
        qid: dict(zip(names[start:end], values[start:end], strict=True))
        for qid, start, end in zip(qids, bounds[:-1], bounds[1:], strict=True)
    }


def _bulk_run(path: Path) -> Run | None:
    """:func:`read_run` for a canonical file, from its columns; None if not canonical.
    A file already in trec_eval order (each query's lines together, scores strictly
    descending: how runs are written) is found so with one vectorised check; any other
    is sorted by (query, score descending, doc id descending) with one ``np.lexsort``.
    Repeated doc ids are kept, as the line reader keeps them."""
    bulk = _bulk_columns(path, 6, ids=(0, 2), number=4)
    if bulk is None:
        return None
    (queries, qids), (docs, doc_ids), scores = bulk
    same = queries[1:] == queries[:-1]
    if not ((queries[1:] >= queries[:-1]).all() and (scores[1:] < scores[:-1])[same].all()):
        by_text = np.empty(len(doc_ids), dtype=np.int64)  # doc code -> rank of its id text
        by_text[sorted(range(len(doc_ids)), key=doc_ids.__getitem__)] = np.arange(len(doc_ids))
        order = np.lexsort((-by_text[docs], -scores, queries))
        queries, docs = queries[order], docs[order]
    names = _names(docs, doc_ids)
    bounds = _query_bounds(queries, len(qids))
    return {
        qid: names[start:end] for qid, start, end in zip(qids, bounds[:-1], bounds[1:], strict=True)
    }


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


def qrels_samples(qrels: Mapping[str, Mapping[str, float]]) -> list[Sample]:
    """Validated :class:`Sample` objects of qrels, one per query. Plain qrels (string ids,
    finite numeric labels: whatever the readers return) pass the schema's fast-path check
    and become samples directly, without the raw-dict round trip of
    :func:`qrels_to_samples`; anything else goes through that and the schema, which
    words every problem."""
    plain = bool(qrels) and all(
        type(labels) is dict
        and schemas.certainly_valid_sample({"id": qid, "expected_output": labels})
        for qid, labels in qrels.items()
    )
    if plain:  # what Sample.from_raw makes of them, built directly
        return [
            Sample(id=qid, relevance=dict(zip(labels, map(float, labels.values()), strict=True)))
            for qid, labels in qrels.items()
        ]
    from engine.dataset import parse_samples

    return parse_samples((raw, None) for raw in qrels_to_samples(qrels))


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
