"""Chunked and streamed evaluation: datasets larger than memory scored in chunks of
samples, locally or on a Ray cluster (:mod:`engine.executors`), with the same numbers
as the in-memory path, bit for bit.

Why the numbers are identical:

- **Dataset-wide statistics come from a first pass.** Before scoring, one pass over the
  labels and outputs finds the longest deduplicated ranking, the most labels of any
  sample and the largest label. Every chunk's :class:`~engine.batch.Batch` is padded to
  those widths (row sums then add the same terms in the same order as in one big batch)
  and given the dataset's largest label (what ``retrieval-err-at-k`` uses when
  ``max_grade`` is not set).
- **Chunks start at multiples of** :data:`CHUNK_ALIGN` **rows**, so BLAS kernels group
  rows as they do in one big batch (``chunk_size`` is rounded up).
- **Means are merged exactly.** Each chunk's non-NA values become a few floats whose
  exact sum is the exact sum of the values (:func:`exact_parts`); ``math.fsum`` of all
  chunks' parts is then the correctly rounded total, which is what ``math.fsum`` of all
  values (``MetricBase.aggregate``) returns. Metrics that override ``aggregate`` cannot be
  streamed (a clear error); in-memory chunked evaluation calls their ``aggregate``.

What a streamed evaluation does not give: ``ci`` (the bootstrap needs every value; it is
left out of streamed summaries), metrics' run-level reports (``summarize``), and input
problems are reported per block of input rather than all at once. Streamed inputs must
list each id once, outputs in the dataset's order (a missing or extra output is fine;
out-of-order outputs within ``chunk_size`` are tolerated) and TREC/columnar files must
keep each query's lines together.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import platform
import sys
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from engine import trec
from engine.batch import Batch
from engine.dataset import load_samples, parse_samples
from engine.errors import InputError, MetricRequirementError, Problem, SlotwiseError
from engine.executors import Executor
from engine.fileio import read_jsonl
from engine.logs import log
from engine.metric import Metric, MetricBase, metric_label, missing_requirements
from engine.outputs import RESULTS_SCHEMA_ID, load_raw_outputs, parse_outputs
from engine.records import Output, Sample
from engine.results import Diagnostics, MetricRecord, Results

if TYPE_CHECKING:
    from engine.api import Engine, Evaluation

__all__ = [
    "CHUNK_ALIGN",
    "DEFAULT_CHUNK_SIZE",
    "ChunkScores",
    "ChunkTask",
    "Shape",
    "StreamedResults",
    "StreamingError",
    "Tally",
    "evaluate_chunked",
    "evaluate_stream",
    "exact_parts",
    "score_chunk",
]

#: Chunk boundaries fall on multiples of this many samples (see the module docstring).
CHUNK_ALIGN = 64
DEFAULT_CHUNK_SIZE = 16384

FloatArray = npt.NDArray[np.float64]
Pair = tuple[Sample, Output | None]


class StreamingError(SlotwiseError, ValueError):
    """The evaluation cannot be streamed as asked (a metric, an input order)."""


# -- exact means ---------------------------------------------------------------------------


def exact_parts(values: Sequence[float]) -> list[float]:
    """Floats whose exact (real-number) sum equals the exact sum of ``values``: the
    correctly rounded sum, then the correctly rounded remainder, and so on until the
    remainder is zero (usually two or three floats). Every step is one ``math.fsum``."""
    parts: list[float] = []
    total = math.fsum(values)
    while total != 0.0:
        parts.append(total)
        if not math.isfinite(total):
            break
        total = math.fsum(itertools.chain(values, [-p for p in parts]))
    return parts


@attrs.define
class Tally:
    """A metric's running count of values, NAs and exact sum, mergeable in any order."""

    n: int = 0
    na: int = 0
    parts: list[float] = attrs.field(factory=list)

    def add(self, values: FloatArray) -> None:
        present = values[~np.isnan(values)]
        self.n += int(present.size)
        self.na += int(values.size - present.size)
        self.parts += exact_parts(present.tolist())
        if len(self.parts) > 256:
            self.parts = exact_parts(self.parts)

    def merge(self, other: Tally) -> None:
        self.n, self.na = self.n + other.n, self.na + other.na
        self.parts = exact_parts(self.parts + other.parts)

    @property
    def mean(self) -> float:
        """Equal, bit for bit, to ``MetricBase.aggregate`` of all values added."""
        return math.fsum(self.parts) / self.n if self.n else math.nan


# -- dataset-wide statistics ---------------------------------------------------------------


@attrs.frozen
class Shape:
    """What a Batch of the whole dataset would know beyond its own rows: the longest
    deduplicated ranking, the most labels of any sample, the largest label."""

    width: int = 0
    label_width: int = 0
    max_label: float = 0.0
    samples: int = 0


class _ShapeBuilder:
    def __init__(self) -> None:
        self.width = self.label_width = self.samples = 0
        self.max_label: float | None = None

    def add(self, sample: Sample, output: Output | None) -> None:
        self.samples += 1
        if output is not None and len(output.retrieved) > self.width:
            self.width = max(self.width, len(set(output.retrieved)))
        if sample.relevance:
            self.label_width = max(self.label_width, len(sample.relevance))
            top = max(sample.relevance.values())
            if self.max_label is None or top > self.max_label:
                self.max_label = top

    def shape(self) -> Shape:
        top = 0.0 if self.max_label is None else float(self.max_label)
        return Shape(self.width, self.label_width, top, self.samples)

    @classmethod
    def of(cls, pairs: Iterable[Pair]) -> Shape:
        builder = cls()
        for sample, output in pairs:
            builder.add(sample, output)
        return builder.shape()


_CACHED = ("ranks", "valid", "gains", "judged", "ideal_gains", "max_label", "utilities")


def _fit(batch: Batch, shape: Shape) -> Batch:
    """Pad a chunk's Batch to the dataset's widths and give it the dataset's largest label."""

    def pad(array_: npt.NDArray[Any], width: int, fill: Any) -> npt.NDArray[Any]:
        if array_.shape[1] == width:
            return array_
        if array_.shape[1] > width:
            raise AssertionError("a chunk is wider than the first pass found")
        out = np.full((array_.shape[0], width), fill, dtype=array_.dtype)
        out[:, : array_.shape[1]] = array_
        return out

    batch.doc_codes = pad(batch.doc_codes, shape.width, -1)
    batch.positions = pad(np.asarray(batch.positions), shape.width, -1)
    batch.ranked_labels = pad(batch.ranked_labels, shape.width, np.nan)
    batch.label_values = pad(batch.label_values, shape.label_width, np.nan)
    for name in _CACHED:
        batch.__dict__.pop(name, None)
    batch.__dict__["max_label"] = shape.max_label
    return batch


# -- scoring one chunk (runs wherever the executor runs it) ----------------------------------


@attrs.frozen
class ChunkTask:
    """One chunk of samples with their outputs and everything needed to score it."""

    samples: tuple[Sample, ...]
    outputs: tuple[Output | None, ...]
    metrics: tuple[Metric, ...]
    labels: tuple[str, ...]
    distributions: tuple[str | None, ...]
    shape: Shape
    default_k: int


@attrs.frozen
class ChunkScores:
    """What scoring a chunk found: per-label values (and details), per-sample counts of
    dropped duplicate ids, samples without a relevant document, and input problems (when
    there are any, nothing was scored)."""

    values: Mapping[str, FloatArray]
    details: Mapping[str, list[Any]]
    duplicates: npt.NDArray[np.int64]
    no_relevant: tuple[str, ...]
    problems: tuple[Problem, ...] = ()


def score_chunk(task: ChunkTask) -> ChunkScores:
    """Score one chunk as the in-memory path scores the whole dataset."""
    from engine.api import _call_score

    batch = _fit(Batch.compile(task.samples, task.outputs, task.default_k), task.shape)
    problems = [
        p
        for m, label in zip(task.metrics, task.labels, strict=True)
        for p in missing_requirements(m, label, batch)
    ]
    checked = (getattr(m, "check", lambda b: ())(batch) for m in task.metrics)
    problems += dict.fromkeys(p for found in checked for p in found)
    duplicates = batch.duplicates_dropped
    if problems:
        return ChunkScores({}, {}, duplicates, (), tuple(problems))
    values, details = {}, {}
    for metric, label, distribution in zip(
        task.metrics, task.labels, task.distributions, strict=True
    ):
        values[label] = _call_score(metric, label, distribution, batch)
        explained = getattr(metric, "details", lambda b: None)(batch)
        if explained is not None:
            details[label] = list(explained)
    no_relevant = tuple(
        s.id
        for s, count in zip(task.samples, batch.num_relevant(), strict=True)
        if s.relevance is not None and count == 0
    )
    return ChunkScores(values, details, duplicates, no_relevant)


# -- the driver ------------------------------------------------------------------------------


def _aligned(chunk_size: int) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    return -(-chunk_size // CHUNK_ALIGN) * CHUNK_ALIGN


def _chunks(pairs: Iterable[Pair], size: int) -> Iterator[list[Pair]]:
    iterator = iter(pairs)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


@attrs.define
class _Plan:
    """The metrics of an evaluation, labelled, with their provenance."""

    metrics: tuple[Metric, ...]
    labels: tuple[str, ...]
    distributions: tuple[str | None, ...]
    records: tuple[MetricRecord, ...]
    default_k: int

    @classmethod
    def of(cls, engine: Engine, metrics: Sequence[Metric]) -> _Plan:
        from engine.api import metric_record

        empty = Batch.compile((), (), engine.config.default_k)
        labels, distributions, records = [], [], []
        for metric in metrics:
            label = metric_label(metric)
            distribution, version = engine.registry.provenance(metric.alias)
            labels.append(label)
            distributions.append(distribution)
            records.append(metric_record(metric, label, (distribution, version), empty))
        if any(
            type(m).summarize is not MetricBase.summarize
            for m in metrics
            if hasattr(m, "summarize")
        ):
            log.warning("streaming.reports_omitted", reason="run-level reports need every sample")
        return cls(
            tuple(metrics),
            tuple(labels),
            tuple(distributions),
            tuple(records),
            engine.config.default_k,
        )

    def tasks(self, chunks: Iterable[list[Pair]], shape: Shape) -> Iterator[ChunkTask]:
        for chunk in chunks:
            samples, outputs = zip(*chunk, strict=True)
            yield ChunkTask(
                samples,
                outputs,
                self.metrics,
                self.labels,
                self.distributions,
                shape,
                self.default_k,
            )


@attrs.define
class _Collected:
    """Problems and diagnostics gathered over all chunks."""

    requirement: list[Problem] = attrs.field(factory=list)
    repeated: list[str] = attrs.field(factory=list)
    duplicates: int = 0
    no_relevant: list[str] = attrs.field(factory=list)
    missing: list[str] = attrs.field(factory=list)

    def add(
        self, samples: Sequence[Sample], outputs: Sequence[Output | None], scored: ChunkScores
    ) -> None:
        self.requirement += scored.problems
        dropped = np.flatnonzero(scored.duplicates)
        self.repeated += [samples[i].id for i in dropped.tolist()]
        self.duplicates += int(scored.duplicates.sum())
        self.no_relevant += scored.no_relevant
        self.missing += [s.id for s, o in zip(samples, outputs, strict=True) if o is None]

    def raise_problems(self, strict: bool, unknown: Sequence[str]) -> None:
        if self.requirement:
            raise MetricRequirementError(
                self.requirement, summary="the samples lack what the metrics require"
            )
        if strict and self.repeated:
            raise InputError(
                [
                    Problem(
                        "the ranked list repeats a document id",
                        sample_id=i,
                        pointer="/actual_output/retrieved",
                    )
                    for i in self.repeated
                ],
                summary="duplicate ids in rankings",
            )
        if strict and unknown:
            raise InputError(
                [
                    Problem("output for a sample id not in the dataset", sample_id=i)
                    for i in unknown
                ],
                summary="outputs do not match the dataset",
            )

    def diagnostics(self, unknown: Sequence[str]) -> Diagnostics:
        if self.repeated:
            log.warning(
                "outputs.duplicates_dropped",
                samples=len(self.repeated),
                dropped=self.duplicates,
                examples=self.repeated[:5],
            )
        if unknown:
            log.warning("outputs.unknown_ids", count=len(unknown), examples=list(unknown[:5]))
        return Diagnostics(
            missing_outputs=tuple(self.missing),
            duplicate_ids_dropped=self.duplicates,
            no_relevant=tuple(self.no_relevant),
            unknown_output_ids=tuple(unknown),
        )


def _scored(
    plan: _Plan,
    pairs: Iterable[Pair],
    shape: Shape,
    executor: Executor,
    chunk_size: int,
    progress: bool | None,
) -> Iterator[tuple[list[Pair], ChunkScores]]:
    """(chunk, its scores) in dataset order; the executor scores chunks as they are read."""
    held: list[list[Pair]] = []

    def chunks() -> Iterator[list[Pair]]:
        for chunk in _chunks(pairs, chunk_size):
            held.append(chunk)  # until its scores come back: bounded by the executor
            yield chunk

    with _Progress(progress, shape.samples) as advance:
        for scores in executor.map(score_chunk, plan.tasks(chunks(), shape)):
            chunk = held.pop(0)
            yield chunk, scores
            advance(len(chunk))


class _Progress:
    """A rich progress bar with throughput on a terminal (or when forced); else a no-op."""

    def __init__(self, enabled: bool | None, total: int) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total = total

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda count: None
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._bar.start()
        task = self._bar.add_task("scoring", total=self.total, rate="")

        def advance(count: int) -> None:
            self._bar.advance(task, count)
            speed = self._bar.tasks[0].speed
            self._bar.update(task, rate=f"{speed:,.0f} samples/s" if speed else "")

        return advance

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()


def _provenance(default_k: int, executor: Executor, chunk_size: int) -> dict[str, Any]:
    from engine.api import _version

    return {
        "slotwise": _version(),
        "python": platform.python_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "config_default_k": default_k,
        "chunk_size": chunk_size,
        "executor": executor.name,
    }


# -- in-memory datasets, scored in chunks ----------------------------------------------------


def evaluate_chunked(
    evaluation: Evaluation,
    outputs: Mapping[str, Output],
    *,
    strict: bool,
    chunk_size: int | None,
) -> Results:
    """:meth:`Evaluation.evaluate` in chunks of samples on the engine's executor: the same
    :class:`Results` as in one batch (per-sample values and aggregates identical), without
    run-level reports."""
    engine = evaluation.engine
    size = _aligned(DEFAULT_CHUNK_SIZE if chunk_size is None else chunk_size)
    samples = evaluation.dataset.samples
    known = set(evaluation.dataset.ids)
    unknown = sorted(set(outputs) - known)
    pairs = [(s, outputs.get(s.id)) for s in samples]
    shape = _ShapeBuilder.of(pairs)
    plan = _Plan.of(engine, evaluation.metrics)
    collected = _Collected()
    columns: dict[str, list[FloatArray]] = {label: [] for label in plan.labels}
    details: dict[str, list[Any]] = {}
    for chunk, scored in _scored(plan, pairs, shape, engine.executor, size, False):
        chunk_samples, chunk_outputs = zip(*chunk, strict=True)
        collected.add(chunk_samples, chunk_outputs, scored)
        for label, values in scored.values.items():
            columns[label].append(values)
        for label in scored.details:
            details.setdefault(label, [])
        for label in details:
            details[label] += scored.details.get(label) or [None] * len(chunk)
    collected.raise_problems(strict, unknown)
    scores = {
        label: np.concatenate(parts) if parts else np.zeros(0) for label, parts in columns.items()
    }
    return Results(
        dataset_name=evaluation.dataset.name,
        dataset_hash=evaluation.dataset.hash,
        sample_ids=evaluation.dataset.ids,
        metrics=list(plan.records),
        scores=scores,
        aggregates={
            label: float(metric.aggregate(scores[label]))
            for metric, label in zip(plan.metrics, plan.labels, strict=True)
        },
        details=details,
        diagnostics=collected.diagnostics(unknown),
        provenance=_provenance(plan.default_k, engine.executor, size),
        metadata=tuple(s.metadata for s in samples),
    )


# -- streamed sources ------------------------------------------------------------------------

_BLOCK = 1024  # rows validated together


def _blocks(items: Iterable[Any], size: int = _BLOCK) -> Iterator[list[Any]]:
    iterator = iter(items)
    while block := list(itertools.islice(iterator, size)):
        yield block


def _dataset_samples(path: Path) -> Iterator[Sample]:
    """Samples of a dataset file: JSONL and columnar files are read as a stream."""
    source, suffix = str(path), path.suffix.lower()
    if suffix == ".jsonl":
        for block in _blocks(read_jsonl(path)):
            yield from parse_samples(((raw, line) for line, raw in block), source)
    elif suffix in (".parquet", ".arrow", ".feather"):
        for block in _blocks(_label_groups(path)):
            yield from parse_samples(
                ((trec.qrels_to_samples({q: labels})[0], None) for q, labels in block), source
            )
    else:
        yield from load_samples(path)[1]


def _outputs(path: Path) -> Iterator[tuple[str, Output]]:
    """(id, output) of an outputs file: JSONL and columnar runs are read as a stream."""
    source, suffix = str(path), path.suffix.lower()
    if suffix == ".jsonl":
        for block in _blocks(read_jsonl(path)):
            triples, problems = [], []
            for line, record in block:
                sample_id = record.get("id") if isinstance(record, dict) else None
                if not isinstance(sample_id, str) or "actual_output" not in record:
                    message = 'an outputs line is an object {"id": ..., "actual_output": ...}'
                    problems.append(Problem(message, source=source, line=line))
                else:
                    triples.append((sample_id, record["actual_output"], line))
            if problems:
                raise InputError(problems, summary=f"invalid outputs {path}")
            for sample_id, raw in parse_outputs(triples, source).items():
                yield sample_id, Output.from_raw(raw)
    elif suffix in (".parquet", ".arrow", ".feather"):
        for block in _blocks(_run_groups(path)):
            for sample_id, raw in parse_outputs(((q, d, None) for q, d in block), source).items():
                yield sample_id, Output.from_raw(raw)
    else:
        for sample_id, raw in load_raw_outputs(path).items():
            yield sample_id, Output.from_raw(raw)


def _grouped_lines(
    path: Path, width: int, what: str, problems: list[Problem]
) -> Iterator[tuple[str, list[tuple[int, list[str]]]]]:
    """(qid, [(line, fields)...]) for each run of consecutive lines of one query."""
    lines = (item for item in trec._lines(path))
    current: str | None = None
    group: list[tuple[int, list[str]]] = []
    for number, fields in lines:
        if len(fields) != width:
            problems.append(
                trec._bad(path, number, f"expected {width} fields '{what}', got {len(fields)}")
            )
            continue
        if fields[0] != current:
            if current is not None:
                yield current, group
            current, group = fields[0], []
        group.append((number, fields))
    if current is not None:
        yield current, group


def _qrels_samples(path: Path) -> Iterator[Sample]:
    problems: list[Problem] = []

    def groups() -> Iterator[tuple[str, dict[str, float]]]:
        for qid, lines in _grouped_lines(path, 4, "qid iter docid rel", problems):
            labels: dict[str, float] = {}
            for number, (_, _, doc, text) in lines:
                label = trec._number(text)
                if label is None:
                    problems.append(
                        trec._bad(path, number, f"relevance {text!r} is not a finite number")
                    )
                elif doc in labels:
                    problems.append(
                        trec._bad(path, number, f"document {doc!r} judged twice for query {qid!r}")
                    )
                else:
                    labels[doc] = label
            yield qid, labels

    for block in _blocks(groups()):
        raws = [trec.qrels_to_samples({qid: labels})[0] for qid, labels in block]
        yield from parse_samples(((raw, None) for raw in raws), str(path))
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise InputError(problems, summary=f"malformed qrels {path}")


def _run_outputs(path: Path) -> Iterator[tuple[str, Output]]:
    problems: list[Problem] = []
    for qid, lines in _grouped_lines(path, 6, "qid Q0 docid rank score tag", problems):
        pairs = []
        for number, (_, _, doc, _, text, _) in lines:
            score = trec._number(text)
            if score is None:
                problems.append(trec._bad(path, number, f"score {text!r} is not a finite number"))
            else:
                pairs.append((doc, score))
        yield qid, Output(retrieved=tuple(trec.rank_by_score(pairs)))
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise InputError(problems, summary=f"malformed run {path}")


def _columnar_rows(path: Path, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    from engine.columnar import _pandas

    _pandas()
    import pyarrow.ipc
    import pyarrow.parquet

    try:
        if path.suffix.lower() == ".parquet":
            file = pyarrow.parquet.ParquetFile(path)
            present = file.schema_arrow.names
            batches: Iterable[Any] = file.iter_batches(
                batch_size=65536, columns=[c for c in columns if c in present]
            )
        else:
            reader = pyarrow.ipc.open_file(path)
            present = reader.schema.names
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
    except (OSError, ValueError) as error:
        raise InputError(
            [Problem(f"cannot read columnar file: {error}", source=str(path))]
        ) from None
    missing = [c for c in columns if c not in present]
    if missing:
        raise InputError(
            [
                Problem(
                    f"need columns {', '.join(columns)}; missing {', '.join(missing)}",
                    source=str(path),
                )
            ]
        )
    for batch in batches:
        yield from zip(*(batch.column(c).to_pylist() for c in columns), strict=True)


def _contiguous(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    for qid, group in itertools.groupby(rows, key=lambda row: str(row[0])):
        yield qid, list(group)


def _label_groups(path: Path) -> Iterator[tuple[str, dict[str, float]]]:
    for qid, rows in _contiguous(_columnar_rows(path, ("query_id", "doc_id", "relevance"))):
        labels: dict[str, Any] = {}
        for _, doc, label in rows:
            if str(doc) in labels:
                raise InputError(
                    [Problem(f"document {doc!r} judged twice", sample_id=qid, source=str(path))],
                    summary=f"invalid labels {path}",
                )
            labels[str(doc)] = label
        yield qid, labels


def _run_groups(path: Path) -> Iterator[tuple[str, list[str]]]:
    from engine.columnar import _pandas

    _pandas()
    import pyarrow.parquet

    names = (
        pyarrow.parquet.ParquetFile(path).schema_arrow.names
        if path.suffix.lower() == ".parquet"
        else __import__("pyarrow.ipc").ipc.open_file(path).schema.names
    )
    order = "rank" if "rank" in names else "score"
    for qid, rows in _contiguous(_columnar_rows(path, ("query_id", "doc_id", order))):
        pairs = [(str(doc), key) for _, doc, key in rows]
        if order == "rank":
            yield qid, [d for d, _ in sorted(pairs, key=lambda p: p[1])]
        else:
            yield qid, trec.rank_by_score(pairs)


class _Merge:
    """Pairs samples with outputs read in (about) the dataset's order, holding at most
    ``window`` outputs read ahead; a sample whose output is not found within the window
    has none. An output met after its sample was passed is an error (never a wrong
    number); outputs for ids not in the dataset are collected in ``unknown``."""

    def __init__(self, outputs: Iterable[tuple[str, Output]], window: int) -> None:
        self.outputs = iter(outputs)
        self.window = window
        self.unknown: list[str] = []
        self._passed: set[str] = set()

    def _check(self, sample_id: str) -> None:
        if sample_id in self._passed:
            raise StreamingError(
                f"the output for sample {sample_id!r} comes more than {self.window} outputs "
                "after its place in the dataset's order: sort the outputs like the dataset "
                "(or raise chunk_size) to stream them"
            )

    def pairs(self, samples: Iterable[Sample]) -> Iterator[Pair]:
        ahead: dict[str, Output] = {}
        exhausted = False
        for sample in samples:
            output = ahead.pop(sample.id, None)
            while output is None and not exhausted and len(ahead) < self.window:
                item = next(self.outputs, None)
                if item is None:
                    exhausted = True
                elif item[0] == sample.id:
                    output = item[1]
                else:
                    self._check(item[0])
                    ahead[item[0]] = item[1]
            if output is None:
                self._passed.add(sample.id)
            yield sample, output
        for sample_id in itertools.chain(ahead, (i for i, _ in self.outputs)):
            self._check(sample_id)
            self.unknown.append(sample_id)


class _Hashes:
    """Python hashes of ids (8 bytes each), to find repeated ids after a pass."""

    def __init__(self) -> None:
        self.values = array("q")

    def record(self, items: Iterable[tuple[str, Output]]) -> Iterator[tuple[str, Output]]:
        for item in items:
            self.values.append(hash(item[0]))
            yield item

    def suspects(self) -> set[int]:
        ordered = np.sort(np.frombuffer(self.values, dtype=np.int64))
        return set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())


def _repeated(ids: Iterable[str], suspects: set[int]) -> list[str]:
    seen: set[str] = set()
    repeated = []
    for sample_id in ids:
        if hash(sample_id) in suspects:
            if sample_id in seen:
                repeated.append(sample_id)
            seen.add(sample_id)
    return repeated


class _ContentHash:
    """:func:`engine.dataset.content_hash`, fed one sample at a time: the same bytes (JSON
    arrays of 4096 rows), each row encoded as it comes."""

    def __init__(self) -> None:
        import hashlib

        self._encoder = json.JSONEncoder(sort_keys=True, default=str, separators=(",", ":"))
        self._digest = hashlib.sha256()
        self._rows = 0

    def add(self, s: Sample) -> None:
        row = [s.id, s.input, s.relevance, s.utility, s.answers, s.groups, s.metadata]
        self._digest.update(("," if self._rows % 4096 else "[").encode())
        self._digest.update(self._encoder.encode(row).encode())
        self._rows += 1
        if self._rows % 4096 == 0:
            self._digest.update(b"]")

    def hexdigest(self) -> str:
        if self._rows % 4096:
            self._digest.update(b"]")
        return "sha256:" + self._digest.hexdigest()


# -- streamed results ------------------------------------------------------------------------


@attrs.frozen
class StreamedResults:
    """The outcome of :func:`evaluate_stream`: per-metric mean, n and na (no ``ci``: the
    bootstrap needs every value), diagnostics and provenance. Per-sample scores were
    written to ``scores_path`` (when one was given), not kept."""

    dataset_name: str | None
    dataset_hash: str
    samples: int
    metrics: Sequence[MetricRecord]
    tallies: Mapping[str, Tally]
    diagnostics: Diagnostics
    provenance: Mapping[str, Any]
    scores_path: Path | None = None

    @property
    def labels(self) -> list[str]:
        return [m.label for m in self.metrics]

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per metric label: ``mean`` (None if all NA), ``n`` and ``na``."""
        return {
            label: {
                "mean": None if tally.n == 0 else tally.mean,
                "n": tally.n,
                "na": tally.na,
            }
            for label, tally in self.tallies.items()
        }

    def header(self) -> dict[str, Any]:
        return {"schema": RESULTS_SCHEMA_ID, "metrics": [attrs.asdict(m) for m in self.metrics]}

    def trailer(self) -> dict[str, Any]:
        return {
            "dataset": {
                "name": self.dataset_name,
                "hash": self.dataset_hash,
                "samples": self.samples,
            },
            "summary": self.summary(),
            "diagnostics": self.diagnostics.to_dict(),
            "provenance": dict(self.provenance),
        }

    def to_dict(self) -> dict[str, Any]:
        """The ``slotwise.results/v1`` document without per-sample rows (``samples: []``)."""
        return {**self.header(), "samples": [], **self.trailer()}

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        from engine.fileio import atomic_write

        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        if path is not None:
            atomic_write(path, text)
        return text

    def report_lines(self) -> list[str]:
        return []

    def table(self) -> Any:
        """A rich Table of the summary, for the console."""
        from rich.table import Table

        title = f"{self.dataset_name or 'dataset'} ({self.samples} samples, streamed)"
        table = Table(title=title, title_justify="left")
        for column in ("metric", "mean", "n", "na"):
            table.add_column(column, justify="left" if column == "metric" else "right")
        for label, stats in self.summary().items():
            mean = "NA" if stats["mean"] is None else f"{stats['mean']:.4f}"
            table.add_row(label, mean, str(stats["n"]), str(stats["na"]))
        return table


class _Sink:
    """Per-sample rows written as they are scored: ``jsonl`` (``{"id", "scores", ...}``
    lines), ``csv`` (id + one column per label) or ``json`` (the whole results document,
    its ``samples`` written row by row). A path is written to a temporary file that
    replaces it only when the evaluation succeeds."""

    def __init__(self, target: str | os.PathLike[str] | IO[str] | None, fmt: str | None) -> None:
        self.path = None if target is None or hasattr(target, "write") else Path(target)  # type: ignore[arg-type]
        self.format = fmt or (self.path.suffix.lower().lstrip(".") if self.path else "jsonl")
        if self.format not in ("jsonl", "csv", "json"):
            raise ValueError(
                f"per-sample scores are written as jsonl, csv or json, not {self.format!r}"
            )
        self._temp: str | None = None
        self.handle: IO[str] | None
        if self.path is not None:
            fd, self._temp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
            self.handle = open(fd, "w", encoding="utf-8", newline="")  # noqa: SIM115
        else:
            self.handle = target  # type: ignore[assignment]
        self._first = True

    def start(self, results: StreamedResults) -> None:
        if self.handle is None:
            return
        if self.format == "csv":
            csv.writer(self.handle, lineterminator="\n").writerow(["id", *results.labels])
        elif self.format == "json":
            header = json.dumps(results.header(), indent=2, ensure_ascii=False)
            self.handle.write(header[:-2] + ',\n  "samples": [')

    def rows(self, results: Results) -> None:
        if self.handle is None:
            return
        if self.format == "csv":
            self.handle.write(results.to_csv().split("\n", 1)[1])
            return
        text = io.StringIO()
        for row in results.per_sample():
            encoded = json.dumps(row, ensure_ascii=False, allow_nan=False)
            if self.format == "jsonl":
                text.write(encoded + "\n")
            else:
                text.write(("\n    " if self._first else ",\n    ") + encoded)
                self._first = False
        self.handle.write(text.getvalue())

    def finish(self, results: StreamedResults) -> None:
        if self.handle is None:
            return
        if self.format == "json":
            trailer = json.dumps(results.trailer(), indent=2, ensure_ascii=False, allow_nan=False)
            self.handle.write("\n  ],\n" + trailer[2:] + "\n")
        if self.path is not None:
            self.handle.close()
            os.replace(self._temp, self.path)  # type: ignore[arg-type]
            self._temp = None
        else:
            self.handle.flush()

    def abort(self) -> None:
        if self.path is not None and self._temp is not None:
            assert self.handle is not None
            self.handle.close()
            os.unlink(self._temp)


def evaluate_stream(
    metrics: Sequence[str | Metric],
    *,
    dataset: str | os.PathLike[str] | None = None,
    outputs: str | os.PathLike[str] | None = None,
    qrels: str | os.PathLike[str] | None = None,
    run: str | os.PathLike[str] | None = None,
    engine: Engine | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    strict: bool = False,
    scores: str | os.PathLike[str] | IO[str] | None = None,
    scores_format: str | None = None,
    progress: bool | None = None,
    name: str | None = None,
) -> StreamedResults:
    """Score outputs against a dataset too large for memory, chunk by chunk on the
    engine's executor; aggregates equal the in-memory path's bit for bit.

    The dataset is ``dataset`` (JSONL and Parquet/Arrow are streamed; YAML/JSON are
    loaded) or a TREC ``qrels`` file; the outputs ``outputs`` (JSONL and Parquet/Arrow
    streamed, JSON loaded) or a TREC ``run`` file. Each input is read twice: a first pass
    for dataset-wide statistics and repeated ids, then the scoring pass. Per-sample scores
    go to ``scores`` (a path or an open text file; ``jsonl``, ``csv`` or ``json`` by
    suffix or ``scores_format``) as they are scored, else nowhere.
    """
    from engine.api import Engine

    engine = engine or Engine()
    if (dataset is None) == (qrels is None) or (outputs is None) == (run is None):
        raise TypeError("pass one of dataset= or qrels=, and one of outputs= or run=")
    size = _aligned(chunk_size)
    evaluation = engine.evaluation(None, metrics)  # type: ignore[arg-type]
    plan = _Plan.of(engine, evaluation.metrics)
    custom = [
        label
        for metric, label in zip(plan.metrics, plan.labels, strict=True)
        if getattr(type(metric), "aggregate", None) is not MetricBase.aggregate
    ]
    if custom:
        raise StreamingError(
            f"metric {custom[0]!r} has its own aggregate(), which cannot be merged over "
            "chunks: evaluate it in memory (without --stream)"
        )
    data_path = Path(dataset if dataset is not None else qrels)  # type: ignore[arg-type]

    def sample_stream() -> Iterator[Sample]:
        return _dataset_samples(data_path) if dataset is not None else _qrels_samples(data_path)

    def output_stream() -> Iterator[tuple[str, Output]]:
        return _outputs(Path(outputs)) if outputs is not None else _run_outputs(Path(run))  # type: ignore[arg-type]

    shape, digest = _first_pass(sample_stream, output_stream, size)
    merge = _Merge(output_stream(), size)
    collected = _Collected()
    tallies = {label: Tally() for label in plan.labels}
    sink = _Sink(scores, scores_format)
    results = StreamedResults(
        dataset_name=name or data_path.stem,
        dataset_hash=digest,
        samples=shape.samples,
        metrics=plan.records,
        tallies=tallies,
        diagnostics=Diagnostics(),
        provenance=_provenance(plan.default_k, engine.executor, size),
        scores_path=sink.path,
    )
    try:
        sink.start(results)
        pairs = merge.pairs(sample_stream())
        for chunk, scored in _scored(plan, pairs, shape, engine.executor, size, progress):
            chunk_samples, chunk_outputs = zip(*chunk, strict=True)
            collected.add(chunk_samples, chunk_outputs, scored)
            if scored.problems:
                continue
            for label, values in scored.values.items():
                tallies[label].add(values)
            sink.rows(_chunk_results(plan, chunk_samples, scored))
        collected.raise_problems(strict, merge.unknown)
        results = attrs.evolve(results, diagnostics=collected.diagnostics(merge.unknown))
        sink.finish(results)
    except BaseException:
        sink.abort()
        raise
    log.info(
        "evaluation.finished", dataset=results.dataset_name, samples=shape.samples, streamed=True
    )
    return results


def _chunk_results(plan: _Plan, samples: Sequence[Sample], scored: ChunkScores) -> Results:
    """A chunk's scores as :class:`Results`, to write its rows as the in-memory path does."""
    details = {
        label: scored.details.get(label) or [None] * len(samples) for label in scored.details
    }
    return Results(
        dataset_name=None,
        dataset_hash="",
        sample_ids=[s.id for s in samples],
        metrics=list(plan.records),
        scores=scored.values,
        aggregates={},
        diagnostics=Diagnostics(),
        provenance={},
        details=details,
        metadata=tuple(s.metadata for s in samples),
    )


def _first_pass(
    samples: Callable[[], Iterator[Sample]],
    outputs: Callable[[], Iterator[tuple[str, Output]]],
    window: int,
) -> tuple[Shape, str]:
    """Dataset-wide statistics and content hash; refuses repeated sample or output ids."""
    sample_ids, output_ids = _Hashes(), _Hashes()
    builder, digest = _ShapeBuilder(), _ContentHash()
    stream = output_ids.record(outputs())
    for sample, output in _Merge(stream, window).pairs(samples()):
        sample_ids.values.append(hash(sample.id))
        builder.add(sample, output)
        digest.add(sample)
    if builder.samples == 0:
        raise InputError([Problem("the dataset has no samples")], summary="invalid dataset")
    for what, hashes, ids in (
        ("sample", sample_ids, lambda: (s.id for s in samples())),
        ("output", output_ids, lambda: (i for i, _ in outputs())),
    ):
        suspects = hashes.suspects()
        repeated = _repeated(ids(), suspects) if suspects else []
        if repeated:
            raise InputError(
                [Problem(f"{what} id appears more than once", sample_id=i) for i in repeated],
                summary=f"repeated {what} ids (a stream needs each id once; TREC and columnar "
                "files must keep each query's lines together)",
            )
    return builder.shape(), digest.hexdigest()
