"""The one evaluation path: chunks of aligned samples and outputs (columns) -> Batch ->
metrics -> per-sample rows and summaries. Evaluating in memory is the one-chunk case;
``chunk_size=``, ``--stream`` and the Ray executor run the same code on more chunks.

Why the numbers do not depend on the chunking, bit for bit:

- **Padding is fixed for the whole dataset.** Every chunk's :class:`~engine.Batch` is
  padded to the dataset's :class:`~engine.evaluation.batch.Shape` (the widest ranking,
  label list and pool; the largest label), so row sums add the same terms in the same
  order as in one big batch, and ``retrieval-err-at-k`` sees the dataset's largest label.
  A streamed evaluation finds the shape in a first pass over its inputs. Where a few long
  lists would make every row pay their length, a chunk is scored in groups of rows of
  like lengths, each padded to its own widths (:func:`length_groups`): a metric's value
  does not depend on its row's padding (the conformance kit's "alone" test), so the
  values are the same, and the cost follows the ranked ids.
- **Chunks start at multiples of** :data:`CHUNK_ALIGN` **rows**, so BLAS kernels group
  rows as they do in one big batch (``chunk_size`` is rounded up).
- **Summaries are order-independent**: the mean is an exact sum (``math.fsum``), the
  confidence interval a Poisson bootstrap whose weights depend only on a sample's
  position (:mod:`engine.evaluation.statistics`).

A multi-chunk run has no run-level reports (``summarize`` needs every sample at once).
"""

from __future__ import annotations

import platform
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.cores import available
from engine.errors import (
    InputError,
    MetricRequirementError,
    MetricScoreError,
    Problem,
    SlotwiseError,
)
from engine.evaluation.batch import PADDED, Batch, Flat, Shape
from engine.evaluation.executors import IN_PROCESS, Executor
from engine.evaluation.metric import (
    Metric,
    MetricBase,
    lacking_any,
    metric_label,
    metric_params,
    missing_requirements,
)
from engine.evaluation.results import (
    Diagnostics,
    MetricRecord,
    Results,
    created_at,
    document_header,
)
from engine.evaluation.statistics import Bootstrap, Resampled, Tally
from engine.io.columns import LABEL_KINDS, Columns, lengths, stack
from engine.io.sinks import RowChunk, Sink
from engine.logs import log
from engine.version import VERSION

__all__ = [
    "CHUNK_ALIGN",
    "DEFAULT_CHUNK_SIZE",
    "NO_OUTPUT",
    "ChunkScores",
    "ChunkTask",
    "Gathering",
    "MissingOutputs",
    "Plan",
    "StreamingError",
    "Summed",
    "aligned",
    "check_overlap",
    "chunk_size_of",
    "default_chunk_size",
    "evaluate",
    "first_pass",
    "gather",
    "length_groups",
    "prefetched",
    "score_batch",
    "score_chunk",
    "streamed_chunks",
    "summed",
]

#: Chunk boundaries fall on multiples of this many samples (see the module docstring).
#: What a sample with no output is: an error row (reason :data:`NO_OUTPUT`), or an empty
#: ranking (trec_eval's ``-c``), listed in ``diagnostics.missing_outputs``.
MissingOutputs = Literal["error", "empty"]
NO_OUTPUT = "no output"

CHUNK_ALIGN = 64
DEFAULT_CHUNK_SIZE = 16384
_SPLIT_SLOTS = 1 << 18  # fewer ranked documents are scored as one chunk: splitting costs more
_CHUNK_LABELS = 1 << 17  # the most judged documents of a chunk, about (docs/scale.md)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class StreamingError(SlotwiseError, ValueError):
    """The evaluation cannot be streamed as asked (a metric, an input order)."""


def default_chunk_size(joined: Columns) -> int | None:
    """The chunk size of an in-memory evaluation given none: chunks of about
    ``DEFAULT_CHUNK_SIZE`` rankings of 100 and of at most about :data:`_CHUNK_LABELS`
    judged documents (a deep pool's chunk stays small: its padded arrays are the peak of
    memory), and a chunk per core once there are :data:`_SPLIT_SLOTS` ranked documents
    to share (10,000 queries of 100 are scored on both cores); None: one chunk."""
    column = joined.column("retrieved")
    slots = len(pc.list_flatten(column)) if len(column) else 0
    labels = sum(len(pc.list_flatten(joined.column(kind))) for kind in LABEL_KINDS)
    cores = available()
    chunks = max(
        -(-slots // (100 * DEFAULT_CHUNK_SIZE)),
        -(-labels // _CHUNK_LABELS),
        min(cores, slots // _SPLIT_SLOTS),
    )
    return -(-len(joined) // chunks) if chunks > 1 else None


def chunk_size_of(chunk_size: int) -> int:
    """``chunk_size`` rounded up to a multiple of :data:`CHUNK_ALIGN`."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    return -(-chunk_size // CHUNK_ALIGN) * CHUNK_ALIGN


# -- the plan: metrics, labelled, with their provenance ---------------------------------------


@attrs.frozen
class Plan:
    """The metrics of an evaluation with their labels, plugins and records."""

    metrics: tuple[Metric, ...]
    labels: tuple[str, ...]
    distributions: tuple[str | None, ...]
    records: tuple[MetricRecord, ...]
    default_k: int
    #: Every requirement of the metrics, in name order.
    needs: tuple[str, ...] = attrs.field(init=False)
    #: The places of the metrics with a hook of their own (``check``, ``details``,
    #: ``summarize``), by hook, in order.
    hooks: Mapping[str, tuple[int, ...]] = attrs.field(init=False)
    #: The cutoffs at which judged@k is counted: the metrics' k (an unset k: the default
    #: k, unless the metric is uncut by default), else the default k; none when no metric
    #: reads relevance labels.
    judged_cutoffs: tuple[int, ...] = attrs.field(init=False)

    @needs.default
    def _needs(self) -> tuple[str, ...]:
        return tuple(sorted(set().union(*(m.requires for m in self.metrics))))

    @hooks.default
    def _hooks(self) -> Mapping[str, tuple[int, ...]]:
        return {
            hook: tuple(i for i, m in enumerate(self.metrics) if _own_hook(m, hook))
            for hook in ("check", "details", "summarize")
        }

    @judged_cutoffs.default
    def _judged_cutoffs(self) -> tuple[int, ...]:
        if "relevance" not in self.needs:
            return ()
        found = {
            m.k if isinstance(m.k, int) else self.default_k
            for m in self.metrics
            if hasattr(m, "k") and (m.k is not None or not getattr(m, "uncut_by_default", False))
        }
        return tuple(sorted(found or {self.default_k}))

    @classmethod
    def of(
        cls,
        metrics: Sequence[Metric],
        provenance: Callable[[str], tuple[str | None, str | None]],
        default_k: int,
    ) -> Plan:
        labels, distributions, records = [], [], []
        for metric in metrics:
            label = metric_label(metric)
            distribution, version = provenance(metric.alias)
            params = metric_params(metric)
            if params.get("k", 0) is None and not getattr(metric, "uncut_by_default", False):
                params["k"] = default_k  # an unset k is reported as the default it resolves to
            labels.append(label)
            distributions.append(distribution)
            records.append(
                MetricRecord(
                    label, metric.alias, params, metric.higher_is_better, distribution, version
                )
            )
        return cls(tuple(metrics), tuple(labels), tuple(distributions), tuple(records), default_k)

    @property
    def reports(self) -> bool:
        """Whether a metric makes a run-level report (``summarize``: every sample at once)."""
        return bool(self.hooks["summarize"])

    def custom_aggregates(self) -> list[str]:
        """Labels of metrics with their own ``aggregate`` (not an exact mean)."""
        return [
            label
            for metric, label in zip(self.metrics, self.labels, strict=True)
            if getattr(type(metric), "aggregate", None) is not MetricBase.aggregate
        ]


def _own_hook(metric: Metric, hook: str) -> bool:
    """Whether ``metric`` has an optional method ``hook`` other than :class:`MetricBase`'s
    (which has nothing to say)."""
    method = getattr(type(metric), hook, None)
    return method is not None and method is not getattr(MetricBase, hook)


# -- scoring one chunk (wherever the executor runs it) ----------------------------------------


@attrs.frozen
class ChunkTask:
    """One chunk of aligned samples and outputs, and what scoring it needs (``flat``:
    the columns' arrays, when the caller has them; see :meth:`Batch.compile`)."""

    columns: Columns
    plan: Plan
    shape: Shape | None
    flat: Flat | None = None


@attrs.frozen
class ChunkScores:
    """What scoring a chunk found: per-label values, details and reports; per sample the
    dropped duplicate ids, whether it has an output and whether it has no relevant
    document; and input problems (when there are any, nothing was scored)."""

    values: Mapping[str, FloatArray]
    details: Mapping[str, list[Any]]
    reports: Mapping[str, Mapping[str, Any]]
    duplicates: npt.NDArray[np.int64]
    has_output: BoolArray
    no_relevant: BoolArray
    problems: tuple[Problem, ...] = ()
    failures: Mapping[str, str] = attrs.field(factory=dict)  # label -> why it raised
    #: per cutoff k: per sample, (judged documents in the top k, documents in the top k)
    judged: Mapping[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = attrs.field(
        factory=dict
    )
    #: per failed label, the samples it failed for (absent: every sample of the chunk)
    failed_rows: Mapping[str, BoolArray] = attrs.field(factory=dict)

    def __len__(self) -> int:
        return len(self.has_output)

    def take(self, rows: npt.NDArray[np.int64]) -> ChunkScores:
        """The scores of these samples (positions), in this order (no reports)."""
        return ChunkScores(
            {label: values[rows] for label, values in self.values.items()},
            {label: [found[i] for i in rows.tolist()] for label, found in self.details.items()},
            {},
            self.duplicates[rows],
            self.has_output[rows],
            self.no_relevant[rows],
            self.problems,
            self.failures,
            {k: (judged[rows], slots[rows]) for k, (judged, slots) in self.judged.items()},
            {label: self.failed_for(label)[rows] for label in self.failures},
        )

    def failed_for(self, label: str) -> BoolArray:
        """The samples ``label`` failed for."""
        found = self.failed_rows.get(label)
        return np.ones(len(self), dtype=np.bool_) if found is None else found

    @classmethod
    def concat(cls, parts: Sequence[ChunkScores], labels: Sequence[str]) -> ChunkScores:
        """The scores of several chunks' samples one after the other (no reports)."""
        parts = [part for part in parts if len(part)] or list(parts[:1])
        problems = tuple(dict.fromkeys(problem for p in parts for problem in p.problems))
        duplicates = np.concatenate([p.duplicates for p in parts])
        has_output = np.concatenate([p.has_output for p in parts])
        no_relevant = np.concatenate([p.no_relevant for p in parts])
        if problems:
            return cls({}, {}, {}, duplicates, has_output, no_relevant, problems)
        failures = {label: reason for p in parts for label, reason in p.failures.items()}
        return cls(
            {label: np.concatenate([p.values[label] for p in parts]) for label in labels},
            {
                label: [x for p in parts for x in p.details.get(label) or [None] * len(p)]
                for label in dict.fromkeys(label for p in parts for label in p.details)
            },
            {},
            duplicates,
            has_output,
            no_relevant,
            (),
            failures,
            {
                k: tuple(np.concatenate([p.judged[k][side] for p in parts]) for side in (0, 1))  # type: ignore[misc]
                for k in parts[0].judged
            },
            {
                label: np.concatenate(
                    [
                        p.failed_for(label) if label in p.failures else np.zeros(len(p), np.bool_)
                        for p in parts
                    ]
                )
                for label in failures
            },
        )


def call_score(metric: Metric, label: str, distribution: str | None, batch: Batch) -> FloatArray:
    """Run ``metric.score`` and check what it returns; any failure names the metric and plugin."""
    source = f" (distribution {distribution})" if distribution else ""
    try:
        values = metric.score(batch)
    except Exception as error:
        raise MetricScoreError(
            f"metric {label!r}{source} failed while scoring: {type(error).__name__}: {error}"
        ) from error
    array = np.asarray(values)
    if array.shape != (len(batch),) or array.dtype.kind != "f":  # a floating type
        raise MetricScoreError(
            f"metric {label!r}{source} returned {array.dtype} of shape {array.shape}; "
            f"expected one float per sample, shape ({len(batch)},)"
        )
    return array.astype(np.float64, copy=True)


def score_chunk(task: ChunkTask) -> ChunkScores:
    """Score one chunk as the whole dataset would be scored: in one batch, or, when a few
    long lists would make every row pay their length, in groups of rows of like lengths
    (:func:`length_groups`), each padded to its own widths. A metric's values do not
    depend on the padding (the conformance kit's "alone" test), so they are the same,
    bit for bit; a metric that makes a run-level report (``summarize``) needs the one
    batch."""
    columns, plan = task.columns, task.plan
    groups = None if plan.reports else length_groups(columns, task.shape)
    if groups is None:
        return score_batch(Batch.compile(columns, plan.default_k, task.shape, task.flat), plan)
    own = Shape({}, (task.shape or Shape.of(columns)).max_label)  # ERR's: the dataset's
    if len(groups) == 1:  # a chunk of short lists in a dataset with long ones
        return score_batch(Batch.compile(columns, plan.default_k, own), plan)
    parts = [
        score_batch(Batch.compile(columns.take(rows), plan.default_k, own), plan) for rows in groups
    ]
    return _gathered(parts, groups, len(columns))


#: A chunk is scored in groups of rows of like lengths once padding it to its longest
#: lists would take more than this many times the cells its lists fill.
_PADDING_SLACK = 2


def length_groups(columns: Columns, shape: Shape | None) -> list[IntArray] | None:
    """The rows of a chunk in groups of like list lengths (each group's rows in order),
    when padding the whole chunk to ``shape``'s widths (else its own longest lists)
    would take more than :data:`_PADDING_SLACK` times the cells its lists fill (one
    group: the chunk's lists are alike, the dataset's widths are not); None when the
    padding is cheap. Rows are binned by the power of two of their lists' total length,
    and neighbouring bins merged while the merge pads within the slack: a few groups, so
    that the cost is linear in the ranked ids, not in rows times the longest ranking."""
    lists = {name: columns.column(name) for name in PADDED if columns.has(name)}
    rows = len(columns)
    filled = rows + sum(_values_in(column) for column in lists.values())
    widths = sum(
        (shape.widths.get(name) if shape is not None else None)
        or int(pc.max(pc.list_value_length(column)).as_py() or 0)
        for name, column in lists.items()
    )
    if rows * widths <= _PADDING_SLACK * filled:
        return None
    sizes = {name: lengths(column) for name, column in lists.items()}
    total: IntArray = np.sum(list(sizes.values()), axis=0)  # each row's
    bins = np.frexp(total.astype(np.float64))[1]  # total length's power of two
    found = np.unique(bins)
    groups: list[list[int]] = []  # bins, merged
    count = cells = 0  # rows and cells filled of the last group
    widest: list[int] = []  # the longest list of each column in the last group
    for index, value in enumerate(found.tolist()):  # (a bin per power of two: a few dozen)
        inside = bins == value
        size, used = int(inside.sum()), int(total[inside].sum())
        tops = [int(s[inside].max()) for s in sizes.values()]
        wider = [max(a, b) for a, b in zip(widest, tops, strict=True)] if groups else tops
        if groups and (count + size) * sum(wider) <= _PADDING_SLACK * (count + size + cells + used):
            groups[-1].append(index)
            count, cells, widest = count + size, cells + used, wider
        else:
            groups.append([index])
            count, cells, widest = size, used, tops
    if len(groups) == 1:
        return [np.arange(rows)]
    return [np.flatnonzero(np.isin(bins, found[group])) for group in groups]


def _values_in(column: pa.Array) -> int:
    """How many values the lists of a list column hold (from its offsets: no pass)."""
    if not len(column):
        return 0
    offsets = column.offsets
    return int(offsets[-1].as_py() - offsets[0].as_py())


def _gathered(parts: Sequence[ChunkScores], groups: Sequence[IntArray], rows: int) -> ChunkScores:
    """One chunk's scores from those of its groups of rows (``groups[i]``: the rows of
    ``parts[i]``). A metric that failed on a group failed on the chunk: its values NA, as
    in one batch."""
    problems = tuple(p for part in parts for p in part.problems)
    failures = {label: why for part in parts for label, why in part.failures.items()}

    def spread(arrays: Sequence[npt.NDArray[Any]]) -> npt.NDArray[Any]:
        out = np.empty(rows, dtype=arrays[0].dtype)
        for array, where in zip(arrays, groups, strict=True):
            out[where] = array
        return out

    duplicates = spread([part.duplicates for part in parts])
    has_output = spread([part.has_output for part in parts])
    no_relevant = spread([part.no_relevant for part in parts])
    if problems:
        return ChunkScores({}, {}, {}, duplicates, has_output, no_relevant, problems)
    values = {
        label: np.full(rows, np.nan)
        if label in failures
        else spread([part.values[label] for part in parts])
        for label in parts[0].values
    }
    details = {}
    for label in dict.fromkeys(label for part in parts for label in part.details):
        if label in failures:
            continue  # (as one batch: no details from a metric that failed)
        found = np.full(rows, None, dtype=object)
        for part, where in zip(parts, groups, strict=True):
            if label in part.details:
                entries = np.empty(len(where), dtype=object)
                entries[:] = part.details[label]
                found[where] = entries
        details[label] = found.tolist()
    judged = {
        k: (spread([p.judged[k][0] for p in parts]), spread([p.judged[k][1] for p in parts]))
        for k in parts[0].judged
    }
    return ChunkScores(
        values, details, {}, duplicates, has_output, no_relevant, failures=failures, judged=judged
    )


def score_batch(batch: Batch, plan: Plan, *, judged: bool = True) -> ChunkScores:
    """Score a compiled chunk: its requirements and checks first, then each metric; with
    ``judged``, how many judged documents each sample's top k holds for the plan's
    judged diagnostics (which a sample scored alone, ``Scorer.add``, has no use for)."""
    problems = (
        [
            p
            for m, label in zip(plan.metrics, plan.labels, strict=True)
            for p in missing_requirements(m, label, batch)
        ]
        if lacking_any(plan.needs, batch)
        else []
    )
    checked = (plan.metrics[i].check(batch) for i in plan.hooks["check"])  # type: ignore[attr-defined]
    problems += dict.fromkeys(p for found in checked for p in found)  # once, not per metric
    no_relevant = batch.has("relevance") & (batch.num_relevant() == 0)
    if problems:
        return ChunkScores(
            {}, {}, {}, batch.duplicates_dropped, batch.has_output, no_relevant, tuple(problems)
        )
    values, details, reports, failures = {}, {}, {}, {}
    explains, summarizes = plan.hooks["details"], plan.hooks["summarize"]
    for i, (metric, label, distribution) in enumerate(
        zip(plan.metrics, plan.labels, plan.distributions, strict=True)
    ):
        try:
            values[label] = call_score(metric, label, distribution, batch)
        except MetricScoreError as error:  # that metric's failure: NA, the others go on
            values[label] = np.full(len(batch), np.nan)
            failures[label] = str(error)
            continue
        explained = metric.details(batch) if i in explains else None  # type: ignore[attr-defined]
        if explained is not None:
            details[label] = list(explained)
        report = metric.summarize(batch, values[label]) if i in summarizes else None  # type: ignore[attr-defined]
        if report is not None:
            reports[label] = dict(report)
    return ChunkScores(
        values,
        details,
        reports,
        batch.duplicates_dropped,
        batch.has_output,
        no_relevant,
        failures=failures,
        judged={k: _judged_at(batch, k) for k in plan.judged_cutoffs} if judged else {},
    )


def _judged_at(batch: Batch, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per sample, its judged documents among its top k, and how many documents that is
    (one running count for every cutoff: all_trec asks for nine)."""
    judged = batch.at_k(batch.judged_found(), k).astype(np.int64)
    return judged, np.minimum(batch.lengths, batch.cutoffs(k)).astype(np.int64)


# -- the driver ----------------------------------------------------------------------------------


@attrs.frozen
class Source:
    """What a run knows about its dataset before scoring: name, content hash (or how to
    compute it), number of samples, outputs for unknown ids and the raw outputs to keep.
    (The samples the system failed on are the outputs' error rows.)"""

    name: str | None
    digest: str | Callable[[], str]
    samples: int
    unknown: Sequence[str] | Callable[[], Sequence[str]] = ()
    outputs: Mapping[str, Any] | None = None


@attrs.frozen
class Gathering:
    """How chunks' scores are gathered into results, wherever a chunk is summed: the
    metrics' labels, what a sample with no output (and no error row) is, ``strict``,
    whether per-sample values are kept for the results (``keep``: their means then come
    from ``aggregate``) and whether per-sample rows are wanted (``rows``: kept, or
    written to a sink)."""

    labels: tuple[str, ...]
    missing: MissingOutputs
    strict: bool
    keep: bool
    rows: bool


@attrs.frozen
class Summed:
    """What one chunk of scored samples adds to the results (:func:`summed`), in a form
    that ships small: counts, the ids a diagnostic lists, exact sums (``tallies``) and
    the bootstrap's block sums (``resampled``) unless values are kept, and the
    per-sample rows only when wanted."""

    count: int
    problems: tuple[Problem, ...]
    duplicates: int
    repeats: int
    repeated: list[str]
    missing: list[str]
    errors: dict[str, str]  # the chunk's error rows (sample id -> why), in row order
    no_relevant: list[str]
    judged: dict[int, tuple[int, int]]
    failures: dict[str, str]
    failed: dict[str, int]
    tallies: dict[str, Tally] | None
    resampled: Resampled | None
    rows: RowChunk | None
    reports: Mapping[str, Mapping[str, Any]]


def summed(
    ids: pa.Array,
    metadata: pa.Array,
    error: pa.Array,
    scores: ChunkScores,
    gathering: Gathering,
    position: int,
) -> Summed:
    """What a chunk of samples (``ids``, from dataset position ``position`` on; ``error``:
    why the system failed on each, null for an output) and their scores add to the
    results."""
    failed = error.is_valid().to_numpy(zero_copy_only=False)  # the error rows
    dropped = scores.duplicates > 0
    repeated = ids.filter(pa.array(dropped))
    missing = ~scores.has_output & ~failed
    missing_ids: list[str] = []
    if gathering.missing == "empty":
        missing_ids = ids.filter(pa.array(missing)).to_pylist()
    else:
        failed = failed | missing
    errors: dict[str, str] = {}
    if failed.any():  # sample id -> why, in row order
        why = pc.fill_null(error, NO_OUTPUT).filter(pa.array(failed))
        failed_ids = ids.filter(pa.array(failed)).to_pylist()
        errors = dict(zip(failed_ids, why.to_pylist(), strict=True))
    common = {
        "count": len(ids),
        "problems": scores.problems,
        "duplicates": int(scores.duplicates.sum()),
        "repeats": int(dropped.sum()),
        "repeated": (repeated if gathering.strict else repeated.slice(0, 5)).to_pylist(),
        "missing": missing_ids,
        "errors": errors,
        "no_relevant": ids.filter(pa.array(scores.no_relevant)).to_pylist(),
        "reports": scores.reports,
    }
    if scores.problems:
        return Summed(
            **common, judged={}, failures={}, failed={}, tallies=None, resampled=None, rows=None
        )  # type: ignore[arg-type]
    judged = {
        k: (int(judged[~failed].sum()), int(slots[~failed].sum()))
        for k, (judged, slots) in scores.judged.items()
    }
    values, failures, failed_counts = {}, {}, {}
    for label in gathering.labels:
        column = np.array(scores.values[label], dtype=np.float64)  # writable (Ray's are not)
        column[failed] = np.nan
        if label in scores.failures:
            failures[label] = scores.failures[label]
            failed_counts[label] = int((failed | scores.failed_for(label)).sum())
        else:
            failed_counts[label] = int(failed.sum())
        values[label] = column
    tallies, resampled = None, None
    if not gathering.keep:
        tallies = {label: Tally() for label in gathering.labels}
        for label, tally in tallies.items():
            tally.add(values[label])
        if gathering.labels:
            matrix = np.column_stack([values[label] for label in gathering.labels])
            resampled = Bootstrap(len(gathering.labels)).part(matrix, position)
    rows = None
    if gathering.rows:
        details = {
            label: scores.details.get(label) or [None] * len(ids) for label in scores.details
        }
        shown = metadata if metadata.null_count < len(metadata) else None
        rows = RowChunk(ids, values, details, errors, shown)
    return Summed(
        **common,  # type: ignore[arg-type]
        judged=judged,
        failures=failures,
        failed=failed_counts,
        tallies=tallies,
        resampled=resampled,
        rows=rows,
    )


class _Collected:
    """Everything gathered over the chunks, in dataset order."""

    def __init__(self, plan: Plan, gathering: Gathering) -> None:
        self.plan, self.gathering = plan, gathering
        self.keep = gathering.keep
        # the error rows (sample id -> why it failed), and, as missing says, the samples
        # without an output
        self.errors: dict[str, str] = {}
        # kept values are summed once at the end; streamed ones are tallied chunk by chunk
        self.tallies = {} if self.keep else {label: Tally() for label in plan.labels}
        self.bootstrap = None if self.keep else Bootstrap(len(plan.labels))
        self.problems: list[Problem] = []
        self.duplicates = 0
        self.repeated: list[str] = []
        self.repeats = 0  # samples with a repeated id
        self.missing: list[str] = []
        self.no_relevant: list[str] = []
        self.ids: list[pa.Array] = []
        self.metadata: list[pa.Array] = []
        self.values: dict[str, list[FloatArray]] = {label: [] for label in plan.labels}
        self.details: dict[str, list[Any]] = {}
        self.reports: Mapping[str, Mapping[str, Any]] = {}
        self.folded = False  # the bootstrap folded where the parts were made
        self.chunks = 0
        self.rows = 0
        self.metric_errors: dict[str, str] = {}  # label -> the first reason it failed
        self.failed = dict.fromkeys(plan.labels, 0)  # per label: samples NA from a failure
        self.judged = {k: [0, 0] for k in plan.judged_cutoffs}  # k -> [judged, slots]

    def merge(self, part: Summed) -> RowChunk | None:
        """Take what the next chunk in dataset order adds; returns its rows (None when it
        had input problems, or rows are not wanted)."""
        self.chunks += 1
        self.problems += part.problems
        self.duplicates += part.duplicates
        self.repeats += part.repeats
        if self.gathering.strict or len(self.repeated) < 5:  # every one for the error
            self.repeated += part.repeated
        self.missing += part.missing
        self.errors.update(part.errors)
        self.no_relevant += part.no_relevant
        if self.problems:
            return None
        for k, (judged, slots) in part.judged.items():
            self.judged[k][0] += judged
            self.judged[k][1] += slots
        for label, reason in part.failures.items():
            self.metric_errors.setdefault(label, reason)
        for label, count in part.failed.items():
            self.failed[label] += count
        for label, tally in (part.tallies or {}).items():
            self.tallies[label].merge(tally)
        if self.bootstrap is not None and part.resampled is not None:
            self.bootstrap.merge(part.resampled)
        self.reports = part.reports if self.chunks == 1 else {}
        rows = part.rows
        if rows is not None and self.keep:
            for label in rows.details:
                self.details.setdefault(label, [None] * self.rows)
            for label in self.details:
                self.details[label] += rows.details.get(label) or [None] * len(rows)
            self.ids.append(rows.ids)
            self.metadata.append(
                rows.metadata if rows.metadata is not None else pa.nulls(len(rows), pa.string())
            )
            for label in self.plan.labels:
                self.values[label].append(rows.values[label])
        self.rows += part.count
        return rows

    def raise_problems(self, strict: bool, unknown: Sequence[str]) -> None:
        if self.problems:  # (a dataset-wide problem is found by every chunk: once)
            raise MetricRequirementError(
                dict.fromkeys(self.problems),
                summary="the samples cannot be scored as the metrics need",
            )
        if strict and self.repeated:
            raise InputError(
                [
                    Problem(
                        "the ranked list repeats a document id",
                        sample_id=i,
                        pointer="/actual_output/retrieved",
                    )
                    for i in self.repeated
                ],
                summary="duplicate ids in rankings",
            )
        if strict and unknown:
            raise InputError(
                [
                    Problem("output for a sample id not in the dataset", sample_id=i)
                    for i in unknown
                ],
                summary="outputs do not match the dataset",
            )


def evaluate(
    plan: Plan,
    chunks: Iterable[Columns],
    source: Source,
    *,
    shape: Shape | None,
    executor: Executor,
    strict: bool = False,
    sink: Sink | None = None,
    keep: bool = True,
    progress: bool | None = False,
    provenance: Mapping[str, Any] | None = None,
    missing: MissingOutputs = "error",
) -> Results:
    """Score chunks (in dataset order) on the executor and gather the results; rows go
    to ``sink`` as they are scored and stay in memory when ``keep``. A sample with no
    output (and no error row) is as ``missing`` says."""
    gathering = Gathering(plan.labels, missing, strict, keep, keep or sink is not None)
    remote = executor.name not in IN_PROCESS
    held: deque[Columns] = deque()

    def tasks() -> Iterator[ChunkTask]:
        for chunk in chunks:
            held.append(chunk)  # until its scores come back: bounded by the executor
            yield ChunkTask(chunk.compact() if remote else chunk, plan, shape)

    def parts() -> Iterator[Summed]:
        position = 0
        for scores in executor.map(score_chunk, tasks()):
            chunk = held.popleft()
            columns = chunk.ids, chunk.column("metadata"), chunk.column("error")
            yield summed(*columns, scores, gathering, position)
            position += len(chunk)

    return gather(
        plan, source, gathering, parts(), sink=sink, progress=progress, provenance=provenance
    )


def gather(
    plan: Plan,
    source: Source,
    gathering: Gathering,
    parts: Iterable[Summed],
    *,
    sink: Sink | None = None,
    progress: bool | None = False,
    provenance: Mapping[str, Any] | None = None,
    folded: Bootstrap | None = None,
) -> Results:
    """The results of what each chunk adds (``parts``, in dataset order); rows go to
    ``sink`` as they come. ``folded``: the bootstrap the parts' block sums were folded
    into already (where the parts were made), instead of the parts'."""
    created = created_at()  # a bad SOURCE_DATE_EPOCH is an error before scoring, not after
    collected = _Collected(plan, gathering)
    if folded is not None:  # (on Ray: samples scored where they were read, no reports)
        collected.bootstrap, collected.folded = folded, True
    digest = source.digest
    try:
        if sink is not None:
            digest = digest() if callable(digest) else digest
            sink.start(document_header(source.name, digest, source.samples, plan.records))
        with _Progress(progress, source.samples) as advance:
            for part in parts:
                rows = collected.merge(part)
                if rows is not None and sink is not None:
                    sink.write(rows)
                advance(part.count)
        unknown = list(source.unknown() if callable(source.unknown) else source.unknown)
        collected.raise_problems(gathering.strict, unknown)
        results = _results(
            plan, source, collected, digest, unknown, gathering.keep, created, provenance
        )
        if sink is not None:
            sink.finish(results.trailer(), plan.labels)
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    return results


def _counts(scores: Mapping[str, FloatArray]) -> dict[str, tuple[int, int]]:
    """(values, NAs) of each label."""
    nas = {label: int(np.isnan(values).sum()) for label, values in scores.items()}
    return {label: (values.size - nas[label], nas[label]) for label, values in scores.items()}


def _results(
    plan: Plan,
    source: Source,
    collected: _Collected,
    digest: str | Callable[[], str],
    unknown: Sequence[str],
    keep: bool,
    created: str,
    provenance: Mapping[str, Any] | None,
) -> Results:
    if collected.repeated:
        log.warning(
            "outputs.duplicates_dropped",
            samples=collected.repeats,
            dropped=collected.duplicates,
            examples=collected.repeated[:5],
        )
    if unknown:
        log.warning("outputs.unknown_ids", count=len(unknown), examples=list(unknown[:5]))
    for label, reason in collected.metric_errors.items():
        log.warning("metric.failed", metric=label, error=reason)
    if (collected.chunks > 1 or collected.folded) and plan.reports:
        log.warning(
            "evaluation.reports_omitted",
            reason="run-level reports need every sample in one chunk, in one process",
        )
    scores = {
        label: np.concatenate(parts) if parts else np.zeros(0)
        for label, parts in collected.values.items()
    }
    aggregates = {
        label: float(metric.aggregate(scores[label])) if keep else collected.tallies[label].mean
        for metric, label in zip(plan.metrics, plan.labels, strict=True)
    }
    bootstrap = collected.bootstrap
    intervals = (
        None if bootstrap is None else dict(zip(plan.labels, bootstrap.intervals(), strict=True))
    )
    ids = pa.concat_arrays(collected.ids) if collected.ids else pa.array([], pa.string())
    metadata = pa.concat_arrays(collected.metadata) if collected.metadata else None
    return Results(
        dataset_name=source.name,
        dataset_hash=digest,
        ids=ids if keep else pa.array([], pa.string()),
        metrics=list(plan.records),
        aggregates=aggregates,
        counts=_counts(scores) if keep else {k: (t.n, t.na) for k, t in collected.tallies.items()},
        diagnostics=Diagnostics(
            missing_outputs=tuple(collected.missing),
            duplicate_ids_dropped=collected.duplicates,
            no_relevant=tuple(collected.no_relevant),
            unknown_output_ids=tuple(unknown),
            errors=collected.errors,
            metric_errors=dict(collected.metric_errors),
            judged={k: (judged, slots) for k, (judged, slots) in collected.judged.items()},
        ),
        provenance={
            "slotwise": VERSION,
            "python": platform.python_version(),
            "created": created,
            "config_default_k": plan.default_k,
            **(provenance or {}),
        },
        scores=scores if keep else None,
        details=collected.details if keep else {},
        reports=dict(collected.reports),
        outputs=dict(source.outputs) if source.outputs is not None else None,
        metadata=metadata if metadata is not None and metadata.null_count < len(metadata) else None,
        intervals=intervals,
        samples=source.samples,
        failures=dict(collected.failed),
    )


class _Progress:
    """A rich progress bar with throughput on a terminal (or when forced); else a no-op."""

    def __init__(self, enabled: bool | None, total: int) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total = total

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda count: None
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._bar.start()
        task = self._bar.add_task("scoring", total=self.total, rate="")

        def advance(count: int) -> None:
            self._bar.advance(task, count)
            speed = self._bar.tasks[0].speed
            self._bar.update(task, rate=f"{speed:,.0f} samples/s" if speed else "")

        return advance

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()


# -- in memory -----------------------------------------------------------------------------------


def aligned(samples: Columns, outputs: Columns) -> tuple[Columns, list[str]]:
    """Samples with their outputs beside them (a row of nulls where a sample has none),
    and the ids of outputs for samples not in the dataset."""
    position = pc.index_in(outputs.ids, value_set=samples.ids)
    known = position.is_valid().to_numpy(zero_copy_only=False)
    unknown = sorted(outputs.ids.filter(pa.array(~known)).to_pylist())
    rows = np.full(len(samples), -1, dtype=np.int64)
    rows[position.filter(pa.array(known)).to_numpy(zero_copy_only=False)] = np.flatnonzero(known)
    in_order = len(outputs) == len(samples) and bool((rows == np.arange(rows.size)).all())
    joined = samples.beside(outputs if in_order else outputs.take(rows))
    pa.default_memory_pool().release_unused()  # what recoding freed: give it back
    return joined, unknown


def check_overlap(
    outputs: int, unknown: Sequence[str], samples: pa.Array, source: str | None = None
) -> None:
    """Outputs that would score nothing are an error (``source``: where they were read):
    none at all (an empty outputs file or mapping), or none for a sample of the dataset
    (outputs of another dataset; the ids of both are named). Some for ids not in the
    dataset stay a warning (see :func:`evaluate`)."""
    if outputs and len(unknown) < outputs:
        return
    if not outputs:
        message = "no outputs (and no error rows): nothing to score"
    else:
        theirs = ", ".join(map(repr, sorted(unknown)[:3])) + (", ..." if len(unknown) > 3 else "")
        ours = ", ".join(map(repr, samples[:3].to_pylist())) + (", ..." if len(samples) > 3 else "")
        message = (
            f"none of the {outputs} output(s) is for a sample of the dataset: their ids "
            f"({theirs}) are not in the dataset, whose samples are {ours}"
        )
    raise InputError([Problem(message, source=source)], summary="outputs do not match the dataset")


def slices(columns: Columns, size: int | None) -> list[Columns]:
    """The table in chunks of ``size`` rows (one chunk when None)."""
    if size is None or size >= len(columns):
        return [columns]
    return [columns.slice(start, size) for start in range(0, len(columns), size)]


# -- streams -------------------------------------------------------------------------------------


#: Where a stream's repeated ids are: (what, the ids) -> problems naming file and line.
Locate = Callable[[str, list[str]], list[Problem]]


def _repeated(ids: pa.Array, what: str, locate: Locate | None) -> None:
    counts = pc.value_counts(ids)
    repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1)).to_pylist()
    if repeated:
        located = locate(what, repeated) if locate is not None else []
        named = {problem.sample_id for problem in located}
        raise InputError(
            located
            + [
                Problem(f"{what} id appears more than once", sample_id=i)
                for i in repeated
                if i not in named
            ],
            summary=f"repeated {what} ids (a stream needs each id once; TREC and columnar "
            "files must keep each query's lines together)",
        )


@attrs.frozen
class FirstPass:
    """What a streamed evaluation learns before scoring: the padding shape, the content
    hash, every sample id in order, the outputs for ids not in the dataset, and how many
    outputs there are."""

    shape: Shape
    digest: str
    ids: pa.Array
    unknown: tuple[str, ...]
    outputs: int  # output rows (error rows too)


def first_pass(
    samples: Iterable[Columns],
    outputs: Iterable[tuple[pa.Array, Mapping[str, Any]]],
    locate: Locate | None = None,
) -> FirstPass:
    """Read the samples, and the outputs' ids and list lengths, once: shape, hash and
    ids; repeated ids are an error (``locate`` names where, for inputs it can read)."""
    from engine.io.columns import ContentHash

    shape, digest, ids = Shape(), ContentHash(), []
    for block in samples:
        shape = shape.merge(Shape.of(block))
        digest.update(block)
        ids.append(block.ids)
    if not ids or not sum(map(len, ids)):
        raise InputError([Problem("the dataset has no samples")], summary="invalid dataset")
    all_ids = pa.concat_arrays(ids)
    _repeated(all_ids, "sample", locate)
    output_ids: list[pa.Array] = []
    sizes: dict[str, list[Any]] = {}
    for block_ids, block_sizes in outputs:
        output_ids.append(block_ids)
        for name, size in block_sizes.items():
            sizes.setdefault(name, []).append(size)
    if output_ids:
        every = pa.concat_arrays(output_ids)
        _repeated(every, "output", locate)
        known = pc.is_in(every, value_set=all_ids).to_numpy(zero_copy_only=False)
        unknown = tuple(every.filter(pa.array(~known)).to_pylist())
        widths = {
            name: int(np.concatenate(parts)[known].max(initial=0)) for name, parts in sizes.items()
        }
        shape = shape.merge(Shape(widths))
    count = sum(map(len, output_ids))
    return FirstPass(shape, digest.hexdigest(), all_ids, unknown if output_ids else (), count)


def prefetched(items: Iterable[Any], depth: int = 2) -> Iterator[Any]:
    """``items``, produced by a background thread up to ``depth`` ahead of the consumer:
    reading and parsing the next chunk (pyarrow and numpy release the GIL) overlaps with
    scoring this one. An exception in the producer is raised in the consumer."""
    import queue
    import threading

    found: queue.Queue[tuple[str, Any]] = queue.Queue(depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        found.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            found.put(("end", None))
        except BaseException as error:
            found.put(("error", error))

    worker = threading.Thread(target=produce, name="slotwise-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            kind, item = found.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


def _rechunked(blocks: Iterable[Columns], size: int) -> Iterator[Columns]:
    """Blocks of any sizes as chunks of exactly ``size`` rows (the last may be short)."""
    parts: list[Columns] = []
    count = 0
    for block in blocks:
        parts.append(block)
        count += len(block)
        if count < size:
            continue
        joined = stack(parts) if len(parts) > 1 else parts[0]
        start = 0
        while count - start >= size:
            yield joined.slice(start, size)
            start += size
        count -= start
        parts = [joined.slice(start, count).compact()] if count else []  # its ids only
    if count:
        yield stack(parts) if len(parts) > 1 else parts[0]


def streamed_chunks(
    samples: Iterable[Columns], outputs: Iterable[Columns], first: FirstPass, size: int
) -> Iterator[Columns]:
    """Chunks of ``size`` samples with their outputs beside them. Outputs must come in
    about the dataset's order: each is held until its sample's chunk comes, at most
    ``size`` of them ahead; an output that arrives after its sample's chunk was scored is
    an error (never a wrong number)."""
    unknown = pa.array(first.unknown, pa.string())
    stream = iter(outputs)
    pending: Columns | None = None

    def ahead(chunk: Columns) -> int:
        """Pending outputs that are not for this chunk."""
        if pending is None:
            return 0
        return int(pc.sum(pc.invert(pc.is_in(pending.ids, value_set=chunk.ids))).as_py() or 0)

    for chunk in _rechunked(samples, size):
        while ahead(chunk) < size:
            block = next(stream, None)
            if block is None:
                break
            if len(unknown):
                block = Columns(
                    block.table.filter(pc.invert(pc.is_in(block.ids, value_set=unknown))),
                    block.docs,
                )
            pending = block if pending is None else stack([pending, block])
        if pending is None:
            yield chunk
            continue
        position = pc.index_in(pending.ids, value_set=chunk.ids)
        found = position.is_valid().to_numpy(zero_copy_only=False)
        rows = np.full(len(chunk), -1, dtype=np.int64)
        rows[position.filter(pa.array(found)).to_numpy(zero_copy_only=False)] = np.flatnonzero(
            found
        )
        yield chunk.beside(pending.take(rows))
        pending = pending.take(np.flatnonzero(~found)).compact()  # its ids only: bounded
    skipped = set(first.unknown)
    late = [] if pending is None else pending.ids.to_pylist()
    late += [i for block in stream for i in block.ids.to_pylist() if i not in skipped]
    if late:
        raise StreamingError(
            f"the output for sample {late[0]!r} comes after its place in the dataset's order: "
            "sort the outputs like the dataset (or raise chunk_size) to stream them"
        )
