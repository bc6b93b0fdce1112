"""Evaluations on a Ray cluster whose workers read their own shards; the driver plans and
merges.

Four rounds of tasks, each a worker's, with only small objects for the driver:

1. **read**: a task per shard (or byte range of a large TREC file) reads and checks its
   lines, cuts its rows into buckets by query (:func:`engine.io.sharded.bucketed`), and
   sums up its runs of rows without the rows (:class:`engine.io.sharded.Runs`);
2. **plan**: one task reads every shard's runs and finds what scoring needs of the whole
   dataset: the padding shape (the longest ranking and label list of a sample; the
   largest label), each sample's place (by its first line), the outputs for unknown
   samples, and so where each chunk of samples starts;
3. **join**: a task per bucket makes the bucket's samples and outputs of every shard's
   rows (a document labelled or ranked twice is found whichever shards hold the two
   lines), puts each output beside its sample, scores the samples padded to the
   dataset's shape, and cuts the scores into the dataset's chunks;
4. **sum**: a task per chunk orders its samples from every bucket as the input does (each
   by its first line) and sums them (:func:`~engine.evaluation.pipeline.summed`): exact
   tallies, the bootstrap's block sums, the lines of the content hash, and the rows when
   wanted.

The driver merges the chunks in order: the numbers are those of one process reading the
same lines, bit for bit, whatever the sharding, the buckets and the nodes. A sample's
values depend on its row and the dataset's shape alone (every metric is computed row by
row), the chunks start at the dataset positions a single process's chunks start at, and
every summary is summed in dataset order or exactly.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, Problem, SlotwiseError
from engine.evaluation.batch import PADDED, Shape
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
from engine.evaluation.statistics import Bootstrap, Resampled
from engine.io import sharded
from engine.io.columns import Columns, ContentHash, canonical_lines, string_bytes
from engine.io.frames import Coded
from engine.io.sharded import Long, Runs
from engine.io.sinks import Sink
from engine.logs import log

__all__ = ["evaluate_sharded"]

IntArray = npt.NDArray[np.int64]

#: Bytes of input per bucket (at least two buckets per CPU of the cluster).
BUCKET_BYTES = 1 << 28
#: Samples a chunk's piece of a bucket holds at the least: about 250 KiB of scores (Ray
#: keeps an object under 100 KiB in its owner's memory: the driver's).
PIECE_SAMPLES = 2048


@attrs.frozen
class Read:
    """What a read task found: its rows, the bytes of its pieces, and its problems."""

    rows: int
    nbytes: int
    problems: tuple[Problem, ...] = ()


@attrs.frozen
class Planned:
    """What scoring needs of the whole dataset: its samples, padding shape and outputs for
    unknown samples; where each chunk starts (``bounds``: the first row numbers of the
    chunks' first samples, then one past every row) and its dataset position."""

    samples: int
    shape: Shape
    unknown: tuple[str, ...]
    bounds: IntArray
    positions: tuple[int, ...]


@attrs.frozen
class Joined:
    """What a join task found: its samples, the bytes of its pieces, and its problems
    (the samples', the outputs')."""

    samples: int
    nbytes: int
    problems: tuple[tuple[Problem, ...], tuple[Problem, ...]] = ((), ())


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
class Folded:
    """What the chunks' sums fold into, in dataset order, where they are: the content hash
    and the bootstrap's sums (None when values are kept: their intervals come from them)."""

    digest: str
    bootstrap: Bootstrap | None


# -- the tasks --------------------------------------------------------------------------------


def read_shard(long: Long, index: int, buckets: int) -> tuple[Any, ...]:
    """Read shard ``index`` of ``long``: what was found, its runs, then its rows of each
    bucket."""
    try:
        found = sharded.rows(long, index)
        pieces = sharded.bucketed(found, buckets)
    except InputError as error:
        return (Read(0, 0, error.problems), None, *[None] * buckets)
    read = Read(len(found), sum(piece.nbytes for piece in pieces))
    return (read, found.runs(), *pieces)


def plan_chunks(count: int, buckets: int, chunk: int, *runs: Runs) -> Planned:
    """The dataset's shape, samples and chunks from every shard's runs: ``count`` are the
    samples' shards' (first), the rest the outputs'."""
    own, theirs = runs[:count], runs[count:]
    samples, first = _totals(own, "starts")
    outputs, rows = _totals(theirs, "lengths")
    known = pc.is_in(outputs.ids, value_set=samples.ids).to_numpy(zero_copy_only=False)
    widths = dict.fromkeys(PADDED, 0)
    widths["retrieved"] = int(rows[known].max(initial=0))
    for kind in ("relevance", "grades"):
        if any(kind in part.labelled for part in own):
            labelled = _labelled(own, kind, samples, len(samples.ids))
            widths[kind] = int(labelled.max(initial=0))
    tops = [part.top for part in own if part.top is not None]
    shape = Shape(widths, max(tops) if tops else 0.0)
    unknown = tuple(sorted(outputs.ids.filter(pa.array(~known)).to_pylist()))
    ordered = np.sort(first)
    size = max(chunk, PIECE_SAMPLES * buckets)
    starts = list(range(0, ordered.size, size))
    bounds = np.append(ordered[starts], np.iinfo(np.int64).max)
    return Planned(ordered.size, shape, unknown, bounds, (*starts, ordered.size))


def _totals(runs: Sequence[Runs], what: str) -> tuple[Coded, IntArray]:
    """The queries of ``runs`` coded, and per query the smallest start (``"starts"``: its
    first row) or the sum of the lengths (``"lengths"``: its rows)."""
    queries = Coded.of(pa.chunked_array([part.queries for part in runs], _QUERIES))
    values = np.concatenate([getattr(part, what) for part in runs] or [_NONE])
    if what == "starts":
        found = np.full(len(queries.ids), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(found, queries.codes, values)
        return queries, found
    return queries, np.bincount(queries.codes, values, len(queries.ids)).astype(np.int64)


def _labelled(runs: Sequence[Runs], kind: str, samples: Coded, count: int) -> IntArray:
    """Per sample, its labels of ``kind`` (coded as ``samples``: the same runs in order)."""
    counts = np.concatenate(
        [part.labelled.get(kind, np.zeros(part.lengths.size, np.int64)) for part in runs]
    )
    return np.bincount(samples.codes, counts, count).astype(np.int64)


_QUERIES = pa.dictionary(pa.int32(), pa.string())
_NONE = np.zeros(0, dtype=np.int64)


def join_bucket(
    samples: Long, outputs: Long, plan: Plan, planned: Planned, chunk: int, *pieces: Any
) -> tuple[Any, ...]:
    """Join and score one bucket: ``pieces`` are its rows from every shard of ``samples``
    (first, in order), then of ``outputs``. What was found, then the bucket's piece of
    each chunk of the dataset."""
    own, theirs = pieces[: len(samples.shards)], pieces[len(samples.shards) :]
    made: list[Columns] = []
    problems: list[tuple[Problem, ...]] = []
    for long, rows in ((samples, own), (outputs, theirs)):
        try:
            made.append(sharded.columns(long, rows))
            problems.append(())
        except InputError as error:
            problems.append(error.problems)
    chunks = len(planned.positions) - 1
    if any(problems):
        return (Joined(0, 0, (problems[0], problems[1])), *[None] * chunks)
    columns, outputs_columns = made
    first = sharded.first_rows(own)
    lines = pa.concat_arrays(list(canonical_lines(columns)) or [pa.array([], pa.string())])
    joined, _ = aligned(columns, outputs_columns)
    parts = [
        score_chunk(ChunkTask(joined.slice(start, chunk), plan, planned.shape))
        for start in range(0, len(joined), chunk)
    ]
    scores = ChunkScores.concat(parts, plan.labels) if parts else _no_scores()
    metadata = joined.column("metadata")
    cuts = np.searchsorted(first, planned.bounds).tolist()
    found = [
        Piece(
            first[start:end],
            _own(joined.ids.slice(start, end - start)),
            _own(metadata.slice(start, end - start)),
            scores.take(np.arange(start, end, dtype=np.int64)),
            _own(lines.slice(start, end - start)),
        )
        for start, end in itertools.pairwise(cuts)
    ]
    return (Joined(len(joined), sum(piece.nbytes for piece in found)), *found)


def _own(array: pa.Array) -> pa.Array:
    """A slice with buffers of its own (shipping it ships only its rows)."""
    return pa.concat_arrays([array])


def _no_scores() -> ChunkScores:
    none = np.zeros(0, dtype=np.bool_)
    return ChunkScores({}, {}, {}, np.zeros(0, dtype=np.int64), none, none)


def sum_chunk(
    gathering: Gathering, position: int, *pieces: Piece
) -> tuple[bytes, Resampled | None, Summed]:
    """One chunk of the dataset from each bucket's piece of it, its samples in dataset
    order (by first row) from dataset position ``position``: their lines of the content
    hash, the bootstrap's part of them, and the rest of their sums."""
    first = np.concatenate([piece.first for piece in pieces])
    order = np.argsort(first, kind="stable")
    ids = pa.concat_arrays([piece.ids for piece in pieces]).take(pa.array(order))
    metadata = pa.concat_arrays([piece.metadata for piece in pieces]).take(pa.array(order))
    scores = ChunkScores.concat([piece.scores for piece in pieces], gathering.labels).take(order)
    lines = pa.concat_arrays([piece.lines for piece in pieces]).take(pa.array(order))
    part = summed(ids, metadata, scores, gathering, position)
    return bytes(string_bytes(lines)), part.resampled, attrs.evolve(part, resampled=None)


def fold_chunks(labels: int, *parts: Any) -> Folded:
    """The chunks' lines of the content hash and bootstrap parts (``parts``: each chunk's
    lines, then each chunk's part, in dataset order) folded in that order."""
    chunks = len(parts) // 2
    digest = ContentHash()
    for lines in parts[:chunks]:
        digest.update_lines(lines)
    resampled = [part for part in parts[chunks:] if part is not None]
    if not resampled:
        return Folded(digest.hexdigest(), None)
    bootstrap = Bootstrap(labels)
    for part in resampled:
        bootstrap.merge(part)
    return Folded(digest.hexdigest(), bootstrap)


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
    read, planner, join, sum_, fold = (
        _remote(work) for work in (read_shard, plan_chunks, join_bucket, sum_chunk, fold_chunks)
    )
    inputs = [ray.put(samples), ray.put(outputs)]
    reads = [
        read.options(num_returns=buckets + 2).remote(inputs[side], i, buckets)
        for side, long in enumerate((samples, outputs))
        for i in range(len(long.shards))
    ]
    found: list[Read] = _got(ray, [refs[0] for refs in reads])
    count = len(samples.shards)
    _refuse([p for r in found[:count] for p in r.problems], samples)
    _refuse([p for r in found[count:] for p in r.problems], outputs)
    runs = [refs[1] for refs in reads]
    planned: Planned = _got(ray, planner.remote(count, buckets, chunk_size, *runs))
    if not planned.samples:
        raise InputError([Problem("the dataset has no samples")], summary="invalid dataset")
    chunks = len(planned.positions) - 1
    joins = [
        _returns(
            join.options(num_returns=chunks + 1).remote(
                *inputs, plan, planned, chunk_size, *[refs[2 + b] for refs in reads]
            ),
            chunks + 1,
        )
        for b in range(buckets)
    ]
    del reads, runs  # each shard's rows are freed once joined
    made: list[Joined] = _got(ray, [refs[0] for refs in joins])
    for side, long in enumerate((samples, outputs)):
        _refuse([p for bucket in made for p in bucket.problems[side]], long)
    gathering = Gathering(
        plan.labels, pa.array([], pa.string()), missing, strict, keep, keep or sink is not None
    )
    sums = [
        sum_.options(num_returns=3).remote(
            gathering, planned.positions[c], *[refs[1 + c] for refs in joins]
        )
        for c in range(chunks)
    ]
    del joins
    folded = fold.remote(len(plan.labels), *[refs[0] for refs in sums], *[refs[1] for refs in sums])
    found_fold: Folded = _got(ray, folded)
    source = Source(name, found_fold.digest, planned.samples, planned.unknown)
    results, received = _merged(
        plan,
        source,
        gathering,
        [refs[2] for refs in sums],
        found_fold.bootstrap,
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
    log.info(  # what went through the object stores, in bytes: the shuffle, then the chunks
        "evaluation.sharded",
        shards=len(samples.shards) + len(outputs.shards),
        buckets=buckets,
        chunks=chunks,
        read_to_join=sum(r.nbytes for r in found),
        joined_to_summed=sum(bucket.nbytes for bucket in made),
        summed_to_driver=received,
    )
    return results


def _returns(ref: Any, count: int) -> list[Any]:
    return [ref] if count == 1 else list(ref)


def _merged(
    plan: Plan,
    source: Source,
    gathering: Gathering,
    sums: list[Any],
    bootstrap: Bootstrap | None,
    ray: Any,
    sink: Sink | None,
    progress: bool | None,
    provenance: Mapping[str, Any],
) -> tuple[Results, int]:
    """Merge the chunks' sums in dataset order into results (rows to ``sink``), with the
    bootstrap they folded into; and the bytes of the sums."""
    collected = _Collected(plan, gathering)
    collected.bootstrap = bootstrap
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
    """About the bytes of a chunk's sums: its rows' (the rest is a few numbers and ids)."""
    if part.rows is None:
        return 0
    return int(part.rows.ids.nbytes + sum(v.nbytes for v in part.rows.values.values()))


def _refuse(problems: Sequence[Problem], long: Long) -> None:
    if problems:
        raise sharded.refused(problems, long)
