"""The classic ranking family, computed as trec_eval computes it (see docs/metrics.md)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from engine import (
    Batch,
    MetricBase,
    Problem,
    bounded_number,
    choice,
    finite_number,
    optional_k,
    row_sums,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: trec_eval's recall levels for iprec_at_recall (the same double literals it uses).
RECALL_LEVELS: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def _threshold() -> float:
    return attrs.field(default=1.0, validator=finite_number, kw_only=True)  # type: ignore[no-any-return]


def _gain_kind() -> str:
    return attrs.field(  # type: ignore[no-any-return]
        default="linear", validator=choice("linear", "exponential"), kw_only=True
    )


def _gain(labels: FloatArray, kind: str) -> FloatArray:
    """Gain of non-negative labels: the label (``linear``) or ``2^label - 1`` (``exponential``)."""
    if kind == "linear":
        return labels
    with np.errstate(over="ignore"):  # an infinite gain is refused by the metrics' check
        return np.exp2(labels) - 1.0


class GainMap(tuple[tuple[float, float], ...]):
    """(label, gain) pairs sorted by label, shown as the dict a spec gives
    (``gains={1: 3.0, 2: 9.0}``)."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{label!r}: {gain!r}" for label, gain in self) + "}"


def _gain_map(value: object) -> GainMap | None:
    """A ``gains`` parameter: None, or a mapping (or pairs) of label to finite gain."""
    if value is None:
        return None
    pairs = value.items() if isinstance(value, dict) else value
    try:
        found = {float(label): float(gain) for label, gain in pairs}  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ValueError(
            f"gains must map labels to gains, e.g. {{1: 3, 2: 9}}; got {value!r}"
        ) from None
    if not all(np.isfinite(list(found)) & np.isfinite(list(found.values()))):
        raise ValueError(f"gains must be finite numbers; got {value!r}")
    return GainMap(sorted(found.items()))


def _gains(labels: FloatArray, kind: str, gains: GainMap | None) -> FloatArray:
    """Gain of each label (NaN, no label: 0): ``gains[label]`` where the map has the
    label, else the ``kind`` gain of the label clipped at 0."""
    out = _gain(np.fmax(labels, 0.0), kind)
    for label, gain in gains or ():
        out = np.where(labels == label, gain, out)
    return out


@functools.lru_cache(maxsize=32)
def _discount(width: int) -> FloatArray:
    """1 / log2(rank + 1) for ranks 1..width, read-only: made once per width (a
    dataset's rankings share theirs)."""
    discount = 1.0 / np.log2(np.arange(2, width + 2, dtype=np.float64))
    discount.flags.writeable = False
    return discount


def _divide(numerator: FloatArray, denominator: FloatArray) -> FloatArray:
    """numerator / denominator (arrays of one shape), 0 where the denominator is 0."""
    out = np.zeros(numerator.shape)
    return np.divide(numerator, denominator, out=out, where=denominator != 0)  # type: ignore[no-any-return]


def _running_dcg(
    batch: Batch,
    kind: str,
    gains: GainMap | None = None,
    *,
    ideal: bool = False,
    levels: str = "labels",
) -> FloatArray:
    """DCG at every rank of each ranking (``ideal``: of the ideal ranking, see
    :func:`_ideal_gains`), summed left to right; computed once per batch for every metric
    of the family."""

    def compute() -> FloatArray:
        if ideal:
            values = _ideal_gains(batch, kind, gains, levels)
        else:
            values = _ranked_gains(batch, kind, gains, levels)
        with np.errstate(over="ignore"):  # an infinite DCG is refused by the metrics' check
            running: FloatArray = (values * _discount(values.shape[1])).cumsum(axis=1)
        running.flags.writeable = False
        return running

    return batch.shared(("dcg", kind, gains, ideal, levels), compute)


def _ranked_gains(batch: Batch, kind: str, gains: GainMap | None, levels: str) -> FloatArray:
    """The gain at each rank of each ranking: by label, or by trec_eval 10's levels
    (``levels`` "trec_eval10": ``gains`` may give level -1, a document without a label,
    and -2, one labelled below 0, a gain; :meth:`Batch.trec_eval_gains`)."""
    if levels == "trec_eval10":
        return batch.trec_eval_gains(gains or ())
    return _gain(batch.gains, kind) if gains is None else _gains(batch.ranked_labels, kind, gains)


def _ideal_gains(batch: Batch, kind: str, gains: GainMap | None, levels: str) -> FloatArray:
    """The gain at each rank of each sample's ideal ranking: every positive gain of its
    labels, largest first (``levels`` "labels"), or as trec_eval 10 orders its gain levels
    ("trec_eval10", linear gains: :meth:`Batch.trec_eval_ideal_gains`)."""
    if levels == "trec_eval10":
        return batch.trec_eval_ideal_gains(gains or ())
    if gains is None:
        return _gain(batch.ideal_gains, kind)
    mapped = _gains(batch.label_values, kind, gains)
    positive = (mapped > 0) & (batch.label_values >= 0)  # as trec_eval's levels
    return -np.sort(-np.where(positive, mapped, 0.0), axis=1)


def _dcg(
    batch: Batch, k: int | None, kind: str, gains: GainMap | None = None, levels: str = "labels"
) -> FloatArray:
    """DCG over the top k of each sample's ranking."""
    return batch.at_k(_running_dcg(batch, kind, gains, levels=levels), k)


#: 2^x fits a float64 for x below this: an exponential gain of a larger label overflows.
EXPONENT_LIMIT = 1024


def _overflowed(batch: Batch, sums: FloatArray, what: str) -> Iterator[Problem]:
    """A problem per sample whose ``sums`` (a DCG, a total gain) overflowed a float64,
    naming the sample's largest relevance label and ``what`` it is too large for: an
    error, not an infinite value or a silent NA."""
    rows = np.flatnonzero(~np.isfinite(sums))
    if not rows.size:
        return
    owners, codes, labels = batch.labels("relevance")
    for row in rows.tolist():
        mine = np.flatnonzero(owners == row)
        top = int(mine[np.argmax(labels[mine])])
        yield Problem(
            f"label {labels[top]:g} is too large for {what}: the sum overflows a float64",
            sample_id=batch.sample_ids[row],
            pointer=batch.label_pointer(row, "relevance", batch.doc_ids([codes[top]])[0]),
        )


def _gain_named(alias: str, gain: str) -> str:
    """What a DCG's labels may be too large for (with the exponential gain's bound)."""
    if gain == "exponential":
        return f"{alias}'s gain=exponential (2^label - 1; labels below {EXPONENT_LIMIT} fit)"
    return f"{alias}'s gain={gain}"


def _found_within(batch: Batch, threshold: float, cutoffs: IntArray | None) -> IntArray:
    """Relevant documents among each sample's first ``cutoffs`` (None: all retrieved)."""
    return batch.at_cutoff(batch.found(threshold), cutoffs)


def _found_at_k(batch: Batch, threshold: float, k: int | None) -> IntArray:
    """Relevant documents in each sample's top k (:meth:`Batch.cutoffs`)."""
    return batch.at_k(batch.found(threshold), k)


#: What a gain map's keys are: labels (the ideal ranking: every positive gain, largest
#: first), or trec_eval 10's levels (-1: no label, -2: a label below 0; the ideal ranking
#: as trec_eval sorts the levels, by differences of gains cut to a C int).
_LEVELS = attrs.field(default="labels", validator=choice("labels", "trec_eval10"), kw_only=True)


def _linear_for_trec_eval(levels: str, gain: str) -> None:
    """trec_eval's levels have linear gains: another gain with them is a ``ValueError``."""
    if levels == "trec_eval10" and gain != "linear":
        raise ValueError("levels=trec_eval10 are trec_eval's linear gains: use gain=linear")


#: How tied scores are ordered: by doc id descending, as trec_eval (and this project's
#: readers) order them, or ascending, as ir_measures' msmarco and judged providers do.
_TIES = attrs.field(
    default="trec_eval", validator=choice("trec_eval", "doc_id_ascending"), kw_only=True
)

#: Whether unjudged documents (no label, or one below 0) leave the ranking before scoring,
#: as with trec_eval's ``-J`` (ir_measures' ``judged_only=True``): :meth:`Batch.view`.
_JUDGED_ONLY = attrs.field(
    default=False, validator=attrs.validators.instance_of(bool), kw_only=True
)


def _uncut_limit(batch: Batch, k: int | None) -> IntArray | None:
    """Per-sample rank limit of a metric with no cutoff by default (MRR, AP): the metric's
    ``k`` when its spec sets one, else ``metadata.k`` (no limit for a sample without it);
    None when neither is set (no cutoff at all)."""
    if k is not None:
        return np.full(batch.sample_k.size, k, dtype=np.int64)
    if not batch.sets_k:
        return None
    return np.where(batch.sample_k > 0, batch.sample_k, np.iinfo(np.int64).max)


def _relevant_within(batch: Batch, threshold: float, limit: IntArray | None) -> BoolArray:
    relevant = batch.relevant(threshold)
    if limit is not None:
        relevant &= batch.ranks[None, :] <= limit[:, None]
    return relevant


#: How each recall level c becomes a count m of relevant documents (|Rel| = n).
ROUNDINGS: tuple[str, ...] = ("trec_eval9", "trec_eval10", "exact")


def _needed(recall: float, num_rel: IntArray, rounding: str) -> IntArray:
    """Relevant documents needed to reach recall level ``recall``.

    ``trec_eval9``: ``(long)(c * n + 0.9)`` in doubles (trec_eval <= 9.x, pytrec_eval);
    ``trec_eval10``: ``lround(c * n)`` (trec_eval 10); ``exact``: ``ceil(c * n)``, the
    first m with recall m / n >= c (c * n rounded to 9 decimals first, so 0.3 * 10 is 3).
    """
    scaled = recall * num_rel.astype(np.float64)
    if rounding == "trec_eval9":
        return (scaled + 0.9).astype(np.int64)
    if rounding == "trec_eval10":
        whole = np.floor(scaled)
        return (whole + (scaled - whole >= 0.5)).astype(np.int64)
    return np.ceil(np.round(scaled, 9)).astype(np.int64)


def _precisions(batch: Batch, threshold: float) -> FloatArray:
    """The precision at each relevant rank, 0 elsewhere (for AP and the interpolated
    precisions; what they derive from it is what the batch keeps)."""
    return batch.found(threshold) / batch.ranks * batch.relevant(threshold)  # x * False: 0


def _iprec_at_recall(
    batch: Batch,
    threshold: float = 1.0,
    rounding: str = "trec_eval9",
    levels: Sequence[float] = RECALL_LEVELS,
) -> FloatArray:
    """trec_eval's interpolated precision at recall ``levels`` (by default the 11
    :data:`RECALL_LEVELS`), shape ``(Q, len(levels))``.

    Level c needs m relevant documents (see :func:`_needed`); its value is the largest
    precision at or after the rank of the m-th relevant retrieved document (m = 0: the
    first), 0 when fewer than m were retrieved.
    """
    best_after = batch.shared(
        ("best-precision-after", threshold),
        lambda: np.maximum.accumulate(_precisions(batch, threshold)[:, ::-1], axis=1)[:, ::-1],
    )
    num_rel = batch.num_relevant(threshold)
    rows, columns = np.nonzero(batch.relevant(threshold))  # row by row, rank order
    retrieved = np.bincount(rows, minlength=len(batch))
    first = np.cumsum(retrieved) - retrieved  # where each row's relevant ranks start
    out = np.zeros((len(batch), len(levels)))
    for column, level in enumerate(levels):
        needed = np.maximum(_needed(level, num_rel, rounding), 1)
        reached = np.flatnonzero(needed <= retrieved)
        rank = columns[first[reached] + needed[reached] - 1]  # of the needed-th relevant
        out[reached, column] = best_after[reached, rank]
    return out


def _row_sums_at(mask: BoolArray, values: FloatArray) -> FloatArray:
    """:func:`row_sums` of ``values`` placed at the True cells of ``mask`` (in row-major
    order), zeros elsewhere: for terms that only some ranks have."""
    dense = np.zeros(mask.shape)
    dense[mask] = values
    return row_sums(dense)


def _eleven_points(batch: Batch, threshold: float, rounding: str) -> FloatArray:
    """:func:`_iprec_at_recall` at the 11 :data:`RECALL_LEVELS`, once per batch."""
    return batch.shared(
        ("eleven-points", threshold, rounding),
        lambda: _iprec_at_recall(batch, threshold, rounding),
    )


class _Ranked(MetricBase):
    family: ClassVar[str] = "retrieval"
    requires: ClassVar[frozenset[str]] = frozenset({"relevance"})


@attrs.frozen
class HitAtK(_Ranked):
    """1 if any relevant document is in the top k, else 0 (trec_eval success_k)."""

    alias: ClassVar[str] = "retrieval-hit-at-k"
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        found = _found_at_k(batch, self.relevance_threshold, self.k)
        return (found > 0).astype(np.float64)


@attrs.frozen
class HitRateAtK(HitAtK):
    """Hit rate at k: the same per-sample value as retrieval-hit-at-k."""

    alias: ClassVar[str] = "hit-rate-at-k"


@attrs.frozen
class PrecisionAtK(_Ranked):
    """|top k ∩ Rel| / k, dividing by k even when fewer were retrieved (trec_eval P_k)."""

    alias: ClassVar[str] = "retrieval-precision-at-k"
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        found = _found_at_k(batch, self.relevance_threshold, self.k)
        return found / batch.cutoffs(self.k).astype(np.float64)


@attrs.frozen
class RecallAtK(_Ranked):
    """|top k ∩ Rel| / |Rel|; 0 when there is no relevant document (trec_eval recall_k)."""

    alias: ClassVar[str] = "retrieval-recall-at-k"
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        found = _found_at_k(batch, self.relevance_threshold, self.k)
        return _divide(
            found.astype(np.float64),
            batch.num_relevant(self.relevance_threshold).astype(np.float64),
        )


@attrs.frozen
class RPrecision(_Ranked):
    """|top R ∩ Rel| / R with R = |Rel|; 0 when R is 0 (trec_eval Rprec)."""

    alias: ClassVar[str] = "retrieval-r-precision"
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        num_rel = batch.num_relevant(self.relevance_threshold)
        found = _found_within(batch, self.relevance_threshold, num_rel)
        return _divide(found.astype(np.float64), num_rel.astype(np.float64))


@attrs.frozen
class MRR(_Ranked):
    """1 / rank of the first relevant document, 0 if none; no cutoff unless k is given
    (trec_eval recip_rank)."""

    alias: ClassVar[str] = "retrieval-mrr"
    uncut_by_default: ClassVar[bool] = True
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()
    ties: str = _TIES
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(self.ties, self.judged_only)
        limit = _uncut_limit(batch, self.k)
        relevant = _relevant_within(batch, self.relevance_threshold, limit)
        first = np.where(relevant, batch.ranks[None, :], np.inf).min(axis=1, initial=np.inf)
        return 1.0 / first  # 1 / inf = 0 when nothing relevant was retrieved


@attrs.frozen
class AveragePrecision(_Ranked):
    """Σ P@i over relevant ranks i (up to k when given) / |Rel|; 0 when Rel is empty
    (trec_eval map, map_cut_k)."""

    alias: ClassVar[str] = "retrieval-map"
    uncut_by_default: ClassVar[bool] = True
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        threshold = self.relevance_threshold
        running = batch.shared(
            ("precision-sums", threshold),
            lambda: _precisions(batch, threshold).cumsum(axis=1),
        )
        total = batch.at_cutoff(running, _uncut_limit(batch, self.k))
        return _divide(total, batch.num_relevant(threshold).astype(np.float64))


@attrs.frozen
class DCGAtK(_Ranked):
    """Σ_{i ≤ k} gain_i / log2(i + 1), linear or exponential gain; ``gains`` maps labels to
    gains of their own (``gains={1: 3, 2: 9}``; trec_eval's ``dcg.1=3,2=9``), or with
    ``levels=trec_eval10`` trec_eval 10's levels (as retrieval-ndcg-at-k's)."""

    alias: ClassVar[str] = "retrieval-dcg-at-k"
    k: int | None = optional_k()
    gain: str = _gain_kind()
    gains: GainMap | None = attrs.field(default=None, converter=_gain_map, kw_only=True)
    levels: str = _LEVELS

    def __attrs_post_init__(self) -> None:
        _linear_for_trec_eval(self.levels, self.gain)

    def check(self, batch: Batch) -> Iterator[Problem]:
        dcg = _dcg(batch, self.k, self.gain, self.gains, self.levels)
        return _overflowed(batch, dcg, _gain_named(self.alias, self.gain))

    def score(self, batch: Batch) -> FloatArray:
        return _dcg(batch, self.k, self.gain, self.gains, self.levels)


@attrs.frozen
class NDCGAtK(_Ranked):
    """DCG@k / IDCG@k with IDCG from all judged gains; 0 when IDCG is 0 (trec_eval
    ndcg_cut_k). ``gains`` as for retrieval-dcg-at-k: a mapped gain may be 0 or negative,
    and the ideal ranking orders the positive gains, largest first. With
    ``levels=trec_eval10`` the gains are trec_eval 10's (``ndcg.1=1.5,-1=2``): ``gains``
    maps its levels, -1 a document without a label and -2 one labelled below 0 among
    them, and the ideal ranking walks the levels as trec_eval sorts them
    (:meth:`Batch.trec_eval_gains`, :meth:`Batch.trec_eval_ideal_gains`)."""

    alias: ClassVar[str] = "retrieval-ndcg-at-k"
    k: int | None = optional_k()
    gain: str = _gain_kind()
    gains: GainMap | None = attrs.field(default=None, converter=_gain_map, kw_only=True)
    levels: str = _LEVELS
    judged_only: bool = _JUDGED_ONLY

    def __attrs_post_init__(self) -> None:
        _linear_for_trec_eval(self.levels, self.gain)

    def check(self, batch: Batch) -> Iterator[Problem]:
        ideal = _running_dcg(batch, self.gain, self.gains, ideal=True, levels=self.levels)
        return _overflowed(batch, batch.at_k(ideal, self.k), _gain_named(self.alias, self.gain))

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        ideal = _running_dcg(batch, self.gain, self.gains, ideal=True, levels=self.levels)
        idcg = batch.at_k(ideal, self.k)
        return _divide(_dcg(batch, self.k, self.gain, self.gains, self.levels), idcg)


@attrs.frozen
class ERRAtK(_Ranked):
    """Expected reciprocal rank at k (Chapelle et al. 2009; gdeval ERR@k)."""

    alias: ClassVar[str] = "retrieval-err-at-k"
    k: int | None = optional_k()
    mapping: str = attrs.field(
        default="exponential", validator=choice("exponential", "linear"), kw_only=True
    )
    max_grade: float | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(bounded_number(0, exclusive_minimum=True)),
        kw_only=True,
    )

    def __attrs_post_init__(self) -> None:
        if self.mapping == "exponential" and (self.max_grade or 0) >= EXPONENT_LIMIT:
            raise ValueError(
                f"max_grade must be below {EXPONENT_LIMIT} with mapping=exponential (2^max_grade "
                f"overflows a float64), got {self.max_grade!r}"
            )

    def check(self, batch: Batch) -> Iterator[Problem]:
        """With mapping=exponential and no max_grade, a problem per relevance label of
        the batch at or above :data:`EXPONENT_LIMIT` (2^label overflows a float64), or
        one for the dataset when its largest label is in another chunk."""
        if self.mapping != "exponential" or self.max_grade is not None:
            return
        if batch.max_label < EXPONENT_LIMIT:
            return
        what = (
            f"{self.alias}'s mapping=exponential: 2^label overflows a float64 (labels below "
            f"{EXPONENT_LIMIT} fit; or mapping=linear, or a max_grade)"
        )
        owners, codes, labels = batch.labels("relevance")
        large = np.flatnonzero(labels >= EXPONENT_LIMIT).tolist()
        for index in large:
            row, doc = int(owners[index]), batch.doc_ids([codes[index]])[0]
            yield Problem(
                f"label {labels[index]:g} is too large for {what}",
                sample_id=batch.sample_ids[row],
                pointer=batch.label_pointer(row, "relevance", doc),
            )
        if not large:
            yield Problem(
                f"the dataset's largest label, {batch.max_label:g}, is too large for {what}"
            )

    def score(self, batch: Batch) -> FloatArray:
        top = max(self.max_grade if self.max_grade is not None else batch.max_label, 0.0)
        grades = np.minimum(batch.gains, top)  # grades above max_grade count as max_grade
        if self.mapping == "exponential":
            stop = (np.exp2(grades) - 1.0) / np.exp2(top)
        else:
            stop = grades / top if top > 0 else np.zeros_like(grades)
        stop = np.where(batch.top_k(self.k), stop, 0.0)
        survive = np.concatenate([np.ones((len(batch), 1)), 1.0 - stop], axis=1)
        reach = np.cumprod(survive, axis=1)[:, :-1]  # P(the user reaches rank r)
        return row_sums(stop * reach / batch.ranks[None, :])


@attrs.frozen
class AUCPR(_Ranked):
    """Trapezoid area under trec_eval's 11-point interpolated precision-recall curve."""

    alias: ClassVar[str] = "retrieval-auc-pr"
    relevance_threshold: float = _threshold()
    rounding: str = attrs.field(default="trec_eval9", validator=choice(*ROUNDINGS), kw_only=True)

    def score(self, batch: Batch) -> FloatArray:
        points = _eleven_points(batch, self.relevance_threshold, self.rounding)
        return np.asarray(np.trapezoid(points, x=RECALL_LEVELS, axis=1), dtype=np.float64)


@attrs.frozen
class IPrecAtRecall(_Ranked):
    """Interpolated precision at a recall level: the best precision at or after the rank
    where recall reaches ``recall`` (trec_eval iprec_at_recall_<recall>)."""

    alias: ClassVar[str] = "retrieval-iprec-at-recall"
    recall: float = attrs.field(default=0.0, validator=bounded_number(0, 1))
    relevance_threshold: float = _threshold()
    rounding: str = attrs.field(default="trec_eval9", validator=choice(*ROUNDINGS), kw_only=True)
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        threshold = self.relevance_threshold
        if self.recall in RECALL_LEVELS:
            points = _eleven_points(batch, threshold, self.rounding)
            values = points[:, RECALL_LEVELS.index(self.recall)].copy()
        else:
            values = _iprec_at_recall(batch, threshold, self.rounding, [self.recall])[:, 0]
        if not self.judged_only:
            return values
        # trec_eval's -J: where no judged document is left, a level that needs no relevant
        # document takes the precision of an empty ranking, 0/0 (NA)
        needed = _needed(self.recall, batch.num_relevant(threshold), self.rounding)
        emptied = batch.has_output & (batch.lengths == 0) & (needed == 0)
        return np.where(emptied, np.nan, values)


@attrs.frozen
class JudgedAtK(_Ranked):
    """Fraction of the top k that is judged, dividing by k; with ``denominator="retrieved"``
    by min(k, number retrieved), 0 when nothing was (ir_measures Judged@k)."""

    alias: ClassVar[str] = "retrieval-judged-at-k"
    k: int | None = optional_k()
    denominator: str = attrs.field(default="k", validator=choice("k", "retrieved"), kw_only=True)
    ties: str = _TIES

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(self.ties)
        cutoffs = batch.cutoffs(self.k)
        judged = batch.at_k(batch.judged_found(), self.k).astype(np.float64)
        if self.denominator == "retrieved":
            return _divide(judged, np.minimum(cutoffs, batch.lengths).astype(np.float64))
        return judged / cutoffs.astype(np.float64)
