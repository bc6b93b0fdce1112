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

from engine.analysis.trec_eval_measures import GROUP_SEPARATOR, Stop
from engine.errors import InputError
from engine.io import trec
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
    """The qrels, each label as C's atol reads it, as trec_eval reads it (``1.5``, ``1e3``
    and ``1_0`` are 1, ``rel`` and full-width digits 0), refusing what trec_eval cannot
    evaluate: an empty file or one without a judgement, a query without a label >= 0:
    status 2."""
    if path.is_file() and path.stat().st_size == 0:
        raise Stop(f"cannot read qrels file '{path}': it is empty", 2)
    with tempfile.TemporaryDirectory() as directory:
        read = _atol_labels(_as_text(path, "qrels", Path(directory))[0], Path(directory))
        try:
            qrels = trec.read_qrels(read)
        except InputError as error:  # named by the user's file, not the copy
            copy = str(read)
            problems = [
                p._replace(source=str(path)) if p.source == copy else p for p in error.problems
            ]
            raise InputError(problems, error.summary) from None
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


#: The start of a field that C's atol reads (glibc's strtol, base 10, ASCII digits).
_ATOL = re.compile(rb"[+-]?[0-9]+")
#: The start of a field that C's atof reads (glibc's strtod): hexadecimal, infinity, NaN
#: or decimal.
_ATOF = re.compile(
    rb"[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    rb"|(?i:inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)"
    rb"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)
_LONG = 2**63


def atol(field: bytes) -> int:
    """``field`` as C's ``atol`` reads it: its leading integer (0 without one), held to
    a 64-bit ``long``."""
    found = _ATOL.match(field)
    return 0 if found is None else max(-_LONG, min(_LONG - 1, int(found.group())))


def atof(field: bytes) -> float:
    """``field`` as C's ``atof`` reads it: its leading number (0 without one)."""
    found = _ATOF.match(field)
    if found is None:
        return 0.0
    text = found.group().decode("ascii")
    if "x" in text.lower():
        return float.fromhex(text)
    return float(text.split("(")[0])


def _integer_labels(path: Path) -> bool:
    """Whether every line of ``path`` ends in an integer label (RE2 over pyarrow's lines:
    a fifth of the time of a regex scan of the bytes in Python)."""
    import pyarrow.csv as csv

    try:
        with open_binary(path) as handle:
            lines = csv.read_csv(
                handle,
                read_options=csv.ReadOptions(column_names=["line"]),
                parse_options=csv.ParseOptions(delimiter="\x1f", quote_char=False),
                convert_options=csv.ConvertOptions(column_types={"line": pa.string()}),
            ).column("line")
    except pa.ArrowInvalid:  # not UTF-8 text, or no line at all: read it line by line
        return False
    return bool(pc.all(pc.match_substring_regex(lines, r"\s[+-]?[0-9]+\s*$")).as_py())


def _atol_labels(path: Path, directory: Path) -> Path:
    """``path`` itself when every label is an integer, else a copy in ``directory`` with
    each label written as atol reads it."""
    if _integer_labels(path):
        return path
    with open_binary(path) as handle:
        text = handle.read()
    lines = []
    for raw in text.splitlines():
        fields = raw.split()
        if len(fields) == 4 and not fields[0].startswith(b"#"):
            fields[3] = str(atol(fields[3])).encode()
        lines.append(b" ".join(fields))
    copy = directory / path.name
    copy.write_bytes(b"\n".join(lines) + b"\n")
    return copy


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


def _as_text(path: Path, kind: str, directory: Path) -> tuple[Path, str | None]:
    """``path`` when it is TREC text, else its table (Parquet, CSV, TSV, JSONL, Arrow:
    :mod:`engine.io.tables_in`) written as TREC text in ``directory``, with the run's
    tag (None: the text's own)."""
    from engine.io import sniff, tables_in

    if tables_in.format_of(path) == sniff.TREC:
        return path, None
    text = directory / f"{path.name}.{kind}"
    return text, tables_in.to_trec(path, kind, text)


def _read_run(path: Path, name: str) -> tuple[Columns, str]:
    from engine.io import sniff, tables_in

    if path.is_file() and path.stat().st_size == 0:
        raise Stop(f"cannot read results file '{name}': it is empty", 2)
    if tables_in.format_of(path) == sniff.TREC:  # (no folder made for it: 0.1 ms a run)
        return _read_text_run(path, name)
    with tempfile.TemporaryDirectory() as directory:
        text = Path(directory) / f"{path.name}.run"
        tag = tables_in.to_trec(path, "run", text)
        try:
            return _read_text_run(text, name)[0], tag
        except InputError as error:  # named by the user's file (line: its row + 1)
            copy = str(text)
            problems = [p._replace(source=name) if p.source == copy else p for p in error.problems]
            raise InputError(problems, error.summary.replace(copy, name)) from None


def _read_text_run(path: Path, name: str) -> tuple[Columns, str]:
    try:
        run = trec.read_run(path)
    except InputError as error:
        if not all("is not a finite number" in p.message for p in error.problems):
            raise
        run = _atof_scores(path, error)
    if len(pc.list_flatten(run.column("retrieved"))) == 0:
        raise Stop(f"results file '{name}' has no ranked document", 2)
    return run, trec.run_tag(path)


def _atof_scores(path: Path, error: InputError) -> Columns:
    """A run some of whose scores are not numbers of the grammar, read as trec_eval reads
    them (C's atof: ``1e400`` and ``inf`` +inf, ``abc`` 0, ``1_000`` 1, ``0x1F`` 31): each
    score is replaced by its place among the run's distinct scores, which keeps trec_eval's
    order and ties, and the run read again. A NaN, which trec_eval's sort orders as it
    happens to, is refused, ``error`` naming it."""
    lines = [line.split() for line in path.read_bytes().splitlines()]
    scored = [f for f in lines if f and not f[0].startswith(b"#") and len(f) >= 6]
    scores = np.array([atof(f[4]) for f in scored])
    if np.isnan(scores).any():
        raise error
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
