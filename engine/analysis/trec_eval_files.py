"""What ``slotwise trec-eval`` reads beyond slotwise's TREC readers, as trec_eval 10 reads
it: the run from standard input (``-``) and with infinite scores, ``-R qrels_jg``'s
judgment groups, the checks trec_eval makes of qrels and run before and while it
evaluates (with its exit statuses), and ``-Z``'s z-score file. The preference formats
are read in :mod:`engine.analysis.trec_eval_prefs`."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.analysis.trec_eval import GROUP_SEPARATOR, Stop
from engine.errors import InputError
from engine.io import grammar, trec
from engine.io.columns import Columns, lengths, offsets_of
from engine.io.files import open_binary

__all__ = [
    "ZScores",
    "before",
    "by_judgment_group",
    "first_stop",
    "read_qrels",
    "read_qrels_jg",
    "read_run",
    "read_zscores",
]


def read_qrels(path: Path) -> Columns:
    """The qrels, refusing what trec_eval cannot evaluate or reads by accident: an empty
    file or one without a judgement, a label that C's atol does not read whole (trec_eval
    reads ``1.5``, ``1e3`` and ``1_0`` as 1, ``rel`` and full-width digits as 0), a query
    without a label >= 0: status 2."""
    if path.is_file() and path.stat().st_size == 0:
        raise Stop(f"cannot read qrels file '{path}': it is empty", 2)
    _integer_labels(path)
    qrels = trec.read_qrels(path)
    labels = pc.list_flatten(qrels.column("relevance")).field("label").to_numpy()
    if labels.size == 0:
        raise Stop(f"qrels file '{path}' has no judgement", 2)
    sizes = lengths(qrels.column("relevance"))
    maxima = np.full(sizes.size, -np.inf)
    judged = sizes > 0
    maxima[judged] = np.maximum.reduceat(labels, offsets_of(sizes)[:-1][judged])
    if (maxima < 0).any():
        qid = qrels.ids[int(np.flatnonzero(maxima < 0)[0])].as_py()
        raise Stop(
            f"qrels file '{path}': query '{qid}' has no label >= 0 (trec_eval then reads "
            "memory it never set, or crashes)",
            2,
        )
    return qrels


#: A qrels line whose label (its fourth field) is not an integer (:data:`grammar.INTEGER`).
_NOT_INTEGER = re.compile(
    rb"^[ \t]*[^#\s]\S*[ \t]+\S+[ \t]+\S+[ \t]+(?![+-]?[0-9]+[ \t\r]*$)(\S+)[ \t\r]*$", re.M
)


def _integer_labels(path: Path) -> None:
    """Refuse (status 2) the first qrels line whose label is not an integer, naming it."""
    with open_binary(path) as handle:
        text = handle.read()
    found = _NOT_INTEGER.search(text)
    if found is not None:
        line = text.count(b"\n", 0, found.start()) + 1
        label = found.group(1).decode("utf-8", "replace")
        raise Stop(f"qrels file '{path}' line {line}: label '{label}' is not an integer", 2)


def read_qrels_jg(path: Path) -> Columns:
    """A ``-R qrels_jg`` file (``qid group docno rel``: the second field names the
    judgment group) as qrels of one sample per query and group, with ids
    ``qid<GROUP_SEPARATOR>group``, checked as :func:`read_qrels` checks qrels."""
    try:
        text = path.read_bytes()
    except OSError as error:
        raise Stop(f"cannot read qrels file '{path}': {error.strerror}", 2) from None
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        if len(fields) != 4:
            raise Stop(f"qrels file '{path}' line {number}: expected 'qid group docno rel'", 2)
        qid, group, doc, label = fields
        lines.append(b"%s%s%s 0 %s %s\n" % (qid, GROUP_SEPARATOR.encode(), group, doc, label))
    with tempfile.TemporaryDirectory() as directory:
        grouped = Path(directory) / path.name
        grouped.write_bytes(b"".join(lines))
        return read_qrels(grouped)


def by_judgment_group(run: Columns, qrels: Columns) -> Columns:
    """The run's ranking of each query repeated for each of its judgment groups (the
    samples of :func:`read_qrels_jg`), under their ids; groups of a query the run lacks
    have none."""
    queries = pa.array([q.split(GROUP_SEPARATOR)[0] for q in qrels.ids.to_pylist()], pa.string())
    rows = pc.index_in(queries, value_set=run.ids).to_numpy(zero_copy_only=False)
    present = ~np.isnan(rows.astype(np.float64))
    taken = run.take(rows[present].astype(np.int64))
    column = taken.table.column_names.index("id")
    table = taken.table.set_column(column, "id", qrels.ids.filter(pa.array(present)))
    return Columns(table, taken.docs)


def read_run(name: str) -> tuple[Columns, str]:
    """The run and its tag (trec_eval's runid: the last line's); ``-`` reads standard
    input, as trec_eval does. An empty run, or one without a ranked document, is refused
    (status 2)."""
    if name != "-":
        return _read_run(Path(name), name)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "run"
        path.write_bytes(sys.stdin.buffer.read())
        return _read_run(path, "-")


def _read_run(path: Path, name: str) -> tuple[Columns, str]:
    if path.is_file() and path.stat().st_size == 0:
        raise Stop(f"cannot read results file '{name}': it is empty", 2)
    try:
        run = trec.read_run(path)
    except InputError as error:
        if not all("is not a finite number" in p.message for p in error.problems):
            raise
        run = _infinite_scores(path, error)
    if len(pc.list_flatten(run.column("retrieved"))) == 0:
        raise Stop(f"results file '{name}' has no ranked document", 2)
    return run, trec.run_tag(path)


#: A score C's atof reads as written: a number of the grammar (which may overflow to
#: infinity, ``1e400``), or ``inf``/``infinity`` with a sign or none.
_INFINITE = re.compile(rb"(?i:[+-]?inf(?:inity)?)|" + grammar.NUMBER.pattern.encode())


def _infinite_scores(path: Path, error: InputError) -> Columns:
    """A run some of whose scores overflow to infinity (``1e400``, which trec_eval reads as
    +inf and ranks first): each score is replaced by its place among the run's distinct
    scores, which keeps trec_eval's order and ties, and the run read again. Any other
    score that is not a number of the grammar (NaN, ``abc``, ``1_000``) is refused,
    ``error`` naming it."""
    lines = [line.split() for line in path.read_bytes().splitlines()]
    scored = [f for f in lines if f and not f[0].startswith(b"#") and len(f) >= 6]
    if not all(map(_INFINITE.fullmatch, (f[4] for f in scored))):
        raise error
    scores = np.array([float(f[4]) for f in scored])
    places = np.searchsorted(np.unique(scores), scores)
    for fields, place in zip(scored, places.tolist(), strict=True):
        fields[4] = str(place).encode()
    with tempfile.TemporaryDirectory() as directory:
        ranked = Path(directory) / "run"
        ranked.write_bytes(b"".join(b" ".join(f) + b"\n" for f in lines if f))
        return trec.read_run(ranked)


def first_stop(ids: pa.Array, run: pa.Array, complete: bool) -> tuple[str, Stop] | None:
    """Where trec_eval 10 stops evaluating, taking the qrels queries (``ids``) in id order:
    unless ``complete``, at the first query the run (its query ids: ``run``) lacks
    (status 4, "result qid not found"). None when it evaluates every query."""
    if complete:
        return None
    order = pc.sort_indices(ids).to_numpy()
    missing = ~pc.is_in(ids, value_set=run).to_numpy(zero_copy_only=False)[order]
    if not missing.any():
        return None
    qid = ids[int(order[int(np.argmax(missing))])].as_py()
    message = f"result qid '{qid}' not found in the run (give -c to score it as empty)"
    return qid, Stop(message, 4)


def before(qrels: Columns, qid: str) -> Columns:
    """The qrels queries whose id sorts (byte by byte) before ``qid``."""
    keep = pc.less(qrels.ids, pa.scalar(qid, pa.string())).to_numpy(zero_copy_only=False)
    return qrels.take(np.flatnonzero(keep))


@attrs.frozen
class ZScores:
    """``-Z``'s file: per query and measure name, the mean and standard deviation that
    turn a value into a z-score."""

    table: dict[tuple[str, str], tuple[float, float]]

    def queries(self) -> set[str]:
        return {qid for qid, _ in self.table}


def read_zscores(path: Path) -> ZScores:
    """Lines ``qid measure mean stddev`` (trec_eval's get_zscores); ``#`` lines and blank
    lines are skipped. A malformed line is refused (status 2)."""
    table = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise Stop(f"cannot read z-score file '{path}': {error.strerror}", 2) from None
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        try:
            if len(fields) != 4:
                raise ValueError
            table[fields[0], fields[1]] = (float(fields[2]), float(fields[3]))
        except ValueError:
            raise Stop(
                f"z-score file '{path}' line {number}: expected 'qid measure mean stddev'", 2
            ) from None
    return ZScores(table)
