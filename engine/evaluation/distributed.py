"""Evaluations on a Ray cluster whose workers read their own shards; the driver plans and
merges.

A run's rows stay on the node that read them: each query is scored where its run's first
line was read (its *home*: a byte range or a file of the run), and only its labels, and
the few lines of it that other ranges hold, travel there. The rounds of tasks, each a
worker's, with only small objects for the driver:

1. **read**: a task per shard (a byte range of an uncompressed TREC file, else a file)
   reads and checks its lines, and sums up its runs of rows without the rows
   (:class:`engine.io.sharded.Runs`); its rows stay in its node's object store;
2. **plan**: one task reads every shard's runs and finds what scoring needs of the whole
   dataset: each query's home (the first range of the run that holds it; a sample with no
   output: one by its fingerprint), the padding shape (the longest ranking and label list
   of a sample; the largest label), each sample's place (by its first line), the outputs
   for unknown samples, and where each chunk of samples starts;
3. **route**: a task per labels shard, and per range of the run that holds lines of a
   query homed elsewhere, groups those rows by home;
4. **join**: a task per home, on the node that read it, makes its samples and outputs of
   its rows and those sent to it (a document labelled or ranked twice is found whichever
   shards hold the two lines), puts each output beside its sample, scores the samples
   padded to the dataset's shape, and cuts the scores into the dataset's chunks;
5. **sum**: a task per chunk orders its samples from every home as the input does (each
   by its first line) and sums them (:func:`~engine.evaluation.pipeline.summed`): exact
   tallies and the rows when wanted, for the driver; the bootstrap's block sums and the
   lines of the content hash, which one more task folds in dataset order.

The driver merges the chunks in order: the numbers are those of one process reading the
same lines, bit for bit, whatever the sharding and the nodes. A sample's values depend on
its row and the dataset's shape alone (every metric is computed row by row), and every
summary is summed in dataset order or exactly.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, Problem
from engine.evaluation.batch import PADDED, Shape
from engine.evaluation.cluster import fetch
from engine.evaluation.executors import RayExecutor, on_its_cpus
from engine.evaluation.pipeline import (
    ChunkScores,
    ChunkTask,
    Gathering,
    MissingOutputs,
    Plan,
    Source,
    Summed,
    aligned,
    check_overlap,
    gather,
    score_chunk,
    summed,
)
from engine.evaluation.results import Results
from engine.evaluation.statistics import Bootstrap, Resampled
from engine.io import sharded
from engine.io.columns import Columns, ContentHash, canonical_lines, string_bytes
from engine.io.fingerprints import fingerprints
from engine.io.frames import Coded
from engine.io.sharded import Long, Rows, Runs
from engine.io.sinks import Sink
from engine.logs import log

__all__ = ["Scoring", "evaluate_sharded"]

IntArray = npt.NDArray[np.int64]

#: Bytes of the run a range (a home) holds at the least, when there are fewer ranges than
#: two per CPU of the cluster.
LEAST_RANGE = 1 << 22


@attrs.frozen
class Read:
    """What a read task found: its rows, their bytes, the node that holds them, its
    problems, and the name a dataset document gives itself (YAML, JSON)."""

    rows: int
    nbytes: int
    node: str
    problems: tuple[Problem, ...] = ()
    name: str | None = None


@attrs.frozen
class Planned:
    """What scoring needs of the whole dataset: its samples, padding shape and outputs for
    unknown samples; where each chunk starts (``bounds``: the first row numbers of the
    chunks' first samples, then one past every row) and its dataset position; for each
    range of the run, the other homes it sends rows to, and for each chunk the homes of
    its samples; how many outputs there are and the first samples' ids (for the error
    when none is for a sample)."""

    samples: int
    shape: Shape
    unknown: tuple[str, ...]
    bounds: IntArray
    positions: tuple[int, ...]
    sending: tuple[tuple[int, ...], ...]
    chunk_homes: tuple[tuple[int, ...], ...]
    outputs: int = 0
    first_ids: tuple[str, ...] = ()


@attrs.frozen
class Away:
    """The queries of a shard's rows (codes into its runs' dictionary) scored elsewhere,
    and their homes."""

    codes: npt.NDArray[np.int32]
    homes: npt.NDArray[np.int32]


@attrs.frozen
class Joined:
    """What a join task found: its samples, the bytes of its pieces, and its problems
    (the samples', the outputs')."""

    samples: int
    nbytes: int
    problems: tuple[tuple[Problem, ...], tuple[Problem, ...]] = ((), ())


@attrs.frozen
class Piece:
    """A home's samples of one chunk, scored: each sample's first row, id, metadata,
    scores and line of the content hash, and its error rows' reasons (None: none)."""

    first: IntArray
    ids: pa.Array
    metadata: pa.Array
    scores: ChunkScores
    lines: pa.Array
    error: pa.Array | None = None

    def errors(self) -> pa.Array:
        """Why the system failed on each sample (null for an output)."""
        return pa.nulls(len(self.ids), pa.string()) if self.error is None else self.error

    @property
    def nbytes(self) -> int:
        scores = self.scores
        arrays = [*scores.values.values(), scores.duplicates, scores.has_output]
        arrays += [scores.no_relevant, *(a for pair in scores.judged.values() for a in pair)]
        found = self.first.nbytes + self.ids.nbytes + self.metadata.nbytes + self.lines.nbytes
        found += 0 if self.error is None else self.error.nbytes
        return int(found + sum(array.nbytes for array in arrays))


@attrs.frozen
class Folded:
    """What the chunks' sums fold into, in dataset order, where they are: the content hash
    and the bootstrap's sums (None when values are kept: their intervals come from them)."""

    digest: str
    bootstrap: Bootstrap | None


# -- the tasks --------------------------------------------------------------------------------


def read_shard(long: Long, index: int) -> tuple[Read, Runs | None, Rows | None]:
    """Read shard ``index`` of ``long``: what was found, its runs, its rows."""
    node = this_node()
    try:
        found = sharded.rows(long, index)
    except InputError as error:
        return Read(0, 0, node, error.problems), None, None
    return Read(len(found), found.nbytes, node), found.runs(), found


def this_node() -> str:
    """The Ray node this runs on ("" outside Ray)."""
    import ray

    return str(ray.get_runtime_context().get_node_id()) if ray.is_initialized() else ""


def plan_chunks(count: int, chunk: int, *runs: Runs) -> tuple[Any, ...]:
    """What scoring needs of the whole dataset, from every shard's runs (the first
    ``count`` are the samples' shards', the rest the run's ranges, which are the homes):
    the plan, then where each shard's rows go (:class:`Away`: a labels shard's every
    query, a range's queries homed elsewhere)."""
    own, theirs = runs[:count], runs[count:]
    samples, first = _totals(own, "starts")
    outputs, rows = _totals(theirs, "lengths")
    outputs_home = _first_range(theirs, outputs)
    known = pc.is_in(outputs.ids, value_set=samples.ids).to_numpy(zero_copy_only=False)
    widths = dict.fromkeys(PADDED, 0)
    widths["retrieved"] = int(rows[known].max(initial=0))
    for kind in ("relevance", "grades"):
        if any(kind in part.labelled for part in own):
            widths[kind] = int(_labelled(own, kind, samples).max(initial=0))
    tops = [part.top for part in own if part.top is not None]
    shape = Shape(widths, max(tops) if tops else 0.0)
    unknown = tuple(sorted(outputs.ids.filter(pa.array(~known)).to_pylist()))
    homes = max(1, len(theirs))
    position = pc.index_in(samples.ids, value_set=outputs.ids)
    present = position.is_valid().to_numpy(zero_copy_only=False)
    at = position.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    sample_home = (fingerprints(samples.ids) % np.uint64(homes)).astype(np.int32)  # no output
    sample_home[present] = outputs_home[at[present]]
    order = np.argsort(first, kind="stable")
    size = max(chunk, 1)
    starts = list(range(0, order.size, size))
    bounds = np.append(first[order][starts], np.iinfo(np.int64).max)
    chunk_of = np.empty(order.size, dtype=np.int64)
    chunk_of[order] = np.arange(order.size) // size
    pairs = np.unique(chunk_of * homes + sample_home) if order.size else _NONE
    chunk_homes = tuple(
        tuple((pairs[pairs // homes == c] % homes).tolist()) for c in range(len(starts))
    )
    away = [_away(part, samples, sample_home, offset) for part, offset in _offsets(own)]
    range_away, sending = [], []
    for index, (part, offset) in enumerate(_offsets(theirs)):
        codes = outputs.codes[offset : offset + part.lengths.size]
        local = part.queries.indices.to_numpy(zero_copy_only=False)
        mine = np.zeros(len(part.queries.dictionary), dtype=np.int32)
        mine[local] = outputs_home[codes]
        elsewhere = np.flatnonzero(mine != index).astype(np.int32)
        range_away.append(Away(elsewhere, mine[elsewhere]))
        sending.append(tuple(np.unique(mine[elsewhere]).tolist()))
    planned = Planned(
        order.size,
        shape,
        unknown,
        bounds,
        (*starts, order.size),
        tuple(sending),
        chunk_homes,
        len(outputs.ids),
        tuple(samples.ids.take(pa.array(order[:4])).to_pylist()),
    )
    return (planned, *away, *range_away)


def _offsets(runs: Sequence[Runs]) -> list[tuple[Runs, int]]:
    """Each shard's runs and where they start among every shard's runs."""
    offsets = np.cumsum([0, *(part.lengths.size for part in runs)]).tolist()
    return list(zip(runs, offsets, strict=False))


def _first_range(runs: Sequence[Runs], outputs: Coded) -> npt.NDArray[np.int32]:
    """Per output query (coded as ``outputs``: the runs in order), the first range that
    holds one of its lines: its home."""
    ranges = np.repeat(np.arange(len(runs)), [part.lengths.size for part in runs])
    home = np.full(len(outputs.ids), np.iinfo(np.int32).max, dtype=np.int64)
    np.minimum.at(home, outputs.codes, ranges)
    return home.astype(np.int32)


def _away(part: Runs, samples: Coded, sample_home: npt.NDArray[np.int32], offset: int) -> Away:
    """Every query of a labels shard (codes into its dictionary) and its home."""
    codes = samples.codes[offset : offset + part.lengths.size]
    local = part.queries.indices.to_numpy(zero_copy_only=False)
    homes = np.zeros(len(part.queries.dictionary), dtype=np.int32)
    homes[local] = sample_home[codes]
    return Away(np.arange(homes.size, dtype=np.int32), homes)


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


def _labelled(runs: Sequence[Runs], kind: str, samples: Coded) -> IntArray:
    """Per sample, its labels of ``kind`` (coded as ``samples``: the same runs in order)."""
    counts = np.concatenate(
        [part.labelled.get(kind, np.zeros(part.lengths.size, np.int64)) for part in runs]
    )
    return np.bincount(samples.codes, counts, len(samples.ids)).astype(np.int64)


_QUERIES = pa.dictionary(pa.int32(), pa.string())
_NONE = np.zeros(0, dtype=np.int64)


def route_rows(rows: Rows, away: Away) -> dict[int, Rows]:
    """The rows of the queries ``away`` names, by home."""
    return {
        int(home): rows.only(away.codes[away.homes == home])
        for home in np.unique(away.homes).tolist()
    }


def join_home(
    samples: Long,
    outputs: Long,
    plan: Plan,
    planned: Planned,
    chunk: int,
    home: int,
    own: Rows | None,
    away: Away | None,
    labels: int,
    *routes: dict[int, Rows],
) -> tuple[Joined, dict[int, Piece] | None]:
    """Join and score the samples of one home: its own range's rows (``own``, less the
    queries ``away`` sends elsewhere), and the rows ``routes`` send it (the ``labels``
    first, from every labels shard in order, then the run's, from later ranges in order).
    What was found, and its pieces of the dataset's chunks."""
    mine = [route.get(home) for route in routes]
    kept = own.without(away.codes) if own is not None and away is not None else own
    label_rows = [piece for piece in mine[:labels] if piece is not None]
    run_rows = [piece for piece in (kept, *mine[labels:]) if piece is not None]
    made: list[Columns] = []
    problems: list[tuple[Problem, ...]] = []
    for long, rows in ((samples, label_rows), (outputs, run_rows)):
        try:
            made.append(sharded.columns(long, rows))
            problems.append(())
        except InputError as error:
            problems.append(error.problems)
    if any(problems):
        return Joined(0, 0, (problems[0], problems[1])), None
    columns, outputs_columns = made
    first = sharded.first_rows(label_rows)
    lines = pa.concat_arrays(list(canonical_lines(columns)) or [pa.array([], pa.string())])
    joined, _ = aligned(columns, outputs_columns)
    found = pieces(joined, first, lines, plan, planned.shape, chunk, planned.bounds)
    return Joined(len(joined), sum(piece.nbytes for piece in found.values())), found


def pieces(
    joined: Columns,
    first: IntArray,
    lines: pa.Array,
    plan: Plan,
    shape: Shape,
    chunk: int,
    bounds: IntArray,
) -> dict[int, Piece]:
    """A home's samples beside their outputs (``joined``; each sample's first row and line
    of the content hash), scored padded to the dataset's ``shape`` and cut into the
    dataset's chunks (``bounds``: the first rows of the chunks, then one past every row)."""
    parts = [
        score_chunk(ChunkTask(joined.slice(start, chunk), plan, shape))
        for start in range(0, len(joined), chunk)
    ]
    if not parts:
        return {}
    scores = ChunkScores.concat(parts, plan.labels)
    metadata = joined.column("metadata")
    reasons = joined.column("error")  # (error rows: none in a TREC run or a run table)
    cuts = np.searchsorted(first, bounds).tolist()
    return {
        index: Piece(
            first[start:end],
            _own(joined.ids.slice(start, end - start)),
            _own(metadata.slice(start, end - start)),
            scores.take(np.arange(start, end, dtype=np.int64)),
            _own(lines.slice(start, end - start)),
            _own(reasons.slice(start, end - start)) if reasons.null_count < len(reasons) else None,
        )
        for index, (start, end) in enumerate(itertools.pairwise(cuts))
        if end > start
    }


def _own(array: pa.Array) -> pa.Array:
    """A slice with buffers of its own (shipping it ships only its rows)."""
    return pa.concat_arrays([array])


def sum_chunk(
    gathering: Gathering, position: int, chunk: int, *homes: dict[int, Piece]
) -> tuple[bytes, Resampled | None, Summed]:
    """Chunk ``chunk`` of the dataset from each home's piece of it, its samples in dataset
    order (by first row) from dataset position ``position``: their lines of the content
    hash, the bootstrap's part of them, and the rest of their sums."""
    pieces = [found[chunk] for found in homes if chunk in found]
    first = np.concatenate([piece.first for piece in pieces])
    order = np.argsort(first, kind="stable")
    ids = pa.concat_arrays([piece.ids for piece in pieces]).take(pa.array(order))
    metadata = pa.concat_arrays([piece.metadata for piece in pieces]).take(pa.array(order))
    scores = ChunkScores.concat([piece.scores for piece in pieces], gathering.labels).take(order)
    lines = pa.concat_arrays([piece.lines for piece in pieces]).take(pa.array(order))
    error = pa.concat_arrays([piece.errors() for piece in pieces]).take(pa.array(order))
    part = summed(ids, metadata, error, scores, gathering, position)
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
def remote_task(work: Callable[..., Any]) -> Any:
    """``work`` as a Ray task that runs on the CPUs Ray gives it (one per function)."""
    import ray

    return ray.remote(on_its_cpus(work))


def on_node(node: str) -> Any:
    """Run on ``node`` (where the task's input is) while it is alive."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node, soft=True) if node else "DEFAULT"


@attrs.frozen
class Scoring:
    """How an evaluation on the cluster scores and reports, whatever reads its inputs:
    per-sample rows go to ``sink`` as they are merged and stay in memory when ``keep``;
    ``provenance`` is the results' own, the chunking, executor and outputs policy added."""

    executor: RayExecutor
    name: str | None
    missing: MissingOutputs
    strict: bool
    keep: bool
    chunk_size: int
    sink: Sink | None = None
    progress: bool | None = False
    provenance: Mapping[str, Any] | None = None

    def gathering(self, plan: Plan) -> Gathering:
        keep, sink = self.keep, self.sink
        return Gathering(plan.labels, self.missing, self.strict, keep, keep or sink is not None)


def evaluate_sharded(
    plan: Plan,
    samples: Long,
    outputs: Long,
    scoring: Scoring,
) -> Results:
    """Score the outputs of ``outputs`` against the samples of ``samples`` on the Ray
    cluster, workers reading the shards (see the module docstring)."""
    ray = scoring.executor.init()
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    run_bytes = sum(shard.nbytes for shard in outputs.shards)
    samples = samples.ranged()
    outputs = outputs.ranged(max(LEAST_RANGE, min(sharded.RANGE_BYTES, run_bytes // (2 * cpus))))
    read, planner, route, join = (
        remote_task(work) for work in (read_shard, plan_chunks, route_rows, join_home)
    )
    inputs = [ray.put(samples), ray.put(outputs)]
    reads = [
        read.options(num_returns=3).remote(inputs[side], i)
        for side, long in enumerate((samples, outputs))
        for i in range(len(long.shards))
    ]
    found: list[Read] = fetch(ray, [refs[0] for refs in reads])
    count = len(samples.shards)
    hint = (
        "on Ray the workers read the files: put them where every node reaches them "
        "(the same path on each node, or a URI such as s3://...)"
    )
    _refuse([p for r in found[:count] for p in r.problems], samples, hint)
    _refuse([p for r in found[count:] for p in r.problems], outputs, hint)
    homes = len(outputs.shards)
    planning = planner.options(num_returns=1 + len(reads)).remote(
        count, scoring.chunk_size, *[refs[1] for refs in reads]
    )
    planned: Planned = fetch(ray, planning[0])
    if not planned.samples:
        raise InputError([Problem("the dataset has no samples")], summary="invalid dataset")
    check_overlap(planned.outputs, planned.unknown, pa.array(planned.first_ids, pa.string()))
    aways, rows = planning[1:], [refs[2] for refs in reads]
    label_routes = [
        route.options(scheduling_strategy=on_node(found[i].node)).remote(rows[i], aways[i])
        for i in range(count)
    ]
    run_routes = {
        r: route.options(scheduling_strategy=on_node(found[count + r].node)).remote(
            rows[count + r], aways[count + r]
        )
        for r in range(homes)
        if planned.sending[r]
    }
    joins = [
        join.options(num_returns=2, scheduling_strategy=on_node(found[count + h].node)).remote(
            *inputs,
            plan,
            planned,
            scoring.chunk_size,
            h,
            rows[count + h],
            aways[count + h],
            count,
            *label_routes,
            *[ref for r, ref in sorted(run_routes.items()) if h in planned.sending[r]],
        )
        for h in range(homes)
    ]
    del reads, rows, aways, label_routes, run_routes  # each shard's rows freed once joined
    made: list[Joined] = fetch(ray, [refs[0] for refs in joins])
    for side, long in enumerate((samples, outputs)):
        _refuse([p for bucket in made for p in bucket.problems[side]], long)
    scored = [refs[1] for refs in joins]
    del joins
    results, received = merge(plan, scored, planned, scoring)
    log.info(  # what the tasks produced, in bytes: rows read, pieces scored, sums for here
        "evaluation.sharded",
        shards=len(samples.shards) + len(outputs.shards),
        homes=homes,
        chunks=len(planned.chunk_homes),
        read=sum(r.nbytes for r in found),
        scored=sum(bucket.nbytes for bucket in made),
        summed_to_driver=received,
    )
    return results


class Merging(Protocol):
    """What :func:`merge` needs of a plan: the dataset's samples, the unknown output ids,
    each chunk's first dataset position and homes."""

    @property
    def samples(self) -> int: ...
    @property
    def unknown(self) -> tuple[str, ...]: ...
    @property
    def positions(self) -> tuple[int, ...]: ...
    @property
    def chunk_homes(self) -> tuple[tuple[int, ...], ...]: ...


def merge(plan: Plan, joins: list[Any], planned: Merging, scoring: Scoring) -> tuple[Results, int]:
    """The results of the homes' pieces (``joins``: each home's, in the object store,
    emptied once the chunks' tasks have them, so that each piece is freed once summed):
    a task per chunk of ``planned`` sums it, one more folds the content hash and the
    bootstrap in dataset order, and the chunks' sums are merged here in order (rows to
    the sink as they come). The results, and the bytes of sums received."""
    ray = scoring.executor.init()
    gathering = scoring.gathering(plan)
    sum_, fold = remote_task(sum_chunk), remote_task(fold_chunks)
    sums = [
        sum_.options(num_returns=3).remote(
            gathering, planned.positions[c], c, *[joins[h] for h in homes_of]
        )
        for c, homes_of in enumerate(planned.chunk_homes)
    ]
    joins.clear()
    folded = fold.remote(len(plan.labels), *[refs[0] for refs in sums], *[refs[1] for refs in sums])
    found_fold: Folded = fetch(ray, folded)
    received = [0]
    pending = deque(refs[2] for refs in sums)
    del sums  # each chunk's sums freed (here and in the object store) once merged

    def parts() -> Iterator[Summed]:
        while pending:
            part: Summed = fetch(ray, pending.popleft())
            received[0] += _size(part)
            yield part

    results = gather(
        plan,
        Source(scoring.name, found_fold.digest, planned.samples, planned.unknown),
        gathering,
        parts(),
        sink=scoring.sink,
        progress=scoring.progress,
        provenance={
            **(scoring.provenance or {}),
            "chunk_size": scoring.chunk_size,
            "executor": scoring.executor.name,
            "missing_outputs": scoring.missing,
        },
        folded=found_fold.bootstrap,
    )
    return results, received[0]


def _size(part: Summed) -> int:
    """About the bytes of a chunk's sums: its rows' (the rest is a few numbers and ids)."""
    if part.rows is None:
        return 0
    return int(part.rows.ids.nbytes + sum(v.nbytes for v in part.rows.values.values()))


def _refuse(problems: Sequence[Problem], long: Long, unread: str = "") -> None:
    """Raise the problems of ``long``'s shards, if any, with ``unread`` as a hint when a
    file could not be read."""
    if problems:
        hint = unread if any(p.message.startswith("cannot read") for p in problems) else ""
        raise sharded.refused(problems, long, hint)
