"""The columnar Batch every metric scores: a chunk of samples with their outputs, rankings
joined with labels once, as padded 2-D numpy arrays (one row per sample, one column per
rank)."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import cached_property
from typing import Any, TypeVar

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.io.columns import Columns, lengths
from engine.io.config import DEFAULT_K

T = TypeVar("T")

__all__ = [
    "DEFAULT_K",
    "PADDED",
    "Batch",
    "Flat",
    "Groups",
    "Shape",
    "row_sums",
    "trec_eval_level_order",
]

_SHIFT = np.int64(32)  # key = row << 32 | document code

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: List columns whose rows a Batch pads to a width, the same for every chunk of a dataset.
PADDED = ("retrieved", "relevance", "grades", "pool")


def row_sums(values: FloatArray) -> FloatArray:
    """Each row summed left to right (trec_eval's order). Trailing zero padding then never
    changes a sum, so a sample scores the same alone, in a chunk or in the whole dataset,
    bit for bit; ``values.sum(axis=1)`` groups its terms by the row's width."""
    sums: FloatArray = np.zeros(values.shape[0])
    for column in range(values.shape[1]):  # a vector add per rank: half cumsum's time
        sums += values[:, column]
    return sums


@attrs.frozen
class Shape:
    """What the padding of a Batch must not depend on, fixed for a whole dataset: the
    longest list (repeated ids included) of each padded list column, and the largest
    relevance label (0 when there is none)."""

    widths: Mapping[str, int] = attrs.field(factory=dict)
    max_label: float = 0.0

    @classmethod
    def of(cls, columns: Columns) -> Shape:
        widths = {name: _widest(columns.column(name)) for name in PADDED if columns.has(name)}
        return cls(widths, _max_label(columns.column("relevance")))

    def merge(self, other: Shape) -> Shape:
        names = set(self.widths) | set(other.widths)
        widths = {n: max(self.widths.get(n, 0), other.widths.get(n, 0)) for n in names}
        return Shape(widths, max(self.max_label, other.max_label))


@attrs.frozen
class Flat:
    """What :meth:`Batch.compile` joins, as flat arrays: every ranked document code, row
    by row, and each row's count (repeats included); every relevance label's document
    code and value, row by row, and each row's count; per row ``metadata.k`` (0 when
    unset) and whether it has an output."""

    retrieved: npt.NDArray[np.int32]
    retrieved_lengths: IntArray
    label_codes: IntArray
    label_values: FloatArray
    label_lengths: IntArray
    k: IntArray
    has_output: BoolArray

    @classmethod
    def of(cls, columns: Columns) -> Flat:
        """The arrays read from ``columns``' ``retrieved``, ``relevance`` and ``k``."""
        codes, sizes = columns.doc_codes("retrieved")
        k = columns.column("k").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        has_output = columns.column("retrieved").is_valid().to_numpy(zero_copy_only=False)
        return cls(codes, sizes, *_label_arrays(columns.column("relevance")), k, has_output)


def _label_arrays(column: pa.Array) -> tuple[IntArray, FloatArray, IntArray]:
    """A label column (``relevance``, ``utility``, ``grades``) as flat arrays: each
    label's document code and value, row by row, and each row's count."""
    entries = pc.list_flatten(column)
    codes = entries.field("doc").to_numpy(zero_copy_only=False).astype(np.int64)
    values = entries.field("label").to_numpy(zero_copy_only=False).astype(np.float64)
    return codes, values, lengths(column)


def _running(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Each row's running total, left to right, read-only for sharing."""
    kind = np.int32 if values.dtype == np.bool_ else None
    return _read_only(np.add.accumulate(values, axis=1, dtype=kind))  # cumsum, less wrapped


def _read_only(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    values.flags.writeable = False
    return values


def _owners(sizes: IntArray) -> IntArray:
    return np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)


def _first_occurrences(keys: IntArray) -> BoolArray:
    """True at the first occurrence of each key (a sort-and-compare shortcut when no key
    repeats, the common case)."""
    keep = np.ones(keys.size, dtype=np.bool_)
    ordered = np.sort(keys)
    if keys.size < 2 or not (ordered[1:] == ordered[:-1]).any():
        return keep
    keep[:] = False
    keep[np.unique(keys, return_index=True)[1]] = True
    return keep


def _padding(shape: Shape | None, flat: Flat, columns: Columns) -> Shape:
    """``shape`` with a batch's own widths where it lacks them (all of it when None)."""
    if shape is not None and "retrieved" in shape.widths and "relevance" in shape.widths:
        return shape
    own = {  # Python's max: a one-sample batch's own widths in no numpy call
        "retrieved": max(flat.retrieved_lengths.tolist(), default=0),
        "relevance": max(flat.label_lengths.tolist(), default=0),
    }
    if shape is None:
        return Shape(own, _max_label(columns.column("relevance")))
    return Shape({**own, **shape.widths}, shape.max_label)


def _widest(column: pa.Array) -> int:
    """The longest list of a list column (0 when there is none)."""
    longest = pc.max(pc.list_value_length(column)).as_py()
    return int(longest or 0)


def _columns_of(owners: IntArray, rows: int) -> tuple[IntArray, IntArray]:
    """For items grouped by owner (non-decreasing): each item's column, and row lengths."""
    sizes = np.bincount(owners, minlength=rows).astype(np.int64)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.arange(owners.size, dtype=np.int64) - starts, sizes


@attrs.frozen
class Groups:
    """The groups (facets) of each sample: ``count`` per sample, and per member document
    its ``sample``, ``group`` (index over all groups) and document ``code``."""

    count: IntArray
    sample: IntArray
    group: IntArray
    code: IntArray


@attrs.define(slots=False, eq=False)
class Batch:
    """Samples and their outputs compiled into arrays of shape ``(Q, L)`` (``L``: the
    longest ranking of the dataset) and ``(Q, M)`` (``M``: the most relevance labels of
    any sample).

    Build with :meth:`compile`. Padding: ``doc_codes == -1``; ``ranked_labels`` is NaN
    for padding and for unjudged documents.
    """

    columns: Columns
    doc_codes: npt.NDArray[np.int32]
    positions: IntArray
    lengths: IntArray
    ranked_labels: FloatArray
    label_values: FloatArray
    sample_k: IntArray
    duplicates_dropped: IntArray
    has_output: BoolArray
    shape: Shape
    default_k: int = DEFAULT_K
    _label_counts: dict[tuple[float, ...], IntArray] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _labels: dict[str, tuple[IntArray, FloatArray]] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _views: dict[tuple[str, str], FloatArray] = attrs.field(factory=dict, init=False, repr=False)
    _shared: dict[Hashable, Any] = attrs.field(factory=dict, init=False, repr=False)

    @classmethod
    def compile(
        cls,
        columns: Columns,
        default_k: int = DEFAULT_K,
        shape: Shape | None = None,
        flat: Flat | None = None,
    ) -> Batch:
        """Join each sample's ranking with its labels. ``shape`` fixes the padding for
        every chunk of a dataset (by default this batch's own); ``flat``: the arrays
        :meth:`Flat.of` reads from ``columns``, when the caller has them already."""
        n = len(columns)
        flat = Flat.of(columns) if flat is None else flat
        codes, raw_lengths = flat.retrieved, flat.retrieved_lengths
        shape = _padding(shape, flat, columns)
        width = shape.widths["retrieved"]
        index = _rectangular_index(codes, raw_lengths, width, len(columns.docs))  # common
        if index is not None:  # every ranking fills the width, none repeats an id
            doc_codes = codes.reshape(n, width)
            positions = np.broadcast_to(np.arange(width, dtype=np.int64), (n, width))
            kept_lengths, dropped = raw_lengths, np.zeros(n, dtype=np.int64)
        else:
            owners = _owners(raw_lengths)
            keep = _first_occurrences((owners << _SHIFT) | codes)
            original_col, _ = _columns_of(owners, n)
            col, kept_lengths = _columns_of(owners[keep], n)
            doc_codes = np.full((n, width), -1, dtype=np.int32)
            doc_codes[owners[keep], col] = codes[keep]
            positions = np.full((n, width), -1, dtype=np.int64)
            positions[owners[keep], col] = original_col[keep]
            dropped = np.bincount(owners[~keep], minlength=n).astype(np.int64)
        label_rows = _owners(flat.label_lengths)
        batch = cls(
            columns=columns,
            doc_codes=doc_codes,
            positions=positions,
            lengths=kept_lengths.astype(np.int64),
            ranked_labels=np.empty((n, width)),
            label_values=_sorted_labels(
                flat.label_lengths, flat.label_values, shape.widths["relevance"]
            ),
            sample_k=flat.k,
            duplicates_dropped=dropped,
            has_output=flat.has_output,
            shape=shape,
            default_k=default_k,
        )
        if index is not None:
            batch.__dict__["_ranked_index"] = index
        batch.ranked_labels = batch._join(label_rows, flat.label_codes, flat.label_values)
        return batch

    @classmethod
    def one(
        cls, columns: Columns, flat: Flat, vocabulary: int, shape: Shape, default_k: int = DEFAULT_K
    ) -> Batch:
        """:meth:`compile`'s Batch of one sample whose labels name each document once,
        every code below ``vocabulary``: each ranked label read from a table by code
        instead of compile's sort and search (the cost of one sample, for
        :class:`~engine.evaluation.scorer.Scorer`). A ranking that repeats a document is
        compiled as a chunk is."""
        size = flat.retrieved.size
        if size and int(np.bincount(flat.retrieved).max()) > 1:
            return cls.compile(columns, default_k, shape, flat)
        shape = _padding(shape, flat, columns)
        width = shape.widths["retrieved"]
        positions = np.arange(width, dtype=np.int64).reshape(1, width)
        if size == width:  # a dataset without outputs pads to the output's own length
            doc_codes = flat.retrieved.reshape(1, width)
        else:
            doc_codes = np.full((1, width), -1, dtype=np.int32)
            doc_codes[0, :size] = flat.retrieved
            positions[0, size:] = -1
        by_code = np.full(vocabulary + 1, np.nan)  # the last: padding's (code -1)
        by_code[flat.label_codes] = flat.label_values
        return cls(
            columns=columns,
            doc_codes=doc_codes,
            positions=positions,
            lengths=flat.retrieved_lengths.astype(np.int64),
            ranked_labels=by_code[doc_codes],
            label_values=_sorted_labels(
                flat.label_lengths, flat.label_values, shape.widths["relevance"]
            ),
            sample_k=flat.k,
            duplicates_dropped=np.zeros(1, dtype=np.int64),
            has_output=flat.has_output,
            shape=shape,
            default_k=default_k,
        )

    # -- shape and cutoffs -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.columns)

    @cached_property
    def sample_ids(self) -> list[str]:
        return self.columns.ids.to_pylist()  # type: ignore[no-any-return]

    @cached_property
    def _rows(self) -> IntArray:
        """0, 1, ... per sample: the row index of a per-sample pick."""
        return np.arange(len(self), dtype=np.int64)

    @cached_property
    def ranks(self) -> IntArray:
        """1-based rank of each column, shape ``(L,)``."""
        return np.arange(1, self.doc_codes.shape[1] + 1, dtype=np.int64)

    @cached_property
    def valid(self) -> BoolArray:
        """True where a column holds a retrieved document (not padding)."""
        return self.doc_codes >= 0

    def cutoffs(self, k: int | None = None) -> IntArray:
        """Per-sample k: the metric's ``k`` when its spec sets one (an explicit ``@10`` is
        10 for every sample); when it leaves k open (None), the sample's ``metadata.k``,
        else the config default."""
        if k is not None or not self.sets_k:
            return np.full(self.sample_k.size, self.default_k if k is None else k, np.int64)
        return np.where(self.sample_k > 0, self.sample_k, self.default_k)

    @cached_property
    def sets_k(self) -> bool:
        """Whether any sample sets its own cutoff (``metadata.k``; every metric asks)."""
        return bool(np.count_nonzero(self.sample_k))  # k is never below 0

    def top_k(self, k: int | None = None) -> BoolArray:
        """Mask of ``D_k``: the first ``min(k, n)`` retrieved documents of each sample."""
        return (self.ranks[None, :] <= self.cutoffs(k)[:, None]) & self.valid

    def ranks_ties_ascending(self) -> IntArray:
        """The rank of each column if tied scores were ordered by doc id *ascending* (as
        ir_measures' msmarco and judged providers order them) rather than descending (as
        trec_eval does): each run of tied items reversed. Shape ``(Q, L)``; the ranks of
        :attr:`ranks` where nothing ties (or the outputs carry no scores)."""
        return self.shared("ranks-ties-ascending", self._ranks_ties_ascending)  # type: ignore[no-any-return]

    @cached_property
    def tied(self) -> BoolArray:
        """True where a ranked document's score equals the one's ranked before it (the
        ``tied`` column), shape ``(Q, L)``; all False when nothing ties or the outputs
        carry no scores."""
        rows, width = self.doc_codes.shape
        column = self.columns.column("tied")
        tied = np.zeros((rows, width), dtype=np.bool_)
        if column.null_count < len(column):
            flags = pc.list_flatten(column).to_numpy(zero_copy_only=False)
            starts = np.concatenate(([0], np.cumsum(lengths(column))))[:-1]
            where = np.nonzero(self.valid)
            tied[where] = flags[starts[where[0]] + self.positions[where]]
            tied[:, 0] = False
            tied &= self.valid
        return _read_only(tied)

    def _ranks_ties_ascending(self) -> IntArray:
        rows, width = self.doc_codes.shape
        tied = self.tied
        index = np.broadcast_to(np.arange(width, dtype=np.int64), (rows, width))
        first = np.maximum.accumulate(np.where(tied, 0, index), axis=1)  # its run's start
        opens = np.where(~tied, index, width)  # where a run starts (padding: each its own)
        after = np.minimum.accumulate(opens[:, ::-1], axis=1)[:, ::-1]  # next start >= here
        end = np.concatenate([after[:, 1:], np.full((rows, 1), width)], axis=1)
        return _read_only(first + end - index)  # 1-based: first + (end - 1 - index) + 1

    def view(self, ties: str = "trec_eval", judged_only: bool = False) -> Batch:
        """This batch with its rankings' tied scores ordered by ``ties`` ("trec_eval": as
        read; "doc_id_ascending": :meth:`ranks_ties_ascending`; "run_order": as the
        outputs gave them, cwl_eval's order) and, with ``judged_only``, without their
        unjudged documents (no label, or one below 0: trec_eval's ``-J``). Its labels,
        cutoffs and columns are this batch's; made once per batch and shared. Views are
        ordered once: a view's :meth:`ranks_ties_ascending` is not its ranks'."""
        if ties == "trec_eval" and not judged_only:
            return self
        return self.shared(("view", ties, judged_only), lambda: self._view(ties, judged_only))  # type: ignore[no-any-return]

    def _view(self, ties: str, judged_only: bool) -> Batch:
        rows, width = self.doc_codes.shape
        if ties == "doc_id_ascending":
            key = self.ranks_ties_ascending()
        elif ties == "run_order":
            key = self._ranks_as_given()
        else:
            key = np.broadcast_to(self.ranks, (rows, width))
        keep = self.valid
        if judged_only:
            with np.errstate(invalid="ignore"):
                keep = keep & (self.ranked_labels >= 0)
        order = np.argsort(np.where(keep, key, width + 1), axis=1, kind="stable")
        kept = np.take_along_axis(keep, order, axis=1)
        return Batch(
            columns=self.columns,
            doc_codes=np.where(kept, np.take_along_axis(self.doc_codes, order, axis=1), -1),
            positions=np.where(kept, np.take_along_axis(self.positions, order, axis=1), -1),
            lengths=kept.sum(axis=1).astype(np.int64),
            ranked_labels=np.where(
                kept, np.take_along_axis(self.ranked_labels, order, axis=1), np.nan
            ),
            label_values=self.label_values,
            sample_k=self.sample_k,
            duplicates_dropped=self.duplicates_dropped,
            has_output=self.has_output,
            shape=self.shape,
            default_k=self.default_k,
        )

    def _ranks_as_given(self) -> IntArray:
        """Each column's rank (a sort key) were tied scores kept in the order the outputs
        gave them (the ``run_order`` column); :attr:`ranks` where nothing ties."""
        rows, width = self.doc_codes.shape
        ranks = np.broadcast_to(self.ranks, (rows, width))
        column = self.columns.column("run_order")
        if column.null_count == len(column):
            return ranks
        given = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.int64)
        starts = np.concatenate(([0], np.cumsum(lengths(column))))[:-1]
        listed = ~np.asarray(column.is_null())[:, None] & self.valid
        where = np.nonzero(listed)
        out = ranks.copy()
        out[where] = given[starts[where[0]] + self.positions[where]] + 1
        return out

    # -- relevance labels ----------------------------------------------------------------

    @cached_property
    def gains(self) -> FloatArray:
        """Gain at each rank: the label if > 0, else 0 (unjudged and padding: 0)."""
        return np.fmax(self.ranked_labels, 0.0)  # NaN (unjudged, padding) and labels < 0: 0

    @cached_property
    def judged(self) -> BoolArray:
        return ~np.isnan(self.ranked_labels)

    def relevant(self, threshold: float = 1.0) -> BoolArray:
        """True at ranks holding a judged document with label >= threshold (NaN, not
        judged, compares False, and quietly: numpy 2 sets no floating-point flag)."""
        return self.ranked_labels >= threshold

    def found(self, threshold: float = 1.0) -> IntArray:
        """The running count of relevant documents (label >= threshold) at each rank:
        ``found(t)[:, k - 1]`` is ``|D_k ∩ Rel|``. Shape ``(Q, L)``, int32, read-only, cached."""
        return self.shared(("found", float(threshold)), lambda: _running(self.relevant(threshold)))

    def judged_found(self) -> IntArray:
        """The running count of judged documents at each rank: ``judged_found()[:, k - 1]``
        is how many of the top k have a label. Shape ``(Q, L)``, int32, read-only, cached."""
        return self.shared("judged-found", lambda: _running(self.judged))

    def at_cutoff(self, running: npt.NDArray[Any], cutoffs: IntArray | None) -> npt.NDArray[Any]:
        """Per sample, a running total over its ranks (shape ``(Q, W)``) at rank
        ``min(cutoff, W)``: the total of its top ``cutoff`` (None: of every rank). 0 for a
        cutoff of 0 or when ``W`` is 0 (cutoffs are never below 0). Totals summed left to
        right, as by ``cumsum``, equal :func:`row_sums` of the masked terms bit for bit."""
        rows, width = running.shape
        if not width:
            return np.zeros(rows, dtype=running.dtype)
        if cutoffs is None:
            return running[:, -1].copy()
        last = np.minimum(cutoffs, width)  # 0: index -1, a value then replaced by 0
        found = running[self._rows, last - 1]
        return found if last.min() > 0 else np.where(last > 0, found, 0)

    def at_k(self, running: npt.NDArray[Any], k: int | None = None) -> npt.NDArray[Any]:
        """:meth:`at_cutoff` at each sample's :meth:`cutoffs` ``(k)``: the total of its top
        k. When every sample has the same k, one column read (no per-sample pick)."""
        if self.sets_k and k is None:
            return self.at_cutoff(running, self.cutoffs(k))
        rows, width = running.shape
        last = min(self.default_k if k is None else k, width)
        return running[:, last - 1].copy() if last > 0 else np.zeros(rows, running.dtype)

    def num_relevant(self, threshold: float = 1.0) -> IntArray:
        """|Rel| per sample: judged documents with label >= threshold (read-only, cached
        per threshold: most measures ask for it)."""
        key = ("num-relevant", float(threshold))
        counts: IntArray = self.shared(key, lambda: self._num_relevant(threshold))
        return counts

    def _num_relevant(self, threshold: float) -> IntArray:
        return _read_only((self.label_values >= threshold).sum(axis=1).astype(np.int64))

    def shared(self, key: Hashable, compute: Callable[[], T]) -> T:
        """A value derived from this batch, computed once by ``compute()`` and shared by
        every metric that asks with the same ``key`` (e.g. arrays a plugin's family has
        in common). Treat it as read-only."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]  # type: ignore[no-any-return]

    def label_counts(self, values: Sequence[float]) -> IntArray:
        """How many relevance labels of each sample equal each of ``values`` (e.g. grade
        counts): shape ``(Q, len(values))``, read-only, cached per ``values``."""
        key = tuple(map(float, values))
        counts = self._label_counts.get(key)
        if counts is None:
            counts = np.zeros((len(self), len(key)), dtype=np.int64)
            for column, value in enumerate(key):
                counts[:, column] = (self.label_values == value).sum(axis=1)
            counts.flags.writeable = False
            self._label_counts[key] = counts
        return counts

    @cached_property
    def ideal_gains(self) -> FloatArray:
        """All judged gains of each sample sorted descending, zero-padded: shape ``(Q, M)``."""
        return np.where(self.label_values > 0, self.label_values, 0.0)

    def trec_eval_gains(self, gains: Sequence[tuple[float, float]]) -> FloatArray:
        """The gain at each rank as trec_eval 10 gives it for the ``level=gain``
        parameters ``gains``: by level, -1 for a document the labels lack, -2 for one
        labelled below 0, else its label; a level the parameters lack gains its value
        (-1 and -2: 0). Padding: 0. Shape ``(Q, L)``."""
        labels = self.ranked_labels
        with np.errstate(invalid="ignore"):
            levels = np.where(np.isnan(labels), -1.0, np.where(labels < 0, -2.0, labels))
        out = np.fmax(levels, 0.0)
        for level, gain in gains:
            out[levels == level] = gain
        out[~self.valid] = 0.0
        return out

    def trec_eval_ideal_gains(self, gains: Sequence[tuple[float, float]]) -> FloatArray:
        """The gain at each rank of the ideal ranking as trec_eval 10 builds it for the
        ``level=gain`` parameters ``gains`` (its gain_init.c and the loops of m_ndcg.c,
        m_G.c, m_Rndcg.c and m_ndcg_rel.c), shape ``(Q, M)``, zero-padded. Per sample, the
        levels are those of ``gains`` in the order given, then the sample's other levels
        up to its highest judged (gain: the level), sorted by glibc's merge sort with a
        comparator that converts the difference of two gains to a C int (so gains less
        than 1 apart keep their order, and so do gains 2^31 or more apart, whose
        difference x86-64 converts to INT_MIN) and walked from the last: each level's
        documents in turn, a level without one passed over, until a level with documents
        whose gain is 0 or less (or a first level whose gain is, documents or not). With
        gains in increasing order this is every positive gain, largest first. Labels are
        trec_eval's levels: whole numbers (below 0: not judged); a ``ValueError`` else."""
        labels = self.label_values
        out = np.zeros(labels.shape)
        if not labels.size:
            return out
        with np.errstate(invalid="ignore"):
            judged = labels >= 0
        if (judged & (labels != np.floor(labels))).any():
            raise ValueError("trec_eval's ideal ranking needs whole-number labels (its levels)")
        mapped = np.where(judged, labels, 0.0)
        for level, gain in gains:
            mapped[labels == level] = gain
        levels = np.where(judged[:, 0], labels[:, 0], -1.0).astype(np.int64) + 1
        for count in np.unique(levels).tolist():  # samples alike: the same walk
            rows = np.flatnonzero(levels == count)
            walk = trec_eval_level_order(gains, count)[::-1]
            if not walk or walk[0][1] <= 0:
                continue  # trec_eval's loops never start
            place = np.full(labels[rows].shape, len(walk))
            for position, (level, _) in enumerate(walk):  # (levels below 0: no document)
                place[(labels[rows] == level) & judged[rows]] = position
            order = np.argsort(place, axis=1, kind="stable")
            ranked = np.take_along_axis(mapped[rows], order, axis=1)
            present = np.take_along_axis(place, order, axis=1) < len(walk)
            stopped = np.logical_or.accumulate(present & (ranked <= 0), axis=1)
            out[rows] = np.where(present & ~stopped, ranked, 0.0)
        return out

    @property
    def max_label(self) -> float:
        """The largest relevance label of the dataset (0 when there is none)."""
        return self.shape.max_label

    # -- other columns -------------------------------------------------------------------

    def has(self, name: str) -> BoolArray:
        """Per sample, whether it carries column ``name`` (``relevance``, ``utility``,
        ``answers``, ``groups``, ``texts``, ``pool``, ``cited``)."""
        return self.shared(("has", name), lambda: self.columns.valid(name))

    def label_pointer(self, row: int, kind: str, doc: str) -> str:
        """JSON pointer to sample ``row``'s ``kind`` label of document ``doc`` in
        ``expected_output`` (the long form for other kinds, and for relevance when the
        sample has another label kind beside it), for a :class:`~engine.Problem`."""
        token = doc.replace("~", "~0").replace("/", "~1")
        others = ("utility", "grades", "answers", "groups")
        long_form = kind != "relevance" or any(self.has(other)[row] for other in others)
        return f"/expected_output/{kind}/{token}" if long_form else f"/expected_output/{token}"

    def labels(self, kind: str) -> tuple[IntArray, IntArray, FloatArray]:
        """Every label of one kind (``relevance``, ``utility``) as flat arrays: its
        sample's row, its document code and its value, in each sample's order."""
        codes, values, sizes = _label_arrays(self.columns.column(kind))
        return _owners(sizes), codes, values

    @cached_property
    def utilities(self) -> FloatArray:
        """Utility label at each rank (NaN where the passage has none)."""
        return self.ranked("utility")

    def ranked(self, kind: str) -> FloatArray:
        """Each ranked document's label of one kind (``relevance``, ``utility``,
        ``grades``): shape ``(Q, L)``, NaN where it has none."""
        if kind == "relevance":
            return self.ranked_labels
        found = self._views.get(("ranked", kind))
        if found is None:
            found = self._views[("ranked", kind)] = self._join(*self.labels(kind))
        return found

    def sorted_labels(self, kind: str) -> FloatArray:
        """Each sample's labels of one kind sorted descending, NaN-padded to the dataset's
        widest such list: shape ``(Q, M)``."""
        if kind == "relevance":
            return self.label_values
        found = self._views.get(("sorted", kind))
        if found is None:
            column = self.columns.column(kind)
            _, values, sizes = _label_arrays(column)
            width = self.shape.widths.get(kind, _widest(column))
            found = _sorted_labels(sizes, values, width)
            self._views[("sorted", kind)] = found
        return found

    def member(self, name: str) -> BoolArray:
        """True where the ranked document is in its sample's list ``name`` (``pool`` or
        ``cited``); False for a sample without one."""
        codes, sizes = self.columns.doc_codes(name)
        rows, columns = self._find(_owners(sizes), codes)
        out = np.zeros(self.doc_codes.shape, dtype=np.bool_)
        out[rows, columns] = True
        return out

    def list_labels(self, name: str, kind: str = "relevance") -> FloatArray:
        """The ``kind`` label of each distinct document of each sample's list ``name``
        (e.g. ``pool``), in list order: shape ``(Q, W)`` with ``W`` the dataset's widest
        such list; NaN when unlabelled, for padding, and for a sample without the list."""
        codes, sizes = self.columns.doc_codes(name)
        owners = _owners(sizes)
        keep = _first_occurrences((owners << _SHIFT) | codes)
        col, _ = _columns_of(owners[keep], len(self))
        width = self.shape.widths.get(name, int(sizes.max(initial=0)))
        out = np.full((len(self), width), np.nan)
        out[owners[keep], col] = self._lookup(kind, owners[keep], codes[keep])
        return out

    @cached_property
    def groups(self) -> Groups:
        """Each sample's groups and their member documents."""
        column = self.columns.column("groups")
        count = lengths(column)
        members = pc.list_flatten(column).field("docs")
        member_sizes = lengths(members)
        group = _owners(member_sizes)
        return Groups(
            count=count,
            sample=_owners(count)[group],
            group=group,
            code=pc.list_flatten(members).to_numpy(zero_copy_only=False).astype(np.int64),
        )

    def ranked_at(self, rows: IntArray, codes: IntArray) -> IntArray:
        """For each (row, document code) pair, its column in that row's ranking; -1 when
        the row does not rank the document."""
        found = np.full(np.asarray(rows).size, -1, dtype=np.int64)
        where, columns = self._find(rows, codes, positions=True)
        found[where] = columns
        return found

    def in_top_k(self, rows: IntArray, codes: IntArray, k: int | None = None) -> BoolArray:
        """For each (row, document code) pair, whether the document is in that row's ``D_k``."""
        found = np.zeros(rows.size, dtype=np.bool_)
        where, columns = self._find(rows, codes, positions=True)
        found[where] = columns < self.cutoffs(k)[rows[where]]
        return found

    @cached_property
    def answers(self) -> list[list[str] | None]:
        """Each sample's answers (None when it has none)."""
        return self.columns.column("answers").to_pylist()  # type: ignore[no-any-return]

    @cached_property
    def ranked_texts(self) -> list[list[str | None]]:
        """Passage text of each deduplicated ranked document, per sample (no padding)."""
        texts = self.columns.column("texts").to_pylist()
        out: list[list[str | None]] = []
        for source, pos, length in zip(
            texts, self.positions.tolist(), self.lengths.tolist(), strict=True
        ):
            kept = pos[:length]
            out.append([source[p] for p in kept] if source else [None] * len(kept))
        return out

    def doc_ids(self, codes: npt.ArrayLike) -> list[str]:
        """The document ids of codes (for messages)."""
        return self.columns.docs.take(pa.array(np.asarray(codes, dtype=np.int64))).to_pylist()  # type: ignore[no-any-return]

    # -- joins -----------------------------------------------------------------------------

    @cached_property
    def _ranked_index(self) -> tuple[IntArray, npt.NDArray[Any]]:
        """The ranked documents' keys (row << 32 | code), sorted, and for each its column."""
        ordered, columns = _sorted_rows(self.doc_codes, len(self.columns.docs))
        return _row_keys(ordered), columns.ravel()

    def _find(
        self, rows: IntArray, codes: npt.ArrayLike, *, positions: bool = False
    ) -> tuple[IntArray, IntArray]:
        """Where (row, code) pairs sit in the ranking: the rows and columns of those found
        (with ``positions``: the indices of the pairs found, and their columns)."""
        keys, columns = self._ranked_index
        wanted = (np.asarray(rows, dtype=np.int64) << _SHIFT) | np.asarray(codes, dtype=np.int64)
        if not keys.size or not wanted.size:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        slot = _search_rows(keys, wanted, np.asarray(rows, dtype=np.int64), self.doc_codes.shape[1])
        hit = np.flatnonzero(keys[slot] == wanted)
        found_columns = columns[slot[hit]]
        return (hit if positions else np.asarray(rows)[hit]), found_columns

    def _sorted_labels_of(self, kind: str) -> tuple[IntArray, FloatArray]:
        """(sorted keys, their labels) of one label kind."""
        found = self._labels.get(kind)
        if found is None:
            found = self._labels[kind] = _keyed(*self.labels(kind))
        return found

    def _lookup(self, kind: str, rows: IntArray, codes: npt.ArrayLike) -> FloatArray:
        """The ``kind`` label of each (row, code) pair; NaN when there is none."""
        return _looked_up(*self._sorted_labels_of(kind), rows, codes)

    def _join(self, rows: IntArray, codes: IntArray, values: FloatArray) -> FloatArray:
        """Each ranked document's label among labels given as (row, code, value): shape
        ``(Q, L)``, NaN where it has none."""
        if rows.size > self.doc_codes.size:  # more labels than slots
            by_code = _read_by_code(self.doc_codes, rows, codes, values)
            if by_code is not None:
                return by_code
            out = np.full(self.doc_codes.shape, np.nan)  # look the slots up
            slots = np.nonzero(self.valid)
            out[slots] = _looked_up(*_keyed(rows, codes, values), slots[0], self.doc_codes[slots])
            return out
        out = np.full(self.doc_codes.shape, np.nan)
        where, columns = self._find(rows, codes, positions=True)
        out[rows[where], columns] = values[where]
        return out


def _read_by_code(
    doc_codes: npt.NDArray[np.int32], rows: IntArray, codes: IntArray, values: FloatArray
) -> FloatArray | None:
    """Each slot's label read by its document's code, when every label has a code of its
    own (a TREC qrels file's, coded line by line, so a chunk's lie near each other): its
    row checked against the slot's; NaN where it has none. None when a code repeats."""
    low = int(codes.min())
    local = codes - low  # arrays over the chunk's range of codes, not every code
    if int(np.bincount(local).max()) > 1:
        return None
    size = int(local.max()) + 1
    owner = np.full(size, -1, dtype=np.int64)
    owner[local] = rows
    by_code = np.empty(size)
    by_code[local] = values
    at = np.clip(doc_codes - low, 0, size - 1)  # padding (-1) and unlabelled ids too
    inside = (doc_codes >= low) & (doc_codes < low + size)  # padding is not
    out = np.full(doc_codes.shape, np.nan)
    slot_rows = np.arange(doc_codes.shape[0])[:, None]
    np.copyto(out, by_code[at], where=inside & (owner[at] == slot_rows))
    return out


def _keyed(rows: IntArray, codes: IntArray, values: FloatArray) -> tuple[IntArray, FloatArray]:
    """Labels given as (row, code, value) as sorted keys ``row << 32 | code`` and their
    values."""
    keys = (rows.astype(np.int64) << _SHIFT) | codes
    if keys.size > 1 and (keys[1:] < keys[:-1]).any():
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
    return keys, values


def _looked_up(
    keys: IntArray, values: FloatArray, rows: IntArray, codes: npt.ArrayLike
) -> FloatArray:
    """The value of each (row, code) pair among sorted ``keys``; NaN when it has none."""
    wanted = (rows.astype(np.int64) << _SHIFT) | np.asarray(codes, dtype=np.int64)
    if not keys.size:
        return np.full(wanted.size, np.nan)
    slot = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    return np.where(keys[slot] == wanted, values[slot], np.nan)


def _rectangular_index(
    codes: npt.NDArray[np.int32], sizes: IntArray, width: int, vocabulary: int
) -> tuple[IntArray, npt.NDArray[np.int32]] | None:
    """For rankings that all have ``width`` ids and none repeated: the sorted keys and
    columns of :attr:`Batch._ranked_index`, from one row-wise sort; None otherwise."""
    if not sizes.size or not width or (sizes != width).any():
        return None
    ordered, columns = _sorted_rows(codes.reshape(sizes.size, width), vocabulary)
    if (ordered[:, 1:] == ordered[:, :-1]).any():
        return None
    return _row_keys(ordered), columns.ravel()


def _sorted_rows(
    codes: npt.NDArray[np.int32], vocabulary: int
) -> tuple[npt.NDArray[Any], npt.NDArray[np.int32]]:
    """Each row's codes (``< vocabulary``) sorted, padding (-1) last, and the column each
    came from, ties in column order. Sorting ``code * width + column`` (numpy sorts such
    rows with SIMD) is much faster than ``argsort``; int32 when it fits, else int64."""
    width = codes.shape[1]
    top = vocabulary  # padding sorts as this code, after every real one
    kind = np.dtype(np.int32 if (top + 1) * max(width, 1) < 2**31 else np.int64)
    step = np.asarray(width, dtype=kind)
    spread: npt.NDArray[Any] = np.where(codes >= 0, codes, top).astype(kind) * step
    ordered = np.sort(spread + np.arange(width, dtype=kind), axis=1)
    code = ordered // step
    return code, (ordered - code * step).astype(np.int32)


def _search_rows(keys: IntArray, wanted: IntArray, rows: IntArray, width: int) -> IntArray:
    """Where each wanted key is, or would be, in ``keys``: sorted rows of ``width`` keys,
    each key searched in its own row only (a binary search of a few steps for all keys
    at once; a whole-array search is slower on long rankings). Clipped to a valid index."""
    if keys.size <= width:  # one row: a whole-array search is the same search
        return np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    low, high = rows * width, rows * width + width
    for _ in range(max(width, 1).bit_length()):
        middle = (low + high) // 2
        right = (middle < high) & (keys[np.minimum(middle, keys.size - 1)] < wanted)
        low = np.where(right, middle + 1, low)
        high = np.where(right, high, middle)
    return np.minimum(low, keys.size - 1)


def _row_keys(codes: npt.NDArray[Any]) -> IntArray:
    """Keys row << 32 | code of a (Q, W) matrix of codes, flattened row by row."""
    rows = np.arange(codes.shape[0], dtype=np.int64)[:, None]
    keys: IntArray = ((rows << _SHIFT) | codes).ravel()
    return keys


def _max_label(column: pa.Array) -> float:
    labels = pc.list_flatten(column).field("label")
    top = pc.max(labels).as_py() if len(labels) else None
    return float(top) if top is not None else 0.0


def trec_eval_level_order(
    gains: Sequence[tuple[float, float]], count: int
) -> list[tuple[float, float]]:
    """trec_eval 10's gain levels, as its setup_gains sorts them for a sample whose
    highest judged level is ``count - 1``: the ``(level, gain)`` parameters in the order
    given, then each other level below ``count`` with its own value as gain."""
    given = {level for level, _ in gains}
    listed = [*gains, *((float(i), float(i)) for i in range(count) if i not in given)]
    return _merge_sorted(listed)


def _merge_sorted(levels: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(level, gain) pairs sorted as glibc's ``qsort`` (a top-down merge sort, first half
    first on ties) sorts trec_eval 10's gains: by ``(int)(gain1 - gain2)``."""
    if len(levels) < 2:
        return list(levels)
    half = len(levels) // 2
    left, right = _merge_sorted(levels[:half]), _merge_sorted(levels[half:])
    merged = []
    while left and right:
        merged.append(left.pop(0) if _as_c_int(left[0][1] - right[0][1]) <= 0 else right.pop(0))
    return merged + left + right


def _as_c_int(value: float) -> int:
    """C's ``(int)`` of a double as x86-64 computes it (``cvttsd2si``): truncated toward
    0, and INT_MIN for a value outside the range of a 32-bit int."""
    whole = math.trunc(value)
    return whole if -(2**31) <= whole < 2**31 else -(2**31)


def _sorted_labels(sizes: IntArray, values: FloatArray, width: int) -> FloatArray:
    """Each sample's labels (``values``, ``sizes[r]`` of them for row ``r``, row by row)
    sorted descending, NaN-padded to ``width``."""
    out = np.full((sizes.size, width), np.inf)  # labels are finite: padding sorts last
    if sizes.size == 1:
        out[0, : values.size] = -values
    else:
        out[np.arange(width) < sizes[:, None]] = -values  # row by row, as a mask fills
    out.sort(axis=1)  # each row at once (numpy sorts rows with SIMD)
    out *= -1.0
    out[out == -np.inf] = np.nan
    return out
