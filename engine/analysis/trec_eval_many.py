"""Many runs against one qrels in one evaluation (``slotwise trec-eval QRELS RUN…``): each
run's queries renamed ``<run number><RUN_SEPARATOR><query>``, the qrels repeated under each
run's names, all of it scored as one dataset by :func:`~engine.analysis.trec_eval.trec_eval`
and the report cut back into one per run. trec_eval scores each query on its own, so each
run's report is the one it gets alone; what a batch saves is the per-call cost (tens of
small Arrow and NumPy calls per run), which dominates on small collections."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.analysis.trec_eval import Options, Report, Request, trec_eval
from engine.evaluation.api import Engine
from engine.io.columns import Columns, stack

__all__ = ["RUN_SEPARATOR", "batches", "reports"]

#: Joins a run's number and a query id: it sorts before any character of an id.
RUN_SEPARATOR = "\x1e"
#: The most qrels rows (the qrels' queries times the runs) scored in one batch.
BATCH_ROWS = 200_000
_DIGITS = 6


def batches(count: int, qrels_rows: int) -> list[range]:
    """The runs' positions in batches of at most :data:`BATCH_ROWS` repeated qrels rows
    (one run alone where its qrels are larger)."""
    size = max(1, BATCH_ROWS // max(1, qrels_rows))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def _renamed(columns: Columns, number: int) -> Columns:
    ids = pc.binary_join_element_wise(f"{number:0{_DIGITS}d}{RUN_SEPARATOR}", columns.ids, "")
    index = columns.table.column_names.index("id")
    return Columns(columns.table.set_column(index, "id", ids), columns.docs)


def reports(
    engine: Engine,
    qrels: Columns,
    runs: Sequence[tuple[Columns, str]],
    requests: Sequence[Request],
    options: Options,
    per_query: bool = False,
) -> list[tuple[Report, bytes | None]]:
    """Each run's (run, runid) report, as :func:`trec_eval` makes it for the run alone,
    and with ``per_query`` the bytes of its per-query lines (as ``report.render(True,
    False)``), formatted for all runs at once. Every run must rank each qrels query
    unless ``options.complete`` (where trec_eval would stop, the caller scores that run
    alone)."""
    count = len(runs)
    both = trec_eval(
        engine,
        stack([_renamed(qrels, n) for n in range(count)]),
        stack([_renamed(run, n) for n, (run, _) in enumerate(runs)]),
        requests,
        options,
    )
    ids = pa.array(both.query_ids, pa.string())
    numbers = pc.cast(pc.utf8_slice_codeunits(ids, 0, _DIGITS), pa.int64()).to_numpy()
    queries = pc.utf8_slice_codeunits(ids, _DIGITS + 1)
    judged = None if both.num_rel_judged is None else both.num_rel_judged // count
    lines: list[bytes | None] = [None] * count
    if per_query:  # the order by run, then query: each run's rows one part of it
        order = pc.sort_indices(ids).to_numpy()
        bounds = np.searchsorted(numbers[order], np.arange(count + 1)).tolist()
        parts = [slice(bounds[n], bounds[n + 1]) for n in range(count)]
        stripped = attrs.evolve(both, query_ids=tuple(queries.to_pylist()))
        lines = list(stripped.per_query_parts(order, parts))
    found = []
    for number, (_, runid) in enumerate(runs):
        rows = np.flatnonzero(numbers == number)
        report = attrs.evolve(
            both,
            query_ids=tuple(queries.take(pa.array(rows)).to_pylist()),
            values={name: column[rows] for name, column in both.values.items()},
            relstrings=both.relstrings.take(rows) if len(both.relstrings) else both.relstrings,
            runid=runid,
            num_rel_judged=judged,
        )
        found.append((report, lines[number]))
    return found
