"""Many runs against one qrels in one evaluation (``slotwise trec-eval QRELS RUN…``): each
run's queries renamed ``<run number><RUN_SEPARATOR><query>``, the qrels repeated under each
run's names, all of it scored as one dataset by :func:`~engine.analysis.trec_eval.trec_eval`
and the report cut back into one per run. trec_eval scores each query on its own, so each
run's report is the one it gets alone; what a batch saves is the per-call cost (tens of
small Arrow and NumPy calls per run), which dominates on small collections. For the same
reason the runs that are plain TREC text are read as one file (:func:`read_runs`), in
batches of their own (:func:`read_batches`), which need not wait for the qrels nor for
the evaluation API, which this module imports only to score."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, SlotwiseError
from engine.io import sniff, trec_csv
from engine.io.columns import (
    ID_LISTS,
    LABEL_KINDS,
    Columns,
    chunks_of,
    list_array,
    offsets_of,
    one_array,
    owned_codes,
    stack,
)
from engine.io.files import COMPRESSIONS, open_binary
from engine.io.frames import Coded, Where, flat, flat_strings, retrieved_twice, run_columns
from engine.io.grammar import limit

if TYPE_CHECKING:
    from engine.analysis.trec_eval import Options, Report, Request
    from engine.evaluation.api import Engine

__all__ = [
    "RUN_SEPARATOR",
    "batches",
    "printed",
    "read_batches",
    "read_runs",
    "read_together",
    "reports",
    "whole_runs",
]

#: Joins a run's number and a query id: it sorts before any character of an id.
RUN_SEPARATOR = "\x1e"
#: The most qrels rows (the qrels' queries times the runs) scored in one batch.
BATCH_ROWS = 200_000
#: The most bytes of runs read at once (as one file: plain runs no larger; larger runs
#: are read one by one, their per-call cost small beside their size).
TOGETHER_BYTES = 1 << 26
_DIGITS = 9  # of a run's number (its place on the command line)

#: What reads one run on its own: its columns and tag (trec_eval_files.read_run).
RunReader = Callable[[str], tuple[Columns, str]]


def read_batches(names: Sequence[str]) -> list[range]:
    """The runs' positions in batches read at once (:func:`read_runs`): consecutive runs
    of at most :data:`TOGETHER_BYTES` together (their files' sizes), at least one."""
    found: list[range] = []
    start = size = 0
    for at, name in enumerate(names):
        try:
            own = os.stat(name).st_size
        except (OSError, ValueError):
            own = 0
        if at > start and size + own > TOGETHER_BYTES:
            found.append(range(start, at))
            start, size = at, 0
        size += own
    return [*found, range(start, len(names))] if names else found


def batches(positions: range, qrels_rows: int) -> list[range]:
    """``positions`` in batches scored at once, of at most :data:`BATCH_ROWS` repeated
    qrels rows (one run alone where its qrels are larger)."""
    size = max(1, BATCH_ROWS // max(1, qrels_rows))
    return [positions[start : start + size] for start in range(0, len(positions), size)]


def _prefix(number: int) -> str:
    return f"{number:0{_DIGITS}d}{RUN_SEPARATOR}"


def _renamed(columns: Columns, number: int) -> Columns:
    ids = pc.binary_join_element_wise(_prefix(number), columns.ids, "")
    index = columns.table.column_names.index("id")
    return Columns(columns.table.set_column(index, "id", ids), columns.docs)


def _numbers(ids: pa.Array) -> np.ndarray:
    """The run number of each renamed query id."""
    return pc.cast(pc.utf8_slice_codeunits(ids, 0, _DIGITS), pa.int64()).to_numpy()


def read_runs(
    names: Sequence[str], positions: range, read: RunReader
) -> tuple[Columns | None, dict[int, str]]:
    """The runs at ``positions`` of ``names``, each renamed by its position, stacked; and
    the tag of each one read, by position. Those :func:`read_together` takes are read as
    one file, the others each by ``read``; a run that cannot be read has no rows and no
    tag (reading it again says why)."""
    found = read_together(names, positions)
    parts, tags = ([found[0]], found[1]) if found else ([], {})
    for number in positions:
        if number not in tags:
            try:
                run, tags[number] = read(names[number])
            except SlotwiseError:  # (trec_eval's Stop among them)
                continue
            parts.append(_renamed(run, number))
    if len(parts) < 2:  # (stacking recodes every column: nothing to do for one part)
        return (parts[0] if parts else None), tags
    return stack(parts), tags


def read_together(names: Sequence[str], positions: range) -> tuple[Columns, dict[int, str]] | None:
    """The runs at ``positions`` of ``names`` that are plain TREC text read as one file,
    as :func:`engine.io.trec.read_run` reads each (pyarrow's CSV reader, the same columns
    and order): each line's query renamed by its run's position, parsed and ranked at
    once; and each such run's tag, by position. Plain: a regular, uncompressed file, not
    empty, of lines of six fields separated by single spaces (or by single tabs, as the
    first plain run's are), without a comment, a blank line, a carriage return or a
    byte-order mark. None when fewer than two runs are plain, or when the lines of those
    together are not read whole (a bad line is then named by reading each run on its
    own)."""
    texts: list[bytes] = []
    tags: dict[int, str] = {}
    delimiter, size = None, 0
    for number in positions:
        data = _plain(names[number])
        if data is None:
            continue
        own, tag = trec_csv.delimiter(data[: data.find(b"\n") + 1]), _tag(data)
        if tag is None or own != (delimiter or own) or size + len(data) > TOGETHER_BYTES:
            continue
        if data.count(own.encode()) != 5 * data.count(b"\n"):
            continue  # not six fields a line (one such run would fail them all)
        delimiter, size = own, size + len(data)
        prefix = _prefix(number).encode()
        texts += [prefix, data[:-1].replace(b"\n", b"\n" + prefix), b"\n"]  # (joined once)
        tags[number] = tag
    if len(tags) < 2 or delimiter is None:
        return None
    table = trec_csv.parse(pa.BufferReader(b"".join(texts)), "run", delimiter)
    if table is None:
        return None
    scores = flat(table.column("score").chunks, np.float64)
    if not np.isfinite(scores).all():
        return None
    queries = Coded.of_blocks(table.column("query").chunks)
    docs = Coded.rows(flat_strings(table.column("doc").chunks))
    if retrieved_twice(queries, docs, Where()):
        return None
    return run_columns(queries, docs, scores=scores), tags


def _plain(name: str) -> bytes | None:
    """The bytes of a run :func:`read_together` can read (ending in a newline), or None.
    A file no longer than the longest line allowed is read as it is; a longer one under
    the readers' limits (:func:`engine.io.files.open_binary`)."""
    if name == "-" or name.lower().endswith(tuple(COMPRESSIONS)):  # (-: standard input)
        return None
    try:
        with open(name, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > TOGETHER_BYTES:
                return None
            if info.st_size <= limit("line"):
                data = handle.read()
            else:
                with open_binary(name) as checked:
                    data = checked.read()
    except (OSError, InputError):
        return None
    if (
        not data
        or sniff.codec(data[:8]) is not None
        or data.startswith((b"#", b"\xef\xbb\xbf"))
        or b"\r" in data
        or b"\n#" in data
        or sniff.sniff(data[: sniff.HEAD], name) != sniff.TREC
    ):
        return None
    return data if data.endswith(b"\n") else data + b"\n"


def _tag(data: bytes) -> str | None:
    """The run's tag as :func:`engine.io.trec.run_tag` finds it (the sixth field of the
    last line that has one), looked for in the last lines; None if they have none."""
    tail = data[-4096:]
    if len(tail) < len(data):
        tail = tail[tail.find(b"\n") + 1 :]  # whole lines only
    for line in reversed(tail.splitlines()):
        fields = line.split()
        if len(fields) >= 6:
            return fields[5].decode("utf-8", "replace")
    return None


def whole_runs(qrels: Columns, runs: Columns, numbers: Sequence[int], complete: bool) -> list[int]:
    """Those of the runs ``numbers`` that trec_eval evaluates whole: each that has rows in
    ``runs`` and ranks every qrels query (any that has rows, with ``complete``); at a
    qrels query a run lacks trec_eval stops (the caller then scores that run alone)."""
    present = np.intersect1d(np.asarray(numbers, dtype=np.int64), _numbers(runs.ids))
    if complete or not present.size:
        return present.tolist()
    prefixes = pa.array([_prefix(n) for n in present.tolist()], pa.string())
    repeated = np.repeat(np.arange(present.size), len(qrels))
    tiled = np.tile(np.arange(len(qrels)), present.size)
    wanted = pc.binary_join_element_wise(
        prefixes.take(pa.array(repeated)), qrels.ids.take(pa.array(tiled)), ""
    )
    found = pc.is_in(wanted, value_set=runs.ids).to_numpy(zero_copy_only=False)
    return present[found.reshape(present.size, len(qrels)).all(axis=1)].tolist()


def reports(
    engine: Engine,
    qrels: Columns,
    runs: Columns,
    runids: Mapping[int, str],
    numbers: Sequence[int],
    requests: Sequence[Request],
    options: Options,
) -> dict[int, Report]:
    """By number, the report of each run ``numbers`` (ascending) names among ``runs``
    (renamed by run number: see :func:`read_runs`; its runid ``runids[number]``), as
    :func:`trec_eval` makes it for the run alone. Each of those runs must rank each qrels
    query unless ``options.complete`` (see :func:`whole_runs`)."""
    both, run_of, queries = _scored(engine, qrels, runs, numbers, requests, options)
    judged = None if both.num_rel_judged is None else both.num_rel_judged // len(numbers)
    found = {}
    for number in numbers:
        own = np.flatnonzero(run_of == number)
        found[number] = attrs.evolve(
            both,
            query_ids=tuple(queries.take(pa.array(own)).to_pylist()),
            values={name: column[own] for name, column in both.values.items()},
            relstrings=both.relstrings.take(own) if len(both.relstrings) else both.relstrings,
            runid=runids[number],
            num_rel_judged=judged,
        )
    return found


def printed(
    engine: Engine,
    qrels: Columns,
    runs: Columns,
    runids: Mapping[int, str],
    numbers: Sequence[int],
    requests: Sequence[Request],
    options: Options,
    per_query: bool = True,
) -> dict[int, tuple[bytes, bytes]]:
    """By number, what the report :func:`reports` makes of each run prints: its per-query
    lines (``report.render(True, False)``; empty unless ``per_query``) and its ``all``
    lines (``report.render()``), formatted for all runs at once (each run ranks every
    qrels query: see :func:`whole_runs`)."""
    both, run_of, queries = _scored(engine, qrels, runs, numbers, requests, options)
    order = pc.sort_indices(pa.array(both.query_ids, pa.string())).to_numpy()  # run, query
    rows = order.reshape(len(numbers), -1)  # each run ranks the same queries: its row
    if not (run_of[rows] == np.asarray(numbers)[:, None]).all():
        raise ValueError("the runs of a batch must each rank every qrels query")
    stripped = attrs.evolve(both, query_ids=tuple(queries.to_pylist()))
    summaries = stripped.summaries(rows, [runids[number] for number in numbers])
    parts = [slice(start, start + rows.shape[1]) for start in range(0, order.size, rows.shape[1])]
    lines = stripped.per_query_parts(order, parts) if per_query else [b""] * len(parts)
    return dict(zip(numbers, zip(lines, summaries, strict=True), strict=True))


def _scored(
    engine: Engine,
    qrels: Columns,
    runs: Columns,
    numbers: Sequence[int],
    requests: Sequence[Request],
    options: Options,
) -> tuple[Report, np.ndarray, pa.Array]:
    """The report of the runs ``numbers`` scored as one, and of its queries, each one's
    run number and query id (without the run's)."""
    from engine.analysis.trec_eval import trec_eval

    rows = np.flatnonzero(np.isin(_numbers(runs.ids), numbers))
    if rows.size < len(runs):
        runs = runs.take(rows)
    samples = _repeated(qrels, numbers)
    joined = _beside(qrels, samples, runs)
    both = trec_eval(engine, samples, runs, requests, options, joined=joined)
    ids = pa.array(both.query_ids, pa.string())
    return both, _numbers(ids), pc.utf8_slice_codeunits(ids, _DIGITS + 1)


def _repeated(qrels: Columns, numbers: Sequence[int]) -> Columns:
    """The qrels once under each run's names (run by run), one vocabulary shared."""
    repeated = qrels.take(np.tile(np.arange(len(qrels)), len(numbers)))
    ids = pa.array(np.repeat([_prefix(n) for n in numbers], len(qrels)), pa.string())
    ids = pc.binary_join_element_wise(ids, repeated.ids, "")
    table = repeated.table.set_column(repeated.table.column_names.index("id"), "id", ids)
    return Columns(table, qrels.docs)


def _beside(qrels: Columns, samples: Columns, runs: Columns) -> Columns | None:
    """The runs beside ``samples`` (the qrels repeated under each run's names by
    :func:`_repeated`: row ``i`` is the qrels' row ``i % len(qrels)``, their vocabulary
    shared) as :func:`engine.evaluation.pipeline.aligned` puts them: each
    sample's run row beside it (a row of nulls where the run lacks the query), each
    ranked document coded as its query's label of it, else after the qrels' vocabulary
    (the run's own code, past it). One lookup of (query, document) for the batch, where
    ``aligned`` matches row by row the qrels' labels repeated for every run. None (the
    caller aligns) when the qrels hold other labels than relevance, or the runs other
    documents than rankings."""
    kinds = (*LABEL_KINDS[1:], "groups")
    if any(qrels.column(kind).null_count < len(qrels) for kind in kinds) or any(
        runs.column(kind).null_count < len(runs) for kind in ID_LISTS[1:]
    ):
        return None
    rows = pc.index_in(samples.ids, value_set=runs.ids).fill_null(-1)
    rows = rows.to_numpy(zero_copy_only=False)
    in_order = rows.size == len(runs) and bool((rows == np.arange(rows.size)).all())
    outputs = runs if in_order else runs.take(rows)
    retrieved = outputs.column("retrieved")
    codes, sizes = outputs.doc_codes("retrieved")
    label_rows, label_codes = owned_codes(qrels.column("relevance"))
    names = pc.dictionary_encode(one_array(qrels.docs.take(pa.array(label_codes))))
    width = len(names.dictionary) + 1
    label_keys = label_rows * width + names.indices.to_numpy(zero_copy_only=False)
    name = pc.index_in(runs.docs.take(pa.array(codes)), value_set=names.dictionary)
    query = np.repeat(np.arange(len(samples)) % max(1, len(qrels)), sizes)
    keys = query * width + name.fill_null(width - 1).to_numpy(zero_copy_only=False)
    label = pc.index_in(pa.array(keys), value_set=pa.array(label_keys)).fill_null(-1)
    at = label.to_numpy(zero_copy_only=False)  # (a query labels a document once)
    hit = at >= 0
    matched = np.where(hit, label_codes[at], len(qrels.docs) + codes.astype(np.int64))
    docs = qrels.docs
    if not hit.all():  # both vocabularies, neither copied
        docs = pa.chunked_array(chunks_of(qrels.docs) + chunks_of(runs.docs))
    mask = retrieved.is_null().to_numpy(zero_copy_only=False)
    column = list_array(offsets_of(sizes), pa.array(matched.astype(np.int32)), mask)
    table = samples.table
    for key in outputs.table.column_names:
        if key != "id":
            found = column if key == "retrieved" else outputs.column(key)
            table = table.append_column(key, found)
    return Columns(table, docs)
