"""Datasets and outputs given as documents (JSONL, JSON, YAML files of samples and of
outputs) read by the workers of a Ray cluster; the driver lists the files and merges.

The rounds of :mod:`engine.evaluation.distributed`, for documents: a sample is one row
wherever it is read, so a sample's *home* is the shard that read it, and only outputs
travel, each to its sample's home.

1. **read**: a task per shard (a byte range of an uncompressed JSONL file, cut at line
   boundaries; a JSON or YAML file whole) reads and validates its documents into columns,
   which stay in its node's object store; the driver gets their counts and problems;
2. **plan**: one task reads every shard's ids and finds an id repeated (in one file: that
   file is read again whole, as one process reads it, for its problems; across files: the
   problem names both), the outputs for unknown samples, each output's home, and where
   each chunk of samples starts (samples are in the order of the shards, then of their
   lines);
3. **route**: a task per outputs shard cuts its outputs by home;
4. **join**: a task per home puts the outputs sent to it beside its samples, and tells the
   driver their padding shape (merged here: the dataset's);
5. **score**: a task per home scores its samples padded to the dataset's shape and cuts
   them into the dataset's chunks, which :func:`~engine.evaluation.distributed.merge`
   sums, folds and merges in dataset order.

A shard's problems are found by its worker; a file that has any is read again whole by a
worker as one process reads it, so every problem is reported as one process reports it
(file, line or JSON pointer, sample id, reason), of every file of the round.
"""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, Problem
from engine.evaluation.batch import Shape
from engine.evaluation.cluster import fetch
from engine.evaluation.distributed import (
    LEAST_RANGE,
    Piece,
    Read,
    Scoring,
    merge,
    on_node,
    pieces,
    remote_task,
    this_node,
)
from engine.evaluation.pipeline import Plan, aligned, check_overlap
from engine.evaluation.results import Results
from engine.io import documents, schemas, sharded, shards, sniff, sources
from engine.io.columns import Columns, canonical_lines, stack
from engine.io.files import base_name, format_suffix, parse_json
from engine.io.frames import Coded
from engine.io.grammar import limit
from engine.io.shards import Shard, Spec
from engine.logs import log

__all__ = ["Documents", "evaluate_documents"]

_JSONL = ".jsonl"


@attrs.frozen
class Documents:
    """A sharded input of documents: its shards in order (JSONL files cut into byte
    ranges), what each holds (``what``: "sample" or "output"), the input as given
    (``given``: problems of the whole input name it), its name as one process names it
    (``name``: its file's, its folder's) and whether it is one local file (``one_file``:
    then a YAML or JSON dataset's own name wins, as in one process)."""

    shards: tuple[Shard, ...]
    what: str
    given: str
    name: str
    one_file: bool

    @classmethod
    def of(cls, spec: Spec, what: str) -> Documents:
        """The files ``spec`` names (listed, not read); their formats may differ."""
        found = shards.resolve([spec] if isinstance(spec, str | os.PathLike) else spec)
        return cls(found, what, str(spec), sources.input_name(spec), not shards.is_sharded(spec))

    def ranged(self, size: int) -> Documents:
        """The same input with its uncompressed JSONL files cut into byte ranges of about
        ``size`` bytes (a worker's task each); JSON and YAML files stay whole."""
        ranged = [shards.split([s], size) if _lines(s) else (s,) for s in self.shards]
        return attrs.evolve(self, shards=tuple(itertools.chain.from_iterable(ranged)))

    @property
    def nbytes(self) -> int:
        return sum(shard.nbytes for shard in self.shards)

    def files(self) -> list[int]:
        """Per shard, the number of its file (ranges of one file share it)."""
        numbers: dict[tuple[str, str], int] = {}
        return [numbers.setdefault((s.root, s.path), len(numbers)) for s in self.shards]


def _lines(shard: Shard) -> bool:
    """Whether a shard is cut into byte ranges read line by line: an uncompressed JSONL
    file (JSON, YAML and compressed files are read whole, as one process reads them)."""
    return format_suffix(shard.path) == _JSONL and not shard.compressed


def _whole(shard: Shard) -> Shard:
    return attrs.evolve(shard, start=0, end=None)


# -- the tasks --------------------------------------------------------------------------------


def read_documents(docs: Documents, index: int) -> tuple[Read, pa.Array, Columns | None]:
    """Read shard ``index``: what was found, its ids, its columns (None: none)."""
    node = this_node()
    try:
        name, found = _read(docs.shards[index], docs.what)
    except InputError as error:
        return Read(0, 0, node, error.problems), _NO_IDS, None
    if found is None:
        return Read(0, 0, node), _NO_IDS, None
    return Read(len(found), found.table.nbytes, node, name=name), found.ids, found


_NO_IDS = pa.array([], pa.string())


def _read(shard: Shard, what: str) -> tuple[str | None, Columns | None]:
    """The samples or outputs of a shard, and the name a whole dataset file gives itself;
    a file that changed since it was listed is refused."""
    name, found = None, None
    if _lines(shard) and not _compressed(shard):
        found = _jsonl(shard, what)
    elif shard.start == 0:  # (a JSONL file compressed without a suffix: read whole)
        name, found = _one_process(shard, what)
    shards.unchanged(shard)
    return name, found


def _compressed(shard: Shard) -> bool:
    """Whether a file's first bytes start a compressed stream."""
    with shards.open_file(shard) as handle:
        return sniff.codec(bytes(handle.read(8))) is not None


def _one_process(shard: Shard, what: str) -> tuple[str | None, Columns]:
    """A whole file read as one process reads it, and the name a dataset document gives
    itself (None: it gives none, and is named after its file)."""
    with sources._local(_whole(shard)) as path:
        if what == "sample":
            name, found = sources.read_dataset(path)
            return (None if name == base_name(path) else name), found
        return None, sources.read_outputs(path)


def _jsonl(shard: Shard, what: str) -> Columns | None:
    """The documents of a JSONL shard's lines (None: no line holds one), as
    :func:`~engine.io.files.read_jsonl` and the documents' readers read them (problems
    then number the lines from the range's start: the file is read again for them)."""
    data = shards.read_lines(shard)
    if max(map(len, data.split(b"\n")), default=0) > limit("line"):  # (one process says which)
        raise InputError([Problem("a line past the line limit", source=shard.name)])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError([Problem(f"not UTF-8 text: {error.reason}", source=shard.name)]) from None
    records: list[tuple[int, Any]] = []
    problems: list[Problem] = []
    for number, text_line in enumerate(io.StringIO(text, newline=None), start=1):
        if text_line.strip():
            try:
                records.append((number, parse_json(text_line, shard.name, number)))
            except InputError as error:
                problems += error.problems
    if problems:
        raise InputError(problems)
    if not records:
        return None
    if what == "sample":
        return documents.parse_samples(((raw, line) for line, raw in records), shard.name)
    triples = []
    for line, record in records:
        sample_id = schemas.sample_id_of(record)
        if sample_id is None or "actual_output" not in record:
            raise InputError([Problem("not an outputs line", source=shard.name, line=line)])
        triples.append((sample_id, record["actual_output"], line))
    return documents.outputs_columns(documents.parse_outputs(triples, shard.name))


def file_problems(shard: Shard, what: str) -> tuple[tuple[Problem, ...], str] | None:
    """The problems and summary of the error one process reports for a whole file (None:
    it reads it)."""
    try:
        _one_process(shard, what)
    except InputError as error:
        return error.problems, error.summary
    return None


@attrs.frozen
class Planned:
    """What scoring needs of the whole dataset: the samples, the unknown output ids, the
    number of outputs and the first samples' ids (for the error when none is for a
    sample); where each chunk starts (dataset positions), its homes, and for each outputs
    shard the homes it sends outputs to. When an id is repeated: the files to read again
    for their problems (``again``: (side, shard) of each file's first range) and the
    problems of ids repeated across files (``repeated``: the samples', the outputs')."""

    samples: int = 0
    unknown: tuple[str, ...] = ()
    outputs: int = 0
    first_ids: tuple[str, ...] = ()
    positions: tuple[int, ...] = ()
    chunk_homes: tuple[tuple[int, ...], ...] = ()
    sending: tuple[tuple[int, ...], ...] = ()
    again: tuple[tuple[int, int], ...] = ()
    repeated: tuple[tuple[Problem, ...], tuple[Problem, ...]] = ((), ())


def plan_documents(
    inputs: tuple[Documents, Documents], chunk: int, *ids: pa.Array
) -> tuple[Any, ...]:
    """The plan, from every shard's ids (the samples' shards', then the outputs'), then
    per outputs shard the home of each of its outputs (-1: an unknown sample's)."""
    samples, outputs = inputs
    count = len(samples.shards)
    sides = [(samples, list(ids[:count])), (outputs, list(ids[count:]))]
    again, repeated = [], []
    for side, (docs, found) in enumerate(sides):
        files, problems = _repeats(docs, found)
        again += [(side, shard) for shard in files]
        repeated.append(tuple(problems))
    if again or any(repeated):
        refused = Planned(again=tuple(again), repeated=(repeated[0], repeated[1]))
        return (refused, *[None] * len(outputs.shards))
    sample_ids = pa.concat_arrays(list(ids[:count]))
    output_ids = pa.concat_arrays(list(ids[count:]))
    shard_of = np.repeat(np.arange(count), [len(part) for part in ids[:count]])
    position = pc.index_in(output_ids, value_set=sample_ids)
    known = position.is_valid().to_numpy(zero_copy_only=False)
    home = np.full(len(output_ids), -1, dtype=np.int32)
    home[known] = shard_of[position.filter(pa.array(known)).to_numpy(zero_copy_only=False)]
    unknown = tuple(sorted(output_ids.filter(pa.array(~known)).to_pylist()))
    routes = np.split(home, np.cumsum([len(part) for part in ids[count:]])[:-1])
    sizes = np.array([len(part) for part in ids[:count]], dtype=np.int64)
    total = int(sizes.sum())
    starts = list(range(0, total, max(chunk, 1)))
    ends = np.cumsum(sizes)
    chunk_homes = tuple(
        tuple(
            np.flatnonzero(
                (sizes > 0) & (ends > start) & (ends - sizes < min(start + chunk, total))
            ).tolist()
        )
        for start in starts
    )
    planned = Planned(
        total,
        unknown,
        len(output_ids),
        tuple(sample_ids[:4].to_pylist()),
        (*starts, total),
        chunk_homes,
        tuple(tuple(np.unique(route[route >= 0]).tolist()) for route in routes),
    )
    return (planned, *routes)


def _repeats(docs: Documents, ids: Sequence[pa.Array]) -> tuple[list[int], list[Problem]]:
    """The ids of ``docs`` given more than once: the files that hold one twice (their
    first ranges), and for an id in two files, a problem as one process words it."""
    if not ids:
        return [], []
    every = pa.concat_arrays(list(ids))
    coded = Coded.of(every)
    counts = np.bincount(coded.codes, minlength=len(coded.ids))
    rows = np.flatnonzero(counts[coded.codes] > 1)
    if not rows.size:
        return [], []
    file_of = np.repeat(docs.files(), [len(part) for part in ids])
    first_range = {file: shard for shard, file in reversed(list(enumerate(docs.files())))}
    shard_of = np.repeat(np.arange(len(ids)), [len(part) for part in ids])
    seen: dict[int, int] = {}
    in_file: set[tuple[int, int]] = set()
    again: set[int] = set()
    problems = []
    for row in rows.tolist():
        code, file = int(coded.codes[row]), int(file_of[row])
        if (code, file) in in_file:  # (one process: a problem of this file's)
            again.add(first_range[file])
        in_file.add((code, file))
        first = seen.setdefault(code, row)
        if first == row or file_of[first] == file:
            continue
        named = docs.shards[int(shard_of[first])].name
        message = f"{docs.what} id appears more than once (first in {named})"
        problems.append(
            Problem(message, sample_id=every[row].as_py(), source=docs.shards[shard_of[row]].name)
        )
    return sorted(again), problems


def route_outputs(found: Columns, homes: npt.NDArray[np.int32]) -> dict[int, Columns]:
    """The outputs of a shard by their samples' homes (those of unknown samples: none),
    each with the ids it uses alone (the shard's vocabulary is not shipped to each)."""
    return {
        int(home): found.take(np.flatnonzero(homes == home)).compact()
        for home in np.unique(homes[homes >= 0]).tolist()
    }


def join_documents(
    home: int, found: Columns, *routes: dict[int, Columns]
) -> tuple[Shape, Columns, pa.Array]:
    """The samples of one home beside the outputs sent to it (from the outputs shards in
    order): their padding shape, the joined columns, and their lines of the content hash."""
    sent = [route[home] for route in routes if home in route]
    joined, _ = aligned(found, stack(sent) if sent else documents.outputs_columns({}))
    lines = pa.concat_arrays(list(canonical_lines(found)) or [pa.array([], pa.string())])
    return Shape.of(joined), joined, lines


def score_home(
    plan: Plan, shape: Shape, chunk: int, start: int, joined: Columns, lines: pa.Array
) -> dict[int, Piece]:
    """A home's samples (dataset positions from ``start``) scored padded to the dataset's
    ``shape``, cut into the dataset's chunks of ``chunk`` samples."""
    first = start + np.arange(len(joined), dtype=np.int64)
    bounds = np.append(np.arange(0, start + len(joined), chunk, dtype=np.int64), _END)
    return pieces(joined, first, lines, plan, shape, chunk, bounds)


_END = np.iinfo(np.int64).max


# -- the driver -------------------------------------------------------------------------------


def evaluate_documents(
    plan: Plan,
    samples: Documents,
    outputs: Documents,
    scoring: Scoring,
) -> Results:
    """Score the outputs documents of ``outputs`` against the samples of ``samples`` on
    the Ray cluster, workers reading the files (see the module docstring)."""
    ray = scoring.executor.init()
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = sharded.RANGE_BYTES
    samples = samples.ranged(max(LEAST_RANGE, min(size, samples.nbytes // (2 * cpus))))
    outputs = outputs.ranged(max(LEAST_RANGE, min(size, outputs.nbytes // (2 * cpus))))
    read, planner, route, join, score, again = (
        remote_task(work)
        for work in (
            read_documents,
            plan_documents,
            route_outputs,
            join_documents,
            score_home,
            file_problems,
        )
    )
    inputs = (samples, outputs)
    refs = [ray.put(samples), ray.put(outputs)]
    reads = [
        read.options(num_returns=3).remote(refs[side], i)
        for side, docs in enumerate(inputs)
        for i in range(len(docs.shards))
    ]
    found: list[Read] = fetch(ray, [r[0] for r in reads])
    if scoring.name is None:
        own = found[0].name if samples.one_file else None
        scoring = attrs.evolve(scoring, name=own or samples.name)
    count = len(samples.shards)
    bad = _bad_files(inputs, found)
    if bad:
        _refuse(ray, again, inputs, bad, found)
    planning = planner.options(num_returns=1 + len(outputs.shards)).remote(
        (samples, outputs), scoring.chunk_size, *[r[1] for r in reads]
    )
    planned: Planned = fetch(ray, planning[0])
    if planned.again:
        _refuse(ray, again, inputs, list(planned.again), found)
    for side, problems in enumerate(planned.repeated):
        if problems:
            raise InputError(list(problems), summary=f"repeated {inputs[side].what} ids")
    if not planned.samples:
        problem = Problem("the dataset has no samples", source=samples.given)
        raise InputError([problem], summary="invalid dataset")
    check_overlap(
        planned.outputs, planned.unknown, pa.array(planned.first_ids, pa.string()), outputs.given
    )
    columns = [r[2] for r in reads]
    node = [r.node for r in found]
    routes = {
        o: route.options(scheduling_strategy=on_node(node[count + o])).remote(
            columns[count + o], planning[1 + o]
        )
        for o in range(len(outputs.shards))
        if planned.sending[o]
    }
    homes = [h for h in range(count) if found[h].rows]
    joins = {
        h: join.options(num_returns=3, scheduling_strategy=on_node(node[h])).remote(
            h, columns[h], *[ref for o, ref in sorted(routes.items()) if h in planned.sending[o]]
        )
        for h in homes
    }
    del reads, columns, routes, planning  # each shard's documents freed once joined
    shapes: list[Shape] = fetch(ray, [joins[h][0] for h in homes])
    shape = Shape()
    for part in shapes:
        shape = shape.merge(part)
    starts = np.cumsum([0, *(r.rows for r in found[:count])]).tolist()
    scored = [
        score.options(scheduling_strategy=on_node(node[h])).remote(
            plan, shape, scoring.chunk_size, starts[h], joins[h][1], joins[h][2]
        )
        if h in joins
        else None
        for h in range(count)
    ]
    del joins
    results, received = merge(plan, scored, planned, scoring)
    log.info(  # what the tasks read, and the bytes of sums for here
        "evaluation.documents",
        shards=len(found),
        homes=len(homes),
        chunks=len(planned.chunk_homes),
        read=sum(r.nbytes for r in found),
        summed_to_driver=received,
    )
    return results


def _bad_files(inputs: tuple[Documents, Documents], found: Sequence[Read]) -> list[tuple[int, int]]:
    """The files whose shards had problems, and the samples' files that hold none (one
    process refuses a dataset file with no sample): (side, first range) of each."""
    bad = set()
    at = 0
    for side, docs in enumerate(inputs):
        files = docs.files()
        reads = found[at : at + len(files)]
        at += len(files)
        rows = np.bincount(files, [r.rows for r in reads])
        for file, read in zip(files, reads, strict=True):
            if read.problems or (side == 0 and rows[file] == 0):
                bad.add((side, files.index(file)))
    return sorted(bad)


_UNREAD = (
    "on Ray the workers read the files: put them where every node reaches them "
    "(the same path on each node, or a URI such as s3://...)"
)


def _refuse(
    ray: Any,
    again: Any,
    inputs: tuple[Documents, Documents],
    bad: Sequence[tuple[int, int]],
    found: Sequence[Read],
) -> None:
    """Raise the problems of the files ``bad`` names ((side, first range) each), each
    read again whole by a worker as one process reads it: one file's error as one
    process raises it, several files' problems together, in file order."""
    errors: list[tuple[tuple[Problem, ...], str] | None] = fetch(
        ray,
        [
            again.remote(_whole(inputs[side].shards[shard]), inputs[side].what)
            for side, shard in bad
        ],
    )
    problems = [p for error in errors if error is not None for p in error[0]]
    if not problems:  # (not one process's problems: those the workers found)
        problems = [p for r in found for p in r.problems]
    unread = any(p.message.startswith("cannot read") for p in problems)
    if len(errors) == 1 and errors[0] is not None and not unread:
        raise InputError(errors[0][0], summary=errors[0][1])
    named = (
        f"{'dataset' if inputs[side].what == 'sample' else 'outputs'} {inputs[side].given}"
        for side in sorted({side for side, _ in bad})
    )
    raise InputError(
        problems, summary=f"invalid {' and '.join(named)}", hint=_UNREAD if unread else ""
    )


def readable_by_workers(dataset: Any, outputs: Any) -> bool:
    """Whether a dataset and outputs name document files the workers can read (files,
    directories, globs, lists of them), not a declared dataset's name, a reference, or a
    BEIR or Hugging Face folder (files of other formats)."""
    try:
        found = [shards.resolve(spec) for spec in (dataset, outputs) if spec is not None]
    except InputError:
        return False
    every = [shard for shards_of in found for shard in shards_of]
    return len(found) == 2 and all(
        format_suffix(shard.path) in documents.DOCUMENT_SUFFIXES for shard in every
    )
