"""trec_eval over slotwise metrics: its measure names and parameters (``-m P.5,10``), its
measure sets (``official``, ``all_trec``, ``set``), its query set and options (``-c``,
``-M``, ``-l``, ``-J``) and its output, line for line, as ``slotwise trec-eval`` prints it.

Each trec_eval measure that is a per-query score is a slotwise metric alias (``P`` is
``retrieval-precision-at-k``, ``bpref`` is ``retrieval-bpref``, ...); this module only
maps names, picks the queries, and aggregates and prints as trec_eval does.
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Callable, Sequence
from typing import BinaryIO

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, Problem
from engine.evaluation.api import Dataset, Engine
from engine.evaluation.batch import Batch, FloatArray
from engine.evaluation.executors import ThreadExecutor
from engine.evaluation.metric import metric_label
from engine.evaluation.pipeline import aligned
from engine.io.columns import Columns, list_array, offsets_of

__all__ = [
    "MEASURES",
    "MEASURE_SETS",
    "Options",
    "Report",
    "Request",
    "parse_measures",
    "trec_eval",
]

UNCUT = 10**9  # a cutoff beyond any ranking: trec_eval's uncut ndcg
MIN_GEO_MEAN = 0.00001  # trec_eval's floor before a geometric mean's log
CUTOFFS = ("5", "10", "15", "20", "30", "100", "200", "500", "1000")


@attrs.frozen
class Measure:
    """One trec_eval measure: the slotwise spec of each parameter (``{p}`` the parameter,
    ``{l}`` the relevance level of ``-l``), its default parameters, how its ``all`` line
    is made (``mean``; ``sum``; ``gm``, the geometric mean, with no per-query lines;
    ``none``, per-query lines only; ``special``), whether it prints as an integer, how
    a parameter is printed in its name, and whether its parameters are ``level=gain``
    pairs (``ndcg.1=3,2=9``: ``{gains}`` in the spec)."""

    spec: str | None
    defaults: tuple[str, ...] = ()
    summary: str = "mean"
    integer: bool = False
    printed: Callable[[str], str] = str
    pairs: bool = False


def _level(text: str) -> str:
    return f"{float(text):.2f}"


MEASURES: dict[str, Measure] = {
    "runid": Measure(None, summary="special"),
    "num_q": Measure(None, summary="special", integer=True),
    "num_ret": Measure("retrieval-num-ret", summary="sum", integer=True),
    "num_rel": Measure("retrieval-num-rel(relevance_threshold={l})", summary="sum", integer=True),
    "num_rel_ret": Measure(
        "retrieval-num-rel-ret(relevance_threshold={l})", summary="sum", integer=True
    ),
    "map": Measure("retrieval-map(relevance_threshold={l})"),
    "gm_map": Measure("retrieval-map(relevance_threshold={l})", summary="gm"),
    "Rprec": Measure("retrieval-r-precision(relevance_threshold={l})"),
    "bpref": Measure("retrieval-bpref(relevance_threshold={l})"),
    "recip_rank": Measure("retrieval-mrr(relevance_threshold={l})"),
    "iprec_at_recall": Measure(
        "retrieval-iprec-at-recall(recall={p}, relevance_threshold={l}, rounding=trec_eval10)",
        tuple(f"{level / 10:.2f}" for level in range(11)),
        printed=_level,
    ),
    "P": Measure("retrieval-precision-at-k(k={p}, relevance_threshold={l})", CUTOFFS),
    "relstring": Measure(None, ("10",), summary="none"),
    "recall": Measure("retrieval-recall-at-k(k={p}, relevance_threshold={l})", CUTOFFS),
    "infAP": Measure("retrieval-infap(relevance_threshold={l})"),
    "gm_bpref": Measure("retrieval-bpref(relevance_threshold={l})", summary="gm"),
    "Rprec_mult": Measure(
        "retrieval-rprec-mult(multiplier={p}, relevance_threshold={l})",
        tuple(f"{m / 10:.2f}" for m in range(2, 21, 2)),
        printed=_level,
    ),
    "utility": Measure("retrieval-utility(relevance_threshold={l})"),
    "11pt_avg": Measure("retrieval-11pt-avg(relevance_threshold={l}, rounding=trec_eval10)"),
    "binG": Measure("retrieval-bing(relevance_threshold={l})"),
    "G": Measure("retrieval-g"),
    "ndcg": Measure(f"retrieval-ndcg-at-k(k={UNCUT}{{gains}})", pairs=True),
    "ndcg_rel": Measure("retrieval-ndcg-rel"),
    "Rndcg": Measure("retrieval-rndcg(relevance_threshold={l})"),
    "ndcg_cut": Measure("retrieval-ndcg-at-k(k={p})", CUTOFFS),
    "map_cut": Measure("retrieval-map(k={p}, relevance_threshold={l})", CUTOFFS),
    "relative_P": Measure(
        "retrieval-relative-precision-at-k(k={p}, relevance_threshold={l})", CUTOFFS
    ),
    "success": Measure("retrieval-hit-at-k(k={p}, relevance_threshold={l})", ("1", "5", "10")),
    "set_P": Measure("retrieval-set-precision(relevance_threshold={l})"),
    "set_relative_P": Measure("retrieval-set-relative-precision(relevance_threshold={l})"),
    "set_recall": Measure("retrieval-set-recall(relevance_threshold={l})"),
    "set_map": Measure("retrieval-set-map(relevance_threshold={l})"),
    "set_F": Measure("retrieval-set-f(relevance_threshold={l})"),
    "num_nonrel_judged_ret": Measure(
        "retrieval-num-nonrel-judged-ret(relevance_threshold={l})", summary="sum", integer=True
    ),
    "rbp": Measure("retrieval-rbp"),
    "rbp_resid": Measure("retrieval-rbp-resid"),
    "unj": Measure("retrieval-unjudged-at-k(k={p})", ("5", "10", "20")),
}

_OFFICIAL = [
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
]
MEASURE_SETS: dict[str, tuple[str, ...]] = {
    "official": tuple(_OFFICIAL),
    "all_trec": tuple(MEASURES),
    "set": tuple(
        [
            "runid",
            "num_q",
            "num_ret",
            "num_rel",
            "num_rel_ret",
            "utility",
            "set_P",
            "set_recall",
            "set_relative_P",
            "set_map",
            "set_F",
        ]
    ),
}


@attrs.frozen
class Request:
    """One ``-m`` measure with its parameters (the defaults when none were given)."""

    name: str
    params: tuple[str, ...] = ()


def parse_measures(args: Sequence[str]) -> list[Request]:
    """``-m`` values (``P.5,10``, ``all_trec``, ``iprec_at_recall..10,.25``) as requests in
    trec_eval's order (the order of its measure table), each measure once."""
    wanted: dict[str, tuple[str, ...]] = {}
    for arg in args or ["official"]:
        if arg in MEASURE_SETS:
            for name in MEASURE_SETS[arg]:
                wanted.setdefault(name, ())
            continue
        name, dot, rest = arg.partition(".")
        if name not in MEASURES:
            raise InputError(
                [Problem(f"trec_eval has no measure {name!r} ({_closest(name)})")],
                summary="unknown measure",
            )
        params = tuple(p for p in rest.split(",") if p) if dot else ()
        if params and MEASURES[name].pairs:
            _gain_pairs(arg, params)  # refused now rather than when scoring
        elif params and not MEASURES[name].defaults:
            raise InputError(
                [Problem(f"{arg}: measure {name} takes no parameters")],
                summary="bad measure parameters",
            )
        wanted[name] = params or wanted.get(name, ())
    return [Request(name, wanted[name]) for name in MEASURES if name in wanted]


def _closest(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(MEASURES) + list(MEASURE_SETS), n=3)
    return f"did you mean {', '.join(close)}?" if close else "see slotwise trec-eval --help"


@attrs.frozen
class Line:
    """One printed measure: its name (``P_5``), its slotwise spec (None: computed here)
    and its measure."""

    name: str
    spec: str | None
    measure: Measure


def _lines(requests: Sequence[Request], level: float) -> list[Line]:
    """Every printed measure of the requests, in order."""
    threshold = repr(float(level))
    lines = []
    for request in requests:
        measure = MEASURES[request.name]
        if measure.pairs and measure.spec:
            pairs = _gain_pairs(request.name, request.params)
            gains = f", gains={pairs!r}" if pairs else ""
            lines.append(Line(request.name, measure.spec.format(gains=gains), measure))
            continue
        if not measure.defaults or measure.spec is None:
            spec = measure.spec.format(l=threshold) if measure.spec else None
            lines.append(Line(request.name, spec, measure))
            continue
        for param in request.params or measure.defaults:
            spec = measure.spec.format(p=_number(param), l=threshold)
            lines.append(Line(f"{request.name}_{measure.printed(param)}", spec, measure))
    return lines


def _gain_pairs(arg: str, params: Sequence[str]) -> dict[int, float]:
    """``level=gain`` parameters as trec_eval reads them: a level that is not an integer
    is ignored, a parameter without ``=`` or a gain that is not a number is an error."""
    pairs = {}
    for param in params:
        level, equals, gain = param.partition("=")
        try:
            value = float(gain) if equals else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise InputError(
                [Problem(f"{arg}: {param!r} is not a level=gain pair (ndcg.1=3,2=9)")],
                summary="bad measure parameters",
            )
        if level.lstrip("+-").isdigit():
            pairs[int(level)] = value
    return pairs


def _number(text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        raise InputError(
            [Problem(f"measure parameter {text!r} is not a number")], summary="bad parameter"
        ) from None
    return str(int(value)) if value.is_integer() and "." not in text else repr(value)


@attrs.frozen
class Options:
    """trec_eval's query-set and ranking options: ``-c`` (every query of the qrels, a
    missing run scoring as an empty ranking), ``-M`` (the first N documents of each
    ranking), ``-l`` (the least label counted relevant), ``-J`` (judged documents only)."""

    complete: bool = False
    max_docs: int | None = None
    level: float = 1.0
    judged_only: bool = False


@attrs.frozen
class Report:
    """The values of ``slotwise trec-eval``: per printed measure, one value per query."""

    lines: tuple[Line, ...]
    query_ids: tuple[str, ...]
    values: dict[str, FloatArray]
    means: dict[str, float]
    relstrings: pa.Array  # quoted, each ending in a newline; empty unless asked for
    runid: str

    def render(self, per_query: bool = False, summary: bool = True) -> bytes:
        """The output (see :meth:`write`) as bytes."""
        buffer = io.BytesIO()
        self.write(buffer, per_query, summary)
        return buffer.getvalue()

    def write(self, stream: BinaryIO, per_query: bool = False, summary: bool = True) -> None:
        """Write the output as trec_eval prints it: with ``per_query`` every query's lines
        (in query id order), then the ``all`` lines unless ``summary`` is False."""
        if per_query and self.query_ids:
            self._write_per_query(stream)
        if summary:
            lines = ((line.name, self._summary(line)) for line in self.lines)
            text = "".join(
                _print(name, "all", value) + "\n" for name, value in lines if value is not None
            )
            stream.write(text.encode())

    def _write_per_query(self, stream: BinaryIO) -> None:
        """Every query's lines, assembled as bytes in blocks of queries: each measure's
        values are formatted once as a column of cells, sorted by query id, and a block's
        lines are laid out side by side in a byte matrix, then packed."""
        ids = pa.array(self.query_ids, pa.string())
        order = pc.sort_indices(ids).to_numpy()
        query = _sorted(_string_cells(ids, b"\t"), order)
        segments: list[bytes | Cells] = []
        for line in self.lines:
            if line.name == "relstring":
                cells = _string_cells(self.relstrings)
            elif line.spec is None or line.measure.summary in ("gm", "special"):
                continue
            else:
                cells = _cells(self.values[line.name], line.measure.integer)
            segments += [f"{line.name:<22}\t".encode(), query, _sorted(cells, order)]
        if len(segments) == 0:
            return
        blocks = (
            slice(start, min(start + _BLOCK_QUERIES, order.size))
            for start in range(0, order.size, _BLOCK_QUERIES)
        )
        for packed in ThreadExecutor().map(functools.partial(_packed, segments), blocks):
            stream.write(packed)

    def _summary(self, line: Line) -> str | None:
        if line.name == "runid":
            return self.runid
        if line.name == "num_q":
            return str(len(self.query_ids))
        if line.measure.summary == "none" or not self.query_ids:
            return None
        column = self.values[line.name]
        if line.measure.summary == "gm":
            logs = np.log(np.maximum(column, MIN_GEO_MEAN))
            return _value(math.exp(math.fsum(logs) / logs.size), False)
        if line.measure.summary == "sum":
            return _value(math.fsum(column), True)
        return _value(self.means[line.name], False)


#: Queries scored at once: a chunk's arrays stay in the CPU's caches, and the engine's
#: executor (``threads`` in ``slotwise trec-eval``) scores chunks side by side.
_CHUNK = 4096


def trec_eval(
    engine: Engine,
    qrels: Columns,
    run: Columns,
    requests: Sequence[Request],
    options: Options = Options(),
    runid: str = "",
) -> Report:
    """Evaluate ``run`` against ``qrels`` as trec_eval would, for the requested measures.

    The queries are those of the qrels that the run has (all of the qrels with
    ``complete``); queries of the run without judgements are ignored, as trec_eval
    ignores them.
    """
    lines = _lines(requests, options.level)
    joined, _ = aligned(qrels, run)
    if not options.complete:
        has_run = joined.column("retrieved").is_valid().to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(has_run)
        qrels, joined = qrels.take(rows), joined.take(rows)
    ranked = _ranked(joined, options)
    relstrings = (
        _relstrings(Batch.compile(_top(joined, ranked, 10)))
        if any(line.name == "relstring" for line in lines)
        else pa.array([], pa.string())
    )
    specs = list(dict.fromkeys(line.spec for line in lines if line.spec is not None))
    labels = {spec: metric_label(engine.metric(spec)) for spec in specs}
    values: dict[str, FloatArray] = {}
    means: dict[str, float] = {}
    if specs and len(joined):
        evaluation = Dataset(qrels, engine).with_metrics(specs)
        results = evaluation.evaluate(ranked, chunk_size=_CHUNK)
        for line in lines:
            if line.spec is not None:
                values[line.name] = results.values(labels[line.spec])
                means[line.name] = results.aggregates[labels[line.spec]]
    ids = tuple(joined.ids.to_pylist())
    return Report(tuple(lines), ids, values, means, relstrings, runid)


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


def _top(joined: Columns, ranked: Columns, length: int) -> Columns:
    """The samples with the first ``length`` documents of each ranking."""
    top = pc.list_slice(ranked.column("retrieved"), 0, length)
    table = joined.table.set_column(joined.table.column_names.index("retrieved"), "retrieved", top)
    return Columns(table, joined.docs)


def _relstrings(batch: Batch, length: int = 10) -> pa.Array:
    """trec_eval 10's relstring, quoted and ending in a newline: per query, a character
    per document of the top ``length``: its label 0..9, ``>`` above 9, ``.`` a negative
    label (judged "unjudged"), ``-`` no label."""
    labels = batch.ranked_labels[:, :length]
    with np.errstate(invalid="ignore"):
        codes = np.select(
            [np.isnan(labels), labels > 9, labels >= 0],
            [ord("-"), ord(">"), ord("0") + np.nan_to_num(labels).astype(np.int64)],
            ord("."),
        )
    valid = batch.valid[:, :length]
    offsets = offsets_of(valid.sum(axis=1)).astype(np.int32)
    data = codes[valid].astype(np.uint8).tobytes()
    text = pa.StringArray.from_buffers(len(batch), pa.py_buffer(offsets), pa.py_buffer(data))
    quote, end = pa.repeat("'", len(text)), pa.repeat("'\n", len(text))
    return pc.binary_join_element_wise(quote, text, end, "")


#: A block of text as rows of bytes, zero-padded to the longest, with each row's length.
Cells = tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]

_BLOCK_QUERIES = 4096  # queries laid out at once: a few MB of bytes


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
    by_python = pa.array([f"{v:6.4f}" for v in values[odd].tolist()], pa.string())
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


def _packed(segments: Sequence[bytes | Cells], rows: slice) -> memoryview:
    """Row by row (of ``rows``), the concatenation of every segment: a constant, or the
    row's cell of a column. Cells are zero-padded, and no text has a zero byte: the zeros
    are what is packed away."""
    pieces = [
        np.broadcast_to(np.frombuffer(s, dtype=np.uint8), (rows.stop - rows.start, len(s)))
        if isinstance(s, bytes)
        else s[0][rows]
        for s in segments
    ]
    block = np.concatenate(pieces, axis=1)
    return block[block != 0].data


#: The four decimals 0000..9999 as the bytes of a little-endian 32-bit word each.
_FRACTIONS = np.frombuffer("".join(f"{i:04d}" for i in range(10_000)).encode(), dtype="<u4").astype(
    np.uint64
)


def _value(value: float, integer: bool) -> str:
    return str(round(float(value))) if integer else f"{value:6.4f}"


def _print(name: str, qid: str, text: str) -> str:
    return f"{name:<22}\t{qid}\t{text}"
