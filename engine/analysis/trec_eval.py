"""trec_eval 10 over slotwise metrics: its measure names and parameters (``-m P.5,10``,
read as its ``te_init_meas_*`` read them), its measure sets, its query set and options
(``-c``, ``-M``, ``-l``, ``-J``, ``-Z``) and its output, byte for byte, as ``slotwise
trec-eval`` prints it, the ``all`` lines added as its doubles add.

Each trec_eval measure that is a per-query score is a slotwise metric alias (``P`` is
``retrieval-precision-at-k``, ``bpref`` is ``retrieval-bpref``, ...); this module maps
names, picks the queries, and aggregates and prints as trec_eval does. ``utility``'s
coefficients, ``11pt_avg`` over given levels and the judgment-group averages are made
here from slotwise values; the preference measures are in
:mod:`engine.analysis.trec_eval_prefs`.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.analysis.trec_eval_measures import (
    GROUP_SEPARATOR,
    IPREC,
    MEASURE_SETS,
    MEASURES,
    PREFS_MEASURES,
    Measure,
    Stop,
)
from engine.evaluation.api import Dataset, Engine
from engine.evaluation.batch import Batch, BoolArray, FloatArray, trec_eval_level_order
from engine.evaluation.executors import ThreadExecutor
from engine.evaluation.metric import metric_label
from engine.evaluation.pipeline import aligned, default_chunk_size, slices
from engine.io.columns import Columns, counts_up, lengths, list_array, offsets_of

__all__ = [
    "GROUP_SEPARATOR",
    "MEASURES",
    "MEASURE_SETS",
    "PREFS_MEASURES",
    "Options",
    "Report",
    "Request",
    "Stop",
    "judgment_groups",
    "measure_lines",
    "metric_specs",
    "parse_measures",
    "relevance_level",
    "trec_eval",
    "zscored",
]

MIN_GEO_MEAN = 0.00001  # trec_eval's floor before a geometric mean's log


@attrs.frozen
class Request:
    """One ``-m`` measure with its parameters as given (None: the defaults)."""

    name: str
    params: str | None = None


def parse_measures(args: Sequence[str]) -> list[Request]:
    """``-m`` values (``P.5,10``, ``all_trec``, ``iprec_at_recall..10,.25``) as requests in
    trec_eval's order (the order of its measure table), each measure once, with the
    parameters of its first ``-m`` that has some (as trec_eval's ``mark_measure``). An
    unknown name or an empty parameter is a :class:`Stop` with status 1."""
    marked: set[str] = set()
    params: dict[str, str] = {}
    for arg in args or ["official"]:
        name, dot, rest = arg.partition(".")
        if dot and not rest:
            raise Stop(f"improper measure in parameter {name!r} (nothing after the dot)", 1)
        if name in MEASURE_SETS:
            marked.update(MEASURE_SETS[name])
        elif name in MEASURES:
            marked.add(name)
        else:
            raise Stop(f"illegal measure {name!r} ({_closest(name)})", 1)
        if dot:
            params.setdefault(name, rest)
    requests = [Request(name, params.get(name)) for name in MEASURES if name in marked]
    for request in requests:
        _lines_of(request, 1.0)  # bad parameters are refused before any file is read
    return requests


def _closest(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(MEASURES) + list(MEASURE_SETS), n=3)
    return f"did you mean {', '.join(close)}?" if close else "see slotwise trec-eval --help"


@attrs.frozen
class Line:
    """One printed measure: its name (``P_5``), its slotwise spec (None: computed here),
    its measure, and the numbers its value is made from (``utility``'s coefficients,
    ``11pt_avg``'s recall levels, ``relstring``'s length)."""

    name: str
    spec: str | None
    measure: Measure
    numbers: tuple[float, ...] = ()
    key: str = ""  # the measure's name in MEASURES
    gains: tuple[tuple[int, float], ...] = ()  # level=gain parameters


def measure_lines(requests: Sequence[Request], level: float) -> list[Line]:
    """Every printed measure of the requests, in order (``-l`` ``level``)."""
    return _lines(requests, level)


def _lines(requests: Sequence[Request], level: float) -> list[Line]:
    """Every printed measure of the requests, in order."""
    return [line for request in requests for line in _lines_of(request, level)]


def _lines_of(request: Request, level: float) -> list[Line]:
    return [attrs.evolve(line, key=request.name) for line in _parsed(request, level)]


def _parsed(request: Request, level: float) -> list[Line]:
    measure, name, raw = MEASURES[request.name], request.name, request.params
    threshold = repr(float(level))
    if measure.kind == "single":
        if raw is not None:
            raise Stop(f"{name}.{raw}: measure {name} takes no parameters", 2)
        return [Line(name, measure.spec.format(l=threshold) if measure.spec else None, measure)]
    params = tuple(raw.split(",")) if raw is not None else measure.defaults
    what = f"{name}.{raw}"
    if measure.kind == "cut_long":
        cutoffs = sorted(_atol(p, what) for p in params)
        if cutoffs[0] <= 0:
            raise Stop(f"{what}: a cutoff must be positive", 2)
        _no_duplicates(cutoffs, what)
        spec = measure.spec or ""
        return [
            Line(f"{name}_{c}", spec.format(p=c, l=threshold), measure, (float(c),))
            for c in cutoffs
        ]
    if measure.kind == "cut_double":
        values = sorted(_atof(p, what) for p in params)
        _no_duplicates(values, what)
        if name == "iprec_at_recall" and not 0 <= values[0] <= values[-1] <= 1:
            raise Stop(f"{what}: a recall level must lie in [0, 1]", 2)
        spec = measure.spec or ""
        return [
            Line(f"{name}_{v:3.2f}", spec.format(p=repr(v), l=threshold), measure, (v,))
            for v in values
        ]
    printed = f"{name}_{raw}" if raw is not None else name
    if measure.kind == "numbers":
        numbers = tuple(_atof(p, what) for p in params)
        if name == "11pt_avg" and not all(0 <= n <= 1 for n in numbers):
            raise Stop(f"{what}: a recall level must lie in [0, 1]", 2)
        beta = measure.spec.format(p=repr(numbers[0]), l=threshold) if measure.spec else None
        return [Line(printed, beta, measure, numbers)]
    pairs = _pairs(raw, what) if raw is not None else []
    if name in ("rbp", "rbp_resid"):
        return [Line(printed, _rbp_spec(measure, pairs, what), measure)]
    levels = [(int(level), gain) for level, gain in pairs if _is_int(level)]
    gains = dict(levels)
    if len(gains) < len(levels):
        raise Stop(f"{what}: a level given two gains (trec_eval 10 then uses each)", 2)
    text = f"gains={gains!r}" if gains else ""
    if gains and name != "ideal_dcg":  # trec_eval's levels (-1: not in the qrels, -2: < 0)
        text += ", levels=trec_eval10"
    spec = (measure.spec or "").format(gains=text, l=threshold).replace("(, ", "(")
    spec = spec.replace(", )", ")").replace("()", "")
    return [Line(printed, spec or None, measure, gains=tuple(gains.items()))]


#: The measures whose ideal ranking walks trec_eval 10's sorted gain levels.
_WALKED = ("ndcg", "ndcg_rel", "Rndcg", "G")


def _walk_checked(lines: Sequence[Line], qrels: Columns) -> None:
    """Refuse gain levels given out of increasing order where trec_eval 10 would rank
    them otherwise than in increasing order: its sort of gain levels keeps the given
    order of gains less than 1 apart (or 2^31 or more), and the metrics'
    ``levels=trec_eval10`` sorts the levels of their gain map, which is in increasing
    order (status 2)."""
    labels = pc.list_flatten(qrels.column("relevance")).field("label").to_numpy()
    top = int(labels.max(initial=-1))  # the highest level of any query
    for line in lines:
        increasing = tuple(sorted(line.gains))
        if line.key not in _WALKED or line.gains == increasing:
            continue
        if any(
            trec_eval_level_order(line.gains, count) != trec_eval_level_order(increasing, count)
            for count in range(max(top, 0) + 2)
        ):
            raise Stop(
                f"{line.name}: trec_eval 10 ranks these gain levels by the order they are "
                "given in (its sort compares two gains by their difference cut to a C "
                "int); slotwise follows it for levels given in increasing order only",
                2,
            )


def _rbp_spec(measure: Measure, pairs: list[tuple[str, float]], what: str) -> str:
    """rbp's spec: ``p=`` sets the persistence; a gain for a level (``rbp.2=5``) is
    refused (trec_eval then rescales gains with variables it never initialises)."""
    if any(_is_int(level) for level, _ in pairs):
        raise Stop(f"{what}: rbp takes no gains (trec_eval's rescaling of them is undefined)", 2)
    p = [value for level, value in pairs if level == "p"]
    if p and not 0 <= p[-1] < 1:
        raise Stop(f"{what}: p must lie in [0, 1)", 2)
    return (measure.spec or "").format(p=f"p={p[-1]!r}" if p else "").replace("()", "")


def _pairs(raw: str, what: str) -> list[tuple[str, float]]:
    """``name=value`` pairs as trec_eval's ``get_param_pairs`` reads them: every comma
    separated part needs one ``=``; a value that is not a number is refused."""
    pairs = []
    for part in raw.split(","):
        level, equals, value = part.partition("=")
        if not equals or not level or "=" in value:
            raise Stop(f"{what}: {part!r} is not a level=gain pair (ndcg.1=3,2=9)", 2)
        pairs.append((level, _atof(value, what)))
    return pairs


def _is_int(text: str) -> bool:
    return text.lstrip("+-").isdigit()


_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _atof(text: str, what: str) -> float:
    """``text`` as C's atof reads it; text that is no number (which atof reads as 0) is
    refused."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise Stop(f"{what}: measure parameter {text!r} is not a number", 2)
    value = float(text)
    if not math.isfinite(value):
        raise Stop(f"{what}: measure parameter {text!r} is not a finite number", 2)
    return value


def _atol(text: str, what: str) -> int:
    """``text`` as C's atol reads it: the integer it starts with (``23.4`` is 23); text
    that does not start with one is refused."""
    match = re.match(r"\s*[+-]?\d+", text)
    if match is None or _NUMBER.fullmatch(text) is None:
        raise Stop(f"{what}: measure parameter {text!r} is not a number", 2)
    return int(match.group())


def _no_duplicates(values: Sequence[float], what: str) -> None:
    if any(a == b for a, b in itertools.pairwise(values)):
        raise Stop(f"{what}: duplicate cutoffs", 2)


def relevance_level(text: str) -> int:
    """``-l``'s value as trec_eval reads it (C's atol: ``1.5`` is 1); text that does not
    start with an integer, or a negative level (which makes trec_eval count its unjudged
    markers as relevant), is refused."""
    match = re.match(r"\s*[+-]?\d+", text)
    if match is None or int(match.group()) < 0:
        raise Stop(f"-l {text!r}: the relevance level must be an integer >= 0", 2)
    return int(match.group())


@attrs.frozen
class Options:
    """trec_eval's query-set and ranking options: ``-c`` (every query of the qrels, a
    missing run scoring as an empty ranking), ``-M`` (the first N documents of each
    ranking), ``-l`` (the least label counted relevant), ``-J`` (judged documents only),
    ``-N`` (the number of documents in the collection, which utility's fourth
    coefficient weighs the non-relevant documents not retrieved with)."""

    complete: bool = False
    max_docs: int | None = None
    level: float = 1.0
    judged_only: bool = False
    collection: int = 0


@attrs.frozen
class Report:
    """The values of ``slotwise trec-eval``: per printed measure, one value per query (in
    query id order, as trec_eval evaluates them), and the ``all`` lines made as trec_eval
    makes them: each query's value added in that order to a double, then divided."""

    lines: tuple[Line, ...]
    query_ids: tuple[str, ...]
    values: dict[str, FloatArray]
    relstrings: pa.Array  # quoted, each ending in a newline; empty unless asked for
    runid: str
    num_rel_judged: int | None = None  # -c: labels > 0 of every qrels query (num_rel all)
    zscores: bool = False  # values are z-scores (-Z): printed "Z<name>", all as %6.4f

    def render(self, per_query: bool = False, summary: bool = True) -> bytes:
        """The output (see :meth:`write`) as bytes."""
        buffer = io.BytesIO()
        self.write(buffer, per_query, summary)
        return buffer.getvalue()

    def write(self, stream: BinaryIO, per_query: bool = False, summary: bool = True) -> None:
        """Write the output as trec_eval prints it: with ``per_query`` every query's lines
        (in query id order), then the ``all`` lines unless ``summary`` is False."""
        order = self._order()
        if per_query and self.query_ids:
            self._write_per_query(stream, order)
        if summary:
            stream.write(self.summaries(order[None, :])[0])

    def summaries(
        self, rows: npt.NDArray[np.int64], runids: Sequence[str] | None = None
    ) -> list[bytes]:
        """The ``all`` lines of the queries of each row of ``rows`` (in the order they
        print), as :meth:`write` prints them: one row, this report's; or, of a report of
        several runs scored together, one row per run (each with as many queries: the
        batch of engine/analysis/trec_eval_many.py), ``runids`` theirs."""
        ids = [self.runid] * len(rows) if runids is None else runids
        texts: list[list[str]] = [[] for _ in ids]
        for line in self.lines:
            values = self._summaries(line, rows, ids)
            if values is not None:
                name = self._name(line)
                for text, value in zip(texts, values, strict=True):
                    text.append(_print(name, "all", value) + "\n")
        return ["".join(text).encode() for text in texts]

    def _write_per_query(self, stream: BinaryIO, order: npt.NDArray[np.int64]) -> None:
        """Every query's lines, assembled as bytes in blocks of queries (see
        :meth:`_segments`), packed on threads when there are several blocks."""
        segments = self._segments(order)
        if len(segments) == 0:
            return
        blocks = [
            slice(start, min(start + _BLOCK_QUERIES, order.size))
            for start in range(0, order.size, _BLOCK_QUERIES)
        ]
        if len(blocks) == 1:  # no pool of threads to start for one block (many small runs)
            stream.write(_packed(segments, blocks[0])[0])
            return
        for packed, _ in ThreadExecutor().map(functools.partial(_packed, segments), blocks):
            stream.write(packed)

    def per_query_parts(self, order: npt.NDArray[np.int64], parts: Sequence[slice]) -> list[bytes]:
        """The per-query lines of the queries at each part of ``order`` (the rows in the
        order they print), the values formatted once for all parts: the reports of many
        runs scored together cut apart (engine/analysis/trec_eval_many.py)."""
        segments = self._segments(order)
        if not segments:
            return [b"" for _ in parts]
        blocks = [
            _packed(segments, slice(start, min(start + _BLOCK_QUERIES, order.size)))
            for start in range(0, order.size, _BLOCK_QUERIES)
        ]
        text = b"".join(packed for packed, _ in blocks)
        ends = offsets_of(np.concatenate([sizes for _, sizes in blocks])).tolist()
        return [text[ends[part.start] : ends[part.stop]] for part in parts]

    def _segments(self, order: npt.NDArray[np.int64]) -> list[bytes | Cells]:
        """The per-query lines as segments for :func:`_packed`: each measure's values
        formatted once as a column of cells, sorted by ``order``, beside its name and the
        query ids; a block of rows is laid out side by side in a byte matrix, then packed."""
        ids = pa.array(self.query_ids, pa.string())
        query = _sorted(_string_cells(ids, b"\t"), order)
        segments: list[bytes | Cells] = []
        for line in self.lines:
            if line.key == "relstring":
                cells = _string_cells(self.relstrings)
            elif line.measure.summary in ("gm", "special"):
                continue
            else:
                cells = _cells(self.values[line.name], self._integer(line))
            segments += [f"{self._name(line):<22}\t".encode(), query, _sorted(cells, order)]
        return segments

    def _name(self, line: Line) -> str:
        """The printed name: ``Z`` before it for a z-score (as trec_eval's ``%s%-22s``)."""
        return f"Z{line.name:<22}" if self.zscores and line.key not in _UNSCORED else line.name

    def _integer(self, line: Line) -> bool:
        return line.measure.integer and not self.zscores

    def _order(self) -> npt.NDArray[np.int64]:
        """The queries in trec_eval's order: by query id, byte by byte."""
        return pc.sort_indices(pa.array(self.query_ids, pa.string())).to_numpy()

    def _summaries(
        self, line: Line, rows: npt.NDArray[np.int64], runids: Sequence[str]
    ) -> Sequence[str] | None:
        """The line's ``all`` value of each row's queries (None: no ``all`` line)."""
        count, queries = rows.shape
        if line.name == "runid":
            return runids
        if line.name == "num_q":
            return [_value(queries, self._integer(line))] * count
        if line.name == "num_rel" and self.num_rel_judged is not None:  # (the runs' total)
            return [_value(self.num_rel_judged // count, self._integer(line))] * count
        if line.measure.summary == "none" or not queries:
            return None
        columns = self.values[line.name][rows]
        if line.measure.summary == "gm":  # (z-scores are of the logarithms already)
            logs = columns if self.zscores else np.log(np.maximum(columns, MIN_GEO_MEAN))
            return [_value(math.exp(t / queries), False) for t in _added_rows(logs).tolist()]
        if line.measure.integer:
            return [_value(t, self._integer(line)) for t in _added_rows(columns).tolist()]
        return [_value(t / queries, False) for t in _added_rows(columns).tolist()]


_UNSCORED = ("runid", "relstring")  # printed without a z-score
MISSING_ZSCORE = -1000000.0  # trec_eval's MISSING_ZSCORE_VALUE


def zscored(report: Report, table: Mapping[tuple[str, str], tuple[float, float]]) -> Report:
    """The report with each query's values as z-scores (``-Z``), as trec_eval's
    ``te_convert_to_zscore``: ``(value - mean) / stddev`` with the ``(query, measure
    name)`` entry of ``table``; 0 where the stddev is 0 and the value is the mean;
    :data:`MISSING_ZSCORE` where the entry is missing or the stddev is 0 otherwise. A
    geometric mean's per-query value is the logarithm it averages."""
    values = {}
    for line in report.lines:
        if line.name not in report.values:
            continue
        column = report.values[line.name]
        if line.measure.summary == "gm":
            column = np.log(np.maximum(column, MIN_GEO_MEAN))
        stats = np.array(
            [table.get((qid, line.name), (math.nan, math.nan)) for qid in report.query_ids]
        ).reshape(-1, 2)
        mean, deviation = stats[:, 0], stats[:, 1]
        known = ~np.isnan(deviation)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(known & (deviation != 0), (column - mean) / deviation, 0.0)
        ok = known & ((deviation != 0) | (column == mean))
        values[line.name] = np.where(ok, z, MISSING_ZSCORE)
    return attrs.evolve(report, values=values, zscores=True)


def judgment_groups(report: Report) -> Report:
    """The report of ``-R qrels_jg``: ``report`` scores one sample per query and judgment
    group (ids ``query<GROUP_SEPARATOR>group``); each query's value is its groups' values
    added in id order, over their number (when more than one), as trec_eval's
    ``*_avgjg`` measures make it."""
    order = report._order()
    by_query = np.array([report.query_ids[i].split(GROUP_SEPARATOR)[0] for i in order])
    values_in_order = {name: column[order] for name, column in report.values.items()}
    starts = np.flatnonzero(np.r_[True, by_query[1:] != by_query[:-1]])
    counts = np.diff(np.r_[starts, by_query.size])
    values = {}
    for name, column in values_in_order.items():
        total = np.zeros(starts.size)
        for j in range(int(counts.max(initial=0))):
            present = counts > j
            total[present] += column[starts[present] + j]
        values[name] = np.where(counts > 1, total / np.maximum(counts, 1), total)
    ids = tuple(str(q) for q in by_query[starts])
    return attrs.evolve(report, query_ids=ids, values=values)


def trec_eval(
    engine: Engine,
    qrels: Columns,
    run: Columns,
    requests: Sequence[Request],
    options: Options = Options(),
    runid: str = "",
    joined: Columns | None = None,
) -> Report:
    """Evaluate ``run`` against ``qrels`` as trec_eval would, for the requested measures.

    The queries are those of the qrels that the run has (all of the qrels with
    ``complete``); queries of the run without judgements are ignored, as trec_eval
    ignores them. ``joined``: the run beside the qrels, as :func:`aligned` puts it, when
    the caller put it there (many runs at once: engine/analysis/trec_eval_many.py).
    """
    lines = _lines(requests, options.level)
    _walk_checked(lines, qrels)
    if joined is None:
        joined, _ = aligned(qrels, run)
    has_run = joined.column("retrieved").is_valid().to_numpy(zero_copy_only=False)
    num_rel_judged = _labels_above_zero(qrels) if options.complete else None
    if not options.complete and not has_run.all():
        rows = np.flatnonzero(has_run)
        qrels, joined, has_run = qrels.take(rows), joined.take(rows), has_run[rows]
    ranked = _ranked(joined, options)
    relstrings = pa.array([], pa.string())
    for line in lines:
        if line.key == "relstring":
            length = max(0, int(line.numbers[0]))
            relstrings = _relstrings_of(_top(joined, ranked, length), length)
    threshold = repr(float(options.level))
    helpers = _helpers(threshold)
    specs = _specs(lines, threshold)
    labels = {spec: metric_label(engine.metric(spec)) for spec in specs}
    values: dict[str, FloatArray] = {}
    if len(joined):
        evaluation = Dataset(qrels, engine).with_metrics(specs)
        scored = _top(joined, ranked, None)  # the joined table, ranked as trec_eval ranks
        results = evaluation.evaluate_aligned(scored)  # in chunks, side by side
        scores = {spec: results.values(labels[spec]) for spec in specs}
        counts = {name: scores[spec] for name, spec in helpers.items()}
        counts["collection"] = np.full(len(joined), float(options.collection))
        emptied = (counts["num_ret"] == 0) & (
            has_run | options.judged_only | (options.max_docs == 0)
        )  # trec_eval scores a missing query on one unjudged document
        for line in lines:
            if line.key == "ideal_dcg":
                values[line.name] = _ideal_dcg(Batch.compile(joined), line)
                continue
            values[line.name] = _line_values(
                line,
                scores,
                counts,
                threshold,
                emptied,
                has_run,
                functools.partial(_positive_gain, qrels),
            )
    ids = tuple(joined.ids.to_pylist())
    return Report(tuple(lines), ids, values, relstrings, runid, num_rel_judged)


def metric_specs(requests: Sequence[Request], level: float) -> list[str]:
    """The metric specs :func:`trec_eval` scores for ``requests`` at relevance ``level``."""
    return _specs(_lines(requests, level), repr(float(level)))


def _helpers(threshold: str) -> dict[str, str]:
    """The specs of the counts trec_eval's measures are derived from, by name."""
    return {
        name: spec.format(l=threshold)
        for name, spec in (
            ("num_ret", "retrieval-num-ret"),
            ("num_rel", "retrieval-num-rel(relevance_threshold={l})"),
            ("num_rel_ret", "retrieval-num-rel-ret(relevance_threshold={l})"),
        )
    }


def _specs(lines: Sequence[Line], threshold: str) -> list[str]:
    """Every metric spec scored for ``lines``, once: theirs, the interpolated precisions
    and the helpers."""
    specs = [line.spec for line in lines if line.spec is not None]
    specs += [_iprec_spec(level, threshold) for level in _levels(lines)]
    return list(dict.fromkeys(specs + list(_helpers(threshold).values())))


def _ideal_dcg(batch: Batch, line: Line) -> FloatArray:
    """trec_eval's ideal_dcg: the DCG of its ideal ranking with the line's gains
    (:meth:`Batch.trec_eval_ideal_gains`), each gain over log2(rank + 1), the terms added
    left to right as trec_eval's loop adds them."""
    ideal = batch.trec_eval_ideal_gains(line.gains)
    return _added_rows(ideal / np.log2(np.arange(2, ideal.shape[1] + 2, dtype=np.float64)))


def _added_rows(values: FloatArray) -> FloatArray:
    """Each row added left to right (0 for no column), as trec_eval's loops add values to a
    double (``te_acc_meas_*``: not the exact sum, the last digit can differ)."""
    if values.shape[1] == 0:
        return np.zeros(values.shape[0])
    return np.cumsum(values, axis=1)[:, -1]


def _positive_gain(qrels: Columns, gains: Sequence[tuple[int, float]]) -> BoolArray:
    """Per query, whether trec_eval's ideal ranking with ``gains`` has a positive gain:
    with its levels' own gains, whether a judged document has a label above 0."""
    if gains:
        ideal = Batch.compile(qrels).trec_eval_ideal_gains(gains)
        return np.asarray((ideal > 0).any(axis=1), dtype=np.bool_)
    column = qrels.column("relevance")
    positive = pc.list_flatten(column).field("label").to_numpy() > 0
    sizes = lengths(column)
    found = np.zeros(sizes.size, dtype=bool)
    judged = sizes > 0  # (reduceat reads one label for a query without any)
    if judged.any():
        found[judged] = np.logical_or.reduceat(positive, offsets_of(sizes)[:-1][judged])
    return found


def _labels_above_zero(qrels: Columns) -> int:
    labels = pc.list_flatten(qrels.column("relevance")).field("label").to_numpy()
    return int((labels > 0).sum())


def _iprec_spec(level: float, threshold: str) -> str:
    return IPREC.format(p=repr(level), l=threshold)


def _levels(lines: Sequence[Line]) -> list[float]:
    """The recall levels 11pt_avg needs the interpolated precision of (level 0 always:
    where trec_eval's loop stops, it takes the precision there)."""
    found = [n for line in lines if line.key == "11pt_avg" for n in line.numbers]
    return [0.0, *found] if found else []


_NAN = -math.nan  # what C's 0.0 / 0.0 is, and prints: -nan


def _line_values(
    line: Line,
    scores: dict[str, FloatArray],
    counts: dict[str, FloatArray],
    threshold: str,
    emptied: BoolArray,
    has_run: BoolArray,
    positive_gain: Callable[[tuple[tuple[int, float], ...]], BoolArray],
) -> FloatArray:
    """One printed measure's value per query. Where trec_eval's ranking is empty (``-J``
    or ``-M 0`` left no document), its interpolated precisions at the recall levels that
    round to 0 relevant documents are 0/0: -nan, as it prints them."""
    if line.key == "iprec_at_recall":
        cut = _lround(line.numbers[0] * counts["num_rel"])
        return np.where(emptied & (cut == 0), _NAN, scores[line.spec or ""])
    if line.key == "11pt_avg":
        levels = line.numbers
        iprec = [
            np.where(emptied & (_lround(level * counts["num_rel"]) == 0), _NAN, scores[spec])
            for level in levels
            for spec in [_iprec_spec(level, threshold)]
        ]
        start = np.where(emptied, _NAN, scores[_iprec_spec(0.0, threshold)])
        return _eleven_points(levels, iprec, start, counts["num_rel"], counts["num_rel_ret"])
    if line.key == "utility":
        a, b, c, d = _utility_coefficients(line)
        rel_ret, ret, rel = counts["num_rel_ret"], counts["num_ret"], counts["num_rel"]
        missed = counts["collection"] + rel_ret - ret - rel  # non-relevant, not retrieved
        value = a * rel_ret + b * (ret - rel_ret) + c * (rel - rel_ret) + d * missed
        return np.where(has_run, value, 0.0)  # trec_eval zeroes a missing query's utility
    if line.key == "yaap":  # log((1 + S) / (1 + R - S)), S = AP · R the sum of precisions
        total = scores[line.spec or ""] * counts["num_rel"]
        return np.log((1.0 + total) / (1.0 + counts["num_rel"] - total))
    if line.key == "Rndcg":  # 0/0 where levels are relevant but no gain is positive
        nothing = (counts["num_rel"] > 0) & ~positive_gain(line.gains)
        return np.where(nothing, _NAN, scores[line.spec or ""])
    if line.spec is None:
        return np.zeros(has_run.size)
    return scores[line.spec]


def _utility_coefficients(line: Line) -> tuple[float, float, float, float]:
    if len(line.numbers) != 4:
        raise Stop(f"{line.name}: utility takes 4 coefficients, got {len(line.numbers)}", 4)
    a, b, c, d = line.numbers
    return a, b, c, d


def _lround(values: FloatArray) -> npt.NDArray[np.int64]:
    """C's lround of non-negative values: halves away from zero."""
    return np.floor(values + 0.5).astype(np.int64)


def _eleven_points(
    levels: Sequence[float],
    iprec: Sequence[FloatArray],
    start: FloatArray,
    num_rel: FloatArray,
    num_rel_ret: FloatArray,
) -> FloatArray:
    """trec_eval 10's 11pt_avg over the given recall levels, in the order given: its loop
    walks the levels from the last, and takes a level's interpolated precision where the
    relevant documents found reach its cutoff (lround(level · R)); levels whose cutoff
    exceeds what was found before any is reached count 0, and once a cutoff is out of
    reach (above the previous one, or 0) it and every level before it take the precision
    where the loop stopped (``start``). The values are added in that order, over the
    number of levels."""
    total = np.zeros(num_rel.size)
    started = np.zeros(num_rel.size, dtype=bool)
    stuck = np.zeros(num_rel.size, dtype=bool)
    last = num_rel_ret.astype(np.int64)
    for j in reversed(range(len(levels))):
        cut = _lround(levels[j] * num_rel)
        skipped = ~started & (cut > num_rel_ret)
        started |= ~skipped
        taken = started & ~stuck & (cut >= 1) & (cut <= last)
        stuck |= started & ~taken
        last = np.where(taken, cut, last)
        total = np.where(skipped, total, total + np.where(taken, iprec[j], start))
    return total / len(levels)


def _ranked(joined: Columns, options: Options) -> Columns:
    """Each query's ranking in trec_eval's order, cut to ``max_docs`` and then, with
    ``judged_only``, without its unjudged documents (no label, or a negative one)."""
    retrieved = joined.column("retrieved")
    if options.judged_only or options.max_docs is not None:
        batch = Batch.compile(joined)
        keep = batch.valid.copy()
        if options.max_docs is not None:  # first the depth, then the judged ones in it
            keep &= np.cumsum(keep, axis=1) <= options.max_docs
        if options.judged_only:  # a negative label is "unjudged", as in trec_eval
            with np.errstate(invalid="ignore"):
                keep &= batch.ranked_labels >= 0
        codes = pa.array(batch.doc_codes[keep], pa.int32())
        retrieved = list_array(offsets_of(keep.sum(axis=1)), codes)
    return Columns(pa.table({"id": joined.ids, "retrieved": retrieved}), joined.docs)


def _top(joined: Columns, ranked: Columns, length: int | None) -> Columns:
    """The samples with the first ``length`` documents of each ranking (None: all), and
    without the per-item ``tied`` flags of the rankings as they were read."""
    top = ranked.column("retrieved")
    top = top if length is None else pc.list_slice(top, 0, length)
    table = joined.table.set_column(joined.table.column_names.index("retrieved"), "retrieved", top)
    if "tied" in table.column_names:
        table = table.drop_columns(["tied"])
    return Columns(table, joined.docs)


def _relstrings_of(top: Columns, length: int) -> pa.Array:
    """The relstrings of the ``length`` documents of each ranking of ``top``. A TREC
    qrels file codes its labels line by line: where their codes count up, each ranked
    document's label is read at its code (the run's reader made sure that no query
    retrieves a document twice), and only these documents are read; otherwise they are
    joined with their labels as for scoring, in chunks."""
    entries = pc.list_flatten(top.column("relevance"))
    label_codes = entries.field("doc").to_numpy(zero_copy_only=False)
    if not counts_up(label_codes):
        parts = slices(top, default_chunk_size(top))  # as scored: deep pools' are small
        batches = (Batch.compile(part) for part in parts)
        return pa.concat_arrays(
            [_relstrings(b.ranked_labels[:, :length], b.valid[:, :length]) for b in batches]
        )
    codes, sizes = top.doc_codes("retrieved")
    owner = np.repeat(np.arange(len(top)), sizes)
    place = np.arange(codes.size) - np.repeat(offsets_of(sizes)[:-1], sizes)
    bounds = offsets_of(lengths(top.column("relevance")))
    at = codes.astype(np.int64) - (int(label_codes[0]) if label_codes.size else 0)
    own = (at >= bounds[owner]) & (at < bounds[owner + 1])  # one of its query's labels
    labels = np.full((len(top), length), np.nan)
    valid = np.zeros((len(top), length), dtype=np.bool_)
    valid[owner, place] = True
    labels[owner[own], place[own]] = entries.field("label").to_numpy(zero_copy_only=False)[at[own]]
    return _relstrings(labels, valid)


def _relstrings(labels: FloatArray, valid: BoolArray) -> pa.Array:
    """trec_eval 10's relstring, quoted and ending in a newline: per query, a character
    per place where ``valid`` (a ranked document): its label 0..9 (``labels``), ``>``
    above 9, ``.`` a negative label (judged "unjudged"), ``-`` no label (NaN)."""
    with np.errstate(invalid="ignore"):
        codes = np.select(
            [np.isnan(labels), labels > 9, labels >= 0],
            [ord("-"), ord(">"), ord("0") + np.nan_to_num(labels).astype(np.int64)],
            ord("."),
        )
    offsets = offsets_of(valid.sum(axis=1)).astype(np.int32)
    data = codes[valid].astype(np.uint8).tobytes()
    text = pa.StringArray.from_buffers(len(labels), pa.py_buffer(offsets), pa.py_buffer(data))
    quote, end = pa.repeat("'", len(text)), pa.repeat("'\n", len(text))
    return pc.binary_join_element_wise(quote, text, end, "")


#: A block of text as rows of bytes, zero-padded to the longest, with each row's length.
Cells = tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]

#: Queries whose lines are laid out at once: a few MB of bytes (4,096 held 50 MiB more at
#: the peak of `trec-eval` on 10,000 deep queries, and were no faster).
_BLOCK_QUERIES = 1024


def _string_cells(strings: pa.Array, end: bytes = b"") -> Cells:
    """Each string (no nulls) followed by ``end``, as cells."""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)
    offsets = offsets[strings.offset : strings.offset + len(strings) + 1].astype(np.int64)
    sizes = np.diff(offsets)
    width = int(sizes.max(initial=0)) + len(end)
    data = np.frombuffer(strings.buffers()[2] or b"\0", dtype=np.uint8)
    columns = np.arange(width)
    index = np.minimum(offsets[:-1, None] + columns, data.size - 1)
    chars = np.where(columns < sizes[:, None], data[index], 0).astype(np.uint8)
    for i, byte in enumerate(end):
        chars[np.arange(sizes.size), sizes + i] = byte
    return chars, sizes + len(end)


def _cells(values: FloatArray, integer: bool) -> Cells:
    """``values`` as C's printf writes them, ``%ld`` or ``%6.4f``, each followed by a
    newline. Vectorised for values in [0, 10), rounded to 4 decimals in integers; the
    others (negative, wide, not finite) and the few within float error of a rounding tie
    are formatted by Python, whose rounding of the exact double is printf's."""
    if integer:
        return _string_cells(
            pc.cast(pa.array(np.rint(values).astype(np.int64)), pa.string()), b"\n"
        )
    with np.errstate(invalid="ignore"):
        scaled = np.abs(values) * 10_000
        rounded = np.rint(np.nan_to_num(scaled)).astype(np.int64)
        odd = (rounded >= 100_000) | np.signbit(values) | ~np.isfinite(values)
        odd |= np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    packed = (  # "d.dddd\n" and a zero byte, as one little-endian 64-bit word per value
        (rounded // 10_000 % 10).astype(np.uint64) + np.uint64(ord("0"))
        | np.uint64(ord(".") << 8)
        | _FRACTIONS[rounded % 10_000] << np.uint64(16)
        | np.uint64(ord("\n") << 48)
    )
    chars = packed.astype("<u8").view(np.uint8).reshape(values.size, 8)
    sizes = np.full(values.size, 7, dtype=np.int64)
    if not odd.any():
        return chars, sizes
    by_python = pa.array([_printf(v) for v in values[odd].tolist()], pa.string())
    odd_chars, odd_sizes = _string_cells(by_python, b"\n")
    width = max(8, odd_chars.shape[1])
    wide = np.zeros((values.size, width), dtype=np.uint8)
    wide[:, :8] = chars
    wide[odd] = 0
    wide[odd, : odd_chars.shape[1]] = odd_chars
    sizes[odd] = odd_sizes
    return wide, sizes


def _sorted(cells: Cells, order: npt.NDArray[np.int64]) -> Cells:
    return cells[0][order], cells[1][order]


def _packed(
    segments: Sequence[bytes | Cells], rows: slice
) -> tuple[memoryview, npt.NDArray[np.int64]]:
    """Row by row (of ``rows``), the concatenation of every segment: a constant, or the
    row's cell of a column; and each row's length. Cells are zero-padded, and no text has
    a zero byte: the zeros are what is packed away."""
    pieces = [
        np.broadcast_to(np.frombuffer(s, dtype=np.uint8), (rows.stop - rows.start, len(s)))
        if isinstance(s, bytes)
        else s[0][rows]
        for s in segments
    ]
    block = np.concatenate(pieces, axis=1)
    kept = block != 0
    return block[kept].data, kept.sum(axis=1)


#: The four decimals 0000..9999 as the bytes of a little-endian 32-bit word each.
_FRACTIONS = (
    (np.arange(10_000)[:, None] // 10 ** np.arange(3, -1, -1) % 10 + ord("0"))
    .astype(np.uint8)
    .view("<u4")[:, 0]
    .astype(np.uint64)
)


def _value(value: float, integer: bool) -> str:
    return str(round(float(value))) if integer else _printf(value)


def _printf(value: float) -> str:
    """``value`` as C's printf ``%6.4f`` writes it (a NaN with its sign: ``-nan``)."""
    if math.isnan(value):
        return ("-nan" if math.copysign(1.0, value) < 0 else "nan").rjust(6)
    return f"{value:6.4f}"


def _print(name: str, qid: str, text: str) -> str:
    return f"{name:<22}\t{qid}\t{text}"
