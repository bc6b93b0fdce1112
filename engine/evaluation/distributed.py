"""Evaluations on a Ray cluster whose workers read their own shards; the driver plans and
merges.

Four rounds of tasks, each a worker's, with only small objects for the driver:

1. **read**: a task per shard (or byte range of a large TREC file) reads and checks its
   lines and cuts its rows into buckets by query (:func:`engine.io.sharded.bucketed`);
2. **join**: a task per bucket makes the bucket's samples and outputs of every shard's
   rows (a document labelled or ranked twice is found whichever shards hold the two
   lines), puts each output beside its sample, and reports the padding shape, the
   outputs for unknown samples, and how many samples first appear in each stretch of the
   input (the bucket's columns stay in the object store, on the node that made them);
3. **score**: a task per bucket, on that node, scores its samples padded to the dataset's
   shape and cuts the scores at the dataset positions where the driver's chunks start;
4. **sum**: a task per chunk orders its samples as the input does (each by its first
   line) and sums them (:func:`~engine.evaluation.pipeline.summed`): exact tallies, the
   bootstrap's block sums, the lines of the content hash, and the rows when wanted.

The driver merges the chunks in order: the numbers are those of one process reading the
same lines, bit for bit, whatever the sharding, the buckets and the nodes. A sample's
values depend on its row and the dataset's shape alone (every metric is computed row by
row), and every summary is summed in dataset order or exactly.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from engine.errors import InputError, Problem, SlotwiseError
from engine.evaluation.batch import Shape
from engine.evaluation.executors import RayExecutor, on_its_cpus
from engine.evaluation.pipeline import (
    ChunkScores,
    ChunkTask,
    Gathering,
    MissingOutputs,
    Plan,
    Source,
    Summed,
    _Collected,
    _Progress,
    _results,
    aligned,
    score_chunk,
    summed,
)
from engine.evaluation.results import Results, document_header
from engine.io import sharded
from engine.io.columns import Columns, ContentHash, canonical_lines, string_bytes
from engine.io.sharded import Long
from engine.io.sinks import Sink
from engine.logs import log

__all__ = ["evaluate_sharded"]

IntArray = npt.NDArray[np.int64]

#: Bytes of input per bucket (at least two buckets per CPU of the cluster).
BUCKET_BYTES = 1 << 28
#: Samples a chunk's piece of a bucket holds at the least: about 250 KiB of scores (Ray
#: keeps an object under 100 KiB in its owner's memory: the driver's).
PIECE_SAMPLES = 2048
#: About how many stretches of the input the driver counts first appearances in.
STRETCHES = 1 << 12


@attrs.frozen
class Read:
    """What a read task found: its rows, the bytes of its pieces, and its problems."""

    rows: int
    nbytes: int
    problems: tuple[Problem, ...] = ()


@attrs.frozen
class Bucket:
    """What a join task found: samples, padding shape, outputs for unknown samples, how
    many samples first appear in each stretch of the input (``stretches``: the
    stretches' numbers, ``counts``: their samples), and the node that holds its columns
    (where they are scored)."""

    samples: int
    shape: Shape
    unknown: tuple[str, ...]
    stretches: IntArray
    counts: IntArray
    nbytes: int
    node: str = ""
    problems: tuple[tuple[Problem, ...], tuple[Problem, ...]] = ((), ())  # samples', outputs'


@attrs.frozen
class Joined:
    """A bucket's samples with their outputs beside them, each sample's first row, and
    each sample's line of the content hash."""

    columns: Columns
    first: IntArray
    lines: pa.Array


@attrs.frozen
class Piece:
    """A bucket's samples of one chunk, scored: each sample's first row, id, metadata,
    scores and line of the content hash."""

    first: IntArray
    ids: pa.Array
    metadata: pa.Array
    scores: ChunkScores
    lines: pa.Array

    @property
    def nbytes(self) -> int:
        scores = self.scores
        arrays = [*scores.values.values(), scores.duplicates, scores.has_output]
        arrays += [scores.no_relevant, *(a for pair in scores.judged.values() for a in pair)]
        found = self.first.nbytes + self.ids.nbytes + self.metadata.nbytes + self.lines.nbytes
        return int(found + sum(array.nbytes for array in arrays))


@attrs.frozen
class Hashed:
    """A chunk's lines of the content hash, and the bytes of the pieces it was made of."""

    lines: bytes
    received: int


# -- the tasks --------------------------------------------------------------------------------


def read_shard(long: Long, index: int, buckets: int) -> tuple[Any, ...]:
    """Read shard ``index`` of ``long``: what was found, then its rows of each bucket."""
    try:
        pieces = sharded.bucketed(sharded.rows(long, index), buckets)
    except InputError as error:
        return (Read(0, 0, error.problems), *[None] * buckets)
    found = Read(sum(len(p) for p in pieces), sum(p.nbytes for p in pieces))
    return (found, *pieces)


def join_bucket(
    samples: Long, outputs: Long, shift: int, *pieces: sharded.Rows
) -> tuple[Bucket, Joined | None]:
    """Join one bucket: ``pieces`` are its rows from every shard of ``samples`` (first,
    in order), then of ``outputs``."""
    own, theirs = pieces[: len(samples.shards)], pieces[len(samples.shards) :]
    made: list[Columns] = []
    problems: list[tuple[Problem, ...]] = []
    for long, rows in ((samples, own), (outputs, theirs)):
        try:
            made.append(sharded.columns(long, rows))
            problems.append(())
        except InputError as error:
            problems.append(error.problems)
    if any(problems):
        none = np.zeros(0, dtype=np.int64)
        return Bucket(0, Shape(), (), none, none, 0, problems=(problems[0], problems[1])), None
    columns, outputs_columns = made
    first = sharded.first_rows(own)
    lines = list(canonical_lines(columns))
    joined, unknown = aligned(columns, outputs_columns)
    stretches, counts = np.unique(first >> shift, return_counts=True)
    found = Joined(
        joined,
        first,
        pa.concat_arrays(lines) if lines else pa.array([], pa.string()),
    )
    nbytes = joined.table.nbytes + _nbytes(joined.docs) + found.lines.nbytes
    bucket = Bucket(
        len(joined), Shape.of(joined), tuple(unknown), stretches, counts, nbytes, _node()
    )
    return bucket, found


def _node() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _nbytes(docs: pa.Array | pa.ChunkedArray) -> int:
    return int(docs.nbytes)


def score_bucket(
    joined: Joined, plan: Plan, shape: Shape, bounds: IntArray, chunk: int
) -> Piece | tuple[Piece, ...]:
    """Score a bucket's samples padded to ``shape``, ``chunk`` at a time; its pieces of
    each chunk of the dataset (``bounds``: the first row numbers where chunks start)."""
    columns = joined.columns
    parts = [
        score_chunk(ChunkTask(columns.slice(start, chunk), plan, shape))
        for start in range(0, len(columns), chunk)
    ]
    scores = ChunkScores.concat(parts, plan.labels) if parts else None
    cuts = np.searchsorted(joined.first, bounds).tolist()
    metadata = columns.column("metadata")
    found = []
    for start, end in itertools.pairwise(cuts):
        rows = np.arange(start, end, dtype=np.int64)
        found.append(
            Piece(
                joined.first[start:end],
                _own(columns.ids.slice(start, end - start)),
                _own(metadata.slice(start, end - start)),
                scores.take(rows) if scores is not None else _no_scores(),
                _own(joined.lines.slice(start, end - start)),
            )
        )
    return found[0] if len(found) == 1 else tuple(found)  # (one return: the object itself)


def _own(array: pa.Array) -> pa.Array:
    """A slice with buffers of its own (shipping it ships only its rows)."""
    return pa.concat_arrays([array])


def _no_scores() -> ChunkScores:
    none = np.zeros(0, dtype=np.bool_)
    return ChunkScores({}, {}, {}, np.zeros(0, dtype=np.int64), none, none)


def sum_chunk(gathering: Gathering, position: int, *pieces: Piece) -> tuple[Hashed, Summed]:
    """One chunk of the dataset from each bucket's piece of it: its lines of the content
    hash, and its samples in dataset order (by first row) summed from dataset position
    ``position``."""
    first = np.concatenate([piece.first for piece in pieces])
    order = np.argsort(first, kind="stable")
    ids = pa.concat_arrays([piece.ids for piece in pieces]).take(pa.array(order))
    metadata = pa.concat_arrays([piece.metadata for piece in pieces]).take(pa.array(order))
    scores = ChunkScores.concat([piece.scores for piece in pieces], gathering.labels).take(order)
    lines = pa.concat_arrays([piece.lines for piece in pieces]).take(pa.array(order))
    hashed = Hashed(bytes(string_bytes(lines)), sum(piece.nbytes for piece in pieces))
    return hashed, summed(ids, metadata, scores, gathering, position)


# -- the driver -------------------------------------------------------------------------------


@functools.cache
def _remote(work: Callable[..., Any]) -> Any:
    import ray

    return ray.remote(on_its_cpus(work))


def _got(ray: Any, refs: Any) -> Any:
    """``ray.get``, a slotwise error raised in a task raised as itself."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as error:
        if isinstance(error.cause, SlotwiseError):
            raise error.cause from None
        raise


def _on(ray: Any, node: str) -> Any:
    """Run on ``node`` (where the task's input is) while it is alive."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node, soft=True)


def _returns(ref: Any, count: int) -> list[Any]:
    return [ref] if count == 1 else list(ref)


def evaluate_sharded(
    plan: Plan,
    samples: Long,
    outputs: Long,
    *,
    executor: RayExecutor,
    name: str | None,
    missing: MissingOutputs,
    strict: bool,
    keep: bool,
    chunk_size: int,
    sink: Sink | None = None,
    progress: bool | None = False,
    provenance: Mapping[str, Any] | None = None,
) -> Results:
    """Score the outputs of ``outputs`` against the samples of ``samples`` on the Ray
    cluster, workers reading the shards (see the module docstring). Per-sample rows go to
    ``sink`` as they are merged and stay in memory when ``keep``."""
    ray = executor.init()
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = sum(shard.nbytes for shard in (*samples.shards, *outputs.shards))
    buckets = max(2 * cpus, -(-size // BUCKET_BYTES))
    read, join, score, sum_ = (
        _remote(work) for work in (read_shard, join_bucket, score_bucket, sum_chunk)
    )
    inputs = [ray.put(samples), ray.put(outputs)]
    reads = [
        _returns(
            read.options(num_returns=buckets + 1).remote(inputs[side], i, buckets), buckets + 1
        )
        for side, long in enumerate((samples, outputs))
        for i in range(len(long.shards))
    ]
    found: list[Read] = _got(ray, [refs[0] for refs in reads])
    _refuse([p for r in found[: len(samples.shards)] for p in r.problems], samples)
    _refuse([p for r in found[len(samples.shards) :] for p in r.problems], outputs)
    rows = sum(r.rows for r in found[: len(samples.shards)])
    shift = max(0, math.ceil(math.log2(max(rows, 1) / STRETCHES)))
    joins = [
        join.options(num_returns=2).remote(*inputs, shift, *[refs[1 + b] for refs in reads])
        for b in range(buckets)
    ]
    del reads  # each bucket's rows are freed once joined
    made: list[Bucket] = _got(ray, [refs[0] for refs in joins])
    for side, long in enumerate((samples, outputs)):
        _refuse([p for bucket in made for p in bucket.problems[side]], long)
    count = sum(bucket.samples for bucket in made)
    if not count:
        raise InputError([Problem("the dataset has no samples")], summary="invalid dataset")
    shape = functools.reduce(Shape.merge, (bucket.shape for bucket in made), Shape())
    bounds, positions = _chunks(made, shift, chunk_size, buckets)
    chunks = len(positions) - 1
    scored = [
        _returns(
            score.options(num_returns=chunks, scheduling_strategy=_on(ray, bucket.node)).remote(
                refs[1], plan, shape, bounds, chunk_size
            ),
            chunks,
        )
        for bucket, refs in zip(made, joins, strict=True)
    ]
    del joins
    gathering = Gathering(
        plan.labels, pa.array([], pa.string()), missing, strict, keep, keep or sink is not None
    )
    sums = [
        sum_.options(num_returns=2).remote(gathering, positions[c], *[refs[c] for refs in scored])
        for c in range(chunks)
    ]
    del scored
    digest, scored_bytes, driver_bytes = ContentHash(), 0, 0
    for refs in sums:
        hashed: Hashed = _got(ray, refs[0])
        digest.update_lines(hashed.lines)
        scored_bytes += hashed.received
        driver_bytes += len(hashed.lines)
    unknown = sorted(i for bucket in made for i in bucket.unknown)
    source = Source(name, digest.hexdigest(), count, unknown)
    results, merged_bytes = _merged(
        plan,
        source,
        gathering,
        [refs[1] for refs in sums],
        ray,
        sink,
        progress,
        {
            **(provenance or {}),
            "chunk_size": chunk_size,
            "executor": executor.name,
            "missing_outputs": missing,
        },
    )
    log.info(  # what went through the object stores, in bytes: the shuffle, then per chunk
        "evaluation.sharded",
        shards=len(samples.shards) + len(outputs.shards),
        buckets=buckets,
        chunks=chunks,
        read_to_join=sum(r.nbytes for r in found),
        joined=sum(bucket.nbytes for bucket in made),
        scored_to_summed=scored_bytes,
        summed_to_driver=driver_bytes + merged_bytes,
    )
    return results


def _merged(
    plan: Plan,
    source: Source,
    gathering: Gathering,
    sums: list[Any],
    ray: Any,
    sink: Sink | None,
    progress: bool | None,
    provenance: Mapping[str, Any],
) -> tuple[Results, int]:
    """Merge the chunks' sums in dataset order into results (rows to ``sink``), and the
    bytes of the sums."""
    collected = _Collected(plan, gathering)
    received = 0
    try:
        if sink is not None:
            sink.start(document_header(source.name, source.digest, source.samples, plan.records))  # type: ignore[arg-type]
        with _Progress(progress, source.samples) as advance:
            for ref in sums:
                part = _got(ray, ref)
                received += _size(part)
                rows = collected.merge(part)
                if rows is not None and sink is not None:
                    sink.write(rows)
                advance(part.count)
        unknown = list(source.unknown)  # type: ignore[arg-type]
        collected.raise_problems(gathering.strict, unknown)
        results = _results(
            plan, source, collected, source.digest, unknown, gathering.keep, provenance
        )
        if sink is not None:
            sink.finish(results.trailer(), plan.labels)
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    return results, received


def _size(part: Summed) -> int:
    """About the bytes of a chunk's sums: their arrays."""
    arrays = []
    if part.resampled is not None:
        arrays += [part.resampled.head, part.resampled.sums, part.resampled.tail]
    if part.rows is not None:
        arrays += [*part.rows.values.values()]
    found = sum(array.nbytes for array in arrays)
    return int(found + (part.rows.ids.nbytes if part.rows is not None else 0))


def _refuse(problems: Sequence[Problem], long: Long) -> None:
    if problems:
        raise sharded.refused(problems, long)


def _chunks(
    made: Sequence[Bucket], shift: int, chunk_size: int, buckets: int
) -> tuple[IntArray, list[int]]:
    """Where the dataset's chunks start (row numbers: a chunk holds the samples whose
    first row is from its start to the next one's; the first is 0, the last past every
    row) and the dataset position of each chunk's first sample (and the total last):
    whole stretches of about ``chunk_size`` samples, and enough for each bucket's piece of
    a chunk to hold about :data:`PIECE_SAMPLES` samples."""
    stretches = np.concatenate([bucket.stretches for bucket in made])
    counts = np.concatenate([bucket.counts for bucket in made])
    numbers, where = np.unique(stretches, return_inverse=True)
    per = np.bincount(where, counts, minlength=numbers.size).astype(np.int64)
    ends = np.cumsum(per)
    total = int(ends[-1])
    size = max(chunk_size, PIECE_SAMPLES * buckets)
    marks = np.arange(size, total, size)
    cuts = np.unique(np.searchsorted(ends, marks, side="left") + 1)
    cuts = cuts[cuts < numbers.size]
    starts = [0, *(numbers[cuts] << np.int64(shift)).tolist(), np.iinfo(np.int64).max]
    positions = [0, *ends[cuts - 1].tolist(), total]
    return np.asarray(starts, dtype=np.int64), positions
