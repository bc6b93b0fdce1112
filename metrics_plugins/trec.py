"""trec_eval's other per-query measures (bpref, infAP, counts, set measures, ...), computed
as trec_eval 9.x / pytrec_eval computes them (see docs/metrics.md, "trec_eval measures").

trec_eval classes each ranked document by its qrels label: relevant (label ≥ the threshold,
``-l``), judged non-relevant (0 ≤ label < threshold), in the pool but unjudged (label < 0)
or not in the pool (no label). bpref, infAP, num_nonrel_judged_ret and unj tell the last
three apart; every other measure counts all three as non-relevant.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import ClassVar

import attrs
import numpy as np

from engine import Batch, Problem, bounded_number, choice, finite_number, optional_k, row_sums
from metrics_plugins.retrieval import (
    _JUDGED_ONLY,
    _LEVELS,
    ROUNDINGS,
    BoolArray,
    FloatArray,
    GainMap,
    IntArray,
    _divide,
    _eleven_points,
    _found_at_k,
    _found_within,
    _gain_map,
    _ideal_gains,
    _overflowed,
    _Ranked,
    _ranked_gains,
    _relevant_within,
    _row_sums_at,
    _running_dcg,
    _threshold,
    _uncut_limit,
)

#: C's log2 of a number below 0: a NaN with its sign bit set, which trec_eval prints as
#: ``-nan``. numpy's log2 gives a NaN whose sign depends on the CPU's vector code (``nan``
#: with AVX2, ``-nan`` with AVX-512), so G writes C's where the argument is negative.
_C_LOG_OF_NEGATIVE = -math.nan

#: trec_eval's INFAP_EPSILON, which keeps infAP's estimate defined before any judged document.
INFAP_EPSILON = 0.00001


def _classes(
    batch: Batch, threshold: float, limit: IntArray | None = None
) -> tuple[BoolArray, BoolArray, BoolArray]:
    """Masks of the ranked documents (within ``limit``) that are relevant, judged
    non-relevant (0 ≤ label < threshold), and in the pool but unjudged (label < 0)."""
    relevant = _relevant_within(batch, threshold, limit)
    with np.errstate(invalid="ignore"):
        judged = batch.ranked_labels >= 0
        pooled = batch.ranked_labels < 0
    if limit is not None:
        within = batch.ranks[None, :] <= limit[:, None]
        judged &= within
        pooled &= within
    return relevant, judged & ~relevant, pooled & ~relevant


def _num_nonrelevant(batch: Batch, threshold: float) -> IntArray:
    """Judged non-relevant documents per sample (0 ≤ label < threshold), retrieved or not."""
    labels = batch.label_values
    with np.errstate(invalid="ignore"):
        return ((labels >= 0) & (labels < threshold)).sum(axis=1).astype(np.int64)


def _set_counts(batch: Batch, threshold: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """num_ret, num_rel and num_rel_ret per sample, as floats."""
    retrieved = batch.lengths.astype(np.float64)
    relevant = batch.num_relevant(threshold).astype(np.float64)
    found = _found_within(batch, threshold, None).astype(np.float64)
    return retrieved, relevant, found


def _to_width(values: FloatArray, width: int) -> FloatArray:
    """Rows cut or zero-padded to ``width`` columns."""
    if values.shape[1] >= width:
        return values[:, :width]
    return np.pad(values, ((0, 0), (0, width - values.shape[1])))


def _cumulative_dcg(
    batch: Batch, gains: GainMap | None = None, *, ideal: bool = False, levels: str = "labels"
) -> FloatArray:
    """Linear-gain DCG at ranks 0..width (column 0 is rank 0: no document), summed left to
    right (``ideal``: of the ideal ranking; ``levels`` as retrieval-ndcg-at-k's), with the labels' own
    gains or ``gains``."""
    running = _running_dcg(batch, "linear", gains, ideal=ideal, levels=levels)
    return np.concatenate([np.zeros((len(batch), 1)), running], axis=1)


@attrs.frozen
class Bpref(_Ranked):
    """Binary preference: Σ over relevant retrieved documents of 1 - min(n, R) / min(N, R),
    n the judged non-relevant ranked above it, N all judged non-relevant, over R (trec_eval
    bpref)."""

    alias: ClassVar[str] = "retrieval-bpref"
    uncut_by_default: ClassVar[bool] = True
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        threshold = self.relevance_threshold
        relevant, nonrelevant, _ = _classes(batch, threshold, _uncut_limit(batch, self.k))
        num_rel = batch.num_relevant(threshold)
        rows, columns = np.nonzero(relevant)
        above = np.cumsum(nonrelevant, axis=1)[rows, columns]
        cap = np.minimum(_num_nonrelevant(batch, threshold), num_rel).astype(np.float64)
        penalty = _divide(np.minimum(above, num_rel[rows]).astype(np.float64), cap[rows])
        credit = np.where(above > 0, 1.0 - penalty, 1.0)
        return _divide(_row_sums_at(relevant, credit), num_rel.astype(np.float64))


@attrs.frozen
class InfAP(_Ranked):
    """Inferred average precision (Yilmaz and Aslam 2006): AP estimated from the judged
    documents, labels < 0 marking pooled but unjudged ones (trec_eval infAP)."""

    alias: ClassVar[str] = "retrieval-infap"
    uncut_by_default: ClassVar[bool] = True
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        threshold = self.relevance_threshold
        limit = _uncut_limit(batch, self.k)
        relevant, nonrelevant, unjudged = _classes(batch, threshold, limit)
        rows, columns = np.nonzero(relevant)  # the estimate is needed at relevant ranks only
        rel_above = batch.found(threshold)[rows, columns] - 1
        nonrel_above = np.cumsum(nonrelevant, axis=1)[rows, columns]
        pooled_above = np.cumsum(unjudged, axis=1)[rows, columns]
        above = columns.astype(np.float64)  # trec_eval's j: documents above
        with np.errstate(divide="ignore", invalid="ignore"):
            estimate = 1.0 / (above + 1.0) + (above / (above + 1.0)) * (
                (rel_above + nonrel_above + pooled_above) / above
            ) * ((rel_above + INFAP_EPSILON) / (rel_above + nonrel_above + 2 * INFAP_EPSILON))
        credit = np.where(above == 0, 1.0, estimate)
        total = _row_sums_at(relevant, credit)
        return _divide(total, batch.num_relevant(threshold).astype(np.float64))


@attrs.frozen
class NumRet(_Ranked):
    """Number of documents retrieved (trec_eval num_ret)."""

    alias: ClassVar[str] = "retrieval-num-ret"

    def score(self, batch: Batch) -> FloatArray:
        return batch.lengths.astype(np.float64)


@attrs.frozen
class NumQ(_Ranked):
    """1 for a sample with an output, 0 for one without: summed, the queries trec_eval
    evaluates (trec_eval num_q, ir_measures NumQ)."""

    alias: ClassVar[str] = "retrieval-num-q"

    def score(self, batch: Batch) -> FloatArray:
        return batch.has_output.astype(np.float64)


@attrs.frozen
class NumRel(_Ranked):
    """Number of relevant documents R, retrieved or not (trec_eval num_rel); with
    ``zero_without_output``, 0 for a sample without an output, as ir_measures reports it."""

    alias: ClassVar[str] = "retrieval-num-rel"
    relevance_threshold: float = _threshold()
    zero_without_output: bool = attrs.field(
        default=False, validator=attrs.validators.instance_of(bool), kw_only=True
    )

    def score(self, batch: Batch) -> FloatArray:
        count = batch.num_relevant(self.relevance_threshold).astype(np.float64)
        keep = batch.has_output if self.zero_without_output else True
        return np.where(keep, count, 0.0)


@attrs.frozen
class NumRelRet(_Ranked):
    """Number of relevant documents retrieved (trec_eval num_rel_ret)."""

    alias: ClassVar[str] = "retrieval-num-rel-ret"
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        return _found_within(batch, self.relevance_threshold, None).astype(np.float64)


@attrs.frozen
class NumNonrelJudgedRet(_Ranked):
    """Number of judged non-relevant documents retrieved, 0 ≤ label < threshold
    (trec_eval num_nonrel_judged_ret)."""

    alias: ClassVar[str] = "retrieval-num-nonrel-judged-ret"
    higher_is_better: ClassVar[bool] = False
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        _, nonrelevant, _ = _classes(batch, self.relevance_threshold)
        return nonrelevant.sum(axis=1).astype(np.float64)


@attrs.frozen
class SetPrecision(_Ranked):
    """num_rel_ret / num_ret over the whole ranking; 0 when nothing was retrieved
    (trec_eval set_P)."""

    alias: ClassVar[str] = "retrieval-set-precision"
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        retrieved, _, found = _set_counts(batch, self.relevance_threshold)
        return _divide(found, retrieved)


@attrs.frozen
class SetRecall(_Ranked):
    """num_rel_ret / R over the whole ranking; 0 when R = 0 (trec_eval set_recall)."""

    alias: ClassVar[str] = "retrieval-set-recall"
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        _, relevant, found = _set_counts(batch, self.relevance_threshold)
        return _divide(found, relevant)


@attrs.frozen
class SetF(_Ranked):
    """(1 + β)·P·R / (β·P + R) of set precision P and set recall R, β weighting recall (the
    β² of the usual F_β); 0 when nothing relevant was retrieved (trec_eval set_F.β,
    ir_measures SetF(beta=β))."""

    alias: ClassVar[str] = "retrieval-set-f"
    beta: float = attrs.field(default=1.0, validator=bounded_number(0), kw_only=True)
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        retrieved, relevant, found = _set_counts(batch, self.relevance_threshold)
        precision, recall = _divide(found, retrieved), _divide(found, relevant)
        return _divide((self.beta + 1.0) * precision * recall, self.beta * precision + recall)


@attrs.frozen
class SetRelativePrecision(_Ranked):
    """num_rel_ret / min(num_ret, R): set precision relative to the best possible; 0 when
    num_ret or R is 0 (trec_eval set_relative_P)."""

    alias: ClassVar[str] = "retrieval-set-relative-precision"
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        retrieved, relevant, found = _set_counts(batch, self.relevance_threshold)
        return _divide(found, np.minimum(retrieved, relevant))


@attrs.frozen
class SetMAP(_Ranked):
    """num_rel_ret² / (num_ret · R), set precision times set recall (trec_eval set_map)."""

    alias: ClassVar[str] = "retrieval-set-map"
    relevance_threshold: float = _threshold()
    judged_only: bool = _JUDGED_ONLY

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(judged_only=self.judged_only)
        retrieved, relevant, found = _set_counts(batch, self.relevance_threshold)
        return _divide(found * found, retrieved * relevant)


@attrs.frozen
class RelativePrecisionAtK(_Ranked):
    """|D_k ∩ Rel| / min(k, R): precision up to R, recall after; 0 when R = 0
    (trec_eval relative_P_k)."""

    alias: ClassVar[str] = "retrieval-relative-precision-at-k"
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        threshold = self.relevance_threshold
        found = _found_at_k(batch, threshold, self.k)
        best = np.minimum(batch.cutoffs(self.k), batch.num_relevant(threshold))
        return _divide(found.astype(np.float64), best.astype(np.float64))


@attrs.frozen
class ElevenPointAverage(_Ranked):
    """Mean interpolated precision at recall 0, 0.1, ..., 1 (trec_eval 11pt_avg); ``rounding``
    as for retrieval-auc-pr."""

    alias: ClassVar[str] = "retrieval-11pt-avg"
    relevance_threshold: float = _threshold()
    rounding: str = attrs.field(default="trec_eval9", validator=choice(*ROUNDINGS), kw_only=True)

    def score(self, batch: Batch) -> FloatArray:
        points = _eleven_points(batch, self.relevance_threshold, self.rounding)
        return row_sums(points[:, ::-1]) / points.shape[1]  # trec_eval sums from recall 1 down


@attrs.frozen
class RPrecisionMultiple(_Ranked):
    """Precision at rank ⌊multiplier·R + 0.9⌋ (dividing by that rank even when fewer were
    retrieved); 0 when that rank is 0 (trec_eval Rprec_mult_<multiplier>)."""

    alias: ClassVar[str] = "retrieval-rprec-mult"
    multiplier: float = attrs.field(
        default=1.0, validator=bounded_number(0, exclusive_minimum=True), kw_only=True
    )
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        threshold = self.relevance_threshold
        num_rel = batch.num_relevant(threshold).astype(np.float64)
        cutoff = (self.multiplier * num_rel + 0.9).astype(np.int64)
        found = _found_within(batch, threshold, cutoff)
        return _divide(found.astype(np.float64), cutoff.astype(np.float64))


def _gain_arrays(batch: Batch, gains: GainMap | None, levels: str) -> tuple[FloatArray, FloatArray]:
    """(gain at each rank, the ideal ranking's gains; ``levels`` as retrieval-ndcg-at-k's) with ``gains``
    applied: a ``gains`` parameter (as retrieval-ndcg-at-k's; trec_eval's ``G.1=3,2=9``)
    maps labels to gains of their own, the other labels keep their own gain."""
    return _ranked_gains(batch, "linear", gains, levels), _ideal_gains(
        batch, "linear", gains, levels
    )


class _Gained(_Ranked):
    """trec_eval's measures over a gain per label (ndcg_rel, Rndcg, G): a sample whose
    ideal gains sum beyond a float64 is an error naming its largest label, not a NaN or
    a silent 0."""

    gains: GainMap | None
    levels: str

    def check(self, batch: Batch) -> Iterator[Problem]:
        largest = max([batch.max_label, *(abs(gain) for _, gain in self.gains or ())])
        if largest * max(batch.label_values.shape[1], 1) < _SUMS_FIT:
            return iter(())  # (the common case: no sum of these can overflow)
        _, ideal = _gain_arrays(batch, self.gains, self.levels)
        with np.errstate(over="ignore"):  # (an overflow is what this looks for)
            total = row_sums(ideal)
        return _overflowed(batch, total, f"{self.alias}'s gains")


#: Gains whose sum over a sample's labels stays below this fit a float64, with room.
_SUMS_FIT = 1e300


@attrs.frozen
class NDCGRel(_Gained):
    """nDCG averaged over the documents with gain > 0: nDCG at the rank of each one
    retrieved, DCG / IDCG of the whole ranking for each one missed (trec_eval ndcg_rel)."""

    alias: ClassVar[str] = "retrieval-ndcg-rel"
    gains: GainMap | None = attrs.field(default=None, converter=_gain_map, kw_only=True)
    levels: str = _LEVELS

    def score(self, batch: Batch) -> FloatArray:
        gains, ideal_gains = _gain_arrays(batch, self.gains, self.levels)
        width = gains.shape[1]
        dcg = _cumulative_dcg(batch, self.gains, levels=self.levels)
        idcg = _cumulative_dcg(batch, self.gains, ideal=True, levels=self.levels)
        at_rank = np.minimum(batch.ranks, idcg.shape[1] - 1)  # IDCG stops growing after R
        with np.errstate(divide="ignore", invalid="ignore"):
            ndcg = np.where(gains > 0, dcg[:, 1:] / idcg[:, at_rank], 0.0)
            num_rel = (ideal_gains > 0).sum(axis=1)
            missed = (num_rel - (gains > 0).sum(axis=1)).astype(np.float64)
            total = row_sums(ndcg) + missed * dcg[:, width] / idcg[:, -1]
        return np.where(total > 0, total / np.maximum(num_rel, 1), 0.0)


@attrs.frozen
class RNDCG(_Gained):
    """nDCG averaged over the R levels (each rank where the ideal gain drops, R counting
    gains > 0) and the end of a ranking longer than R + 1; 0 when no label reaches the
    threshold (trec_eval Rndcg)."""

    alias: ClassVar[str] = "retrieval-rndcg"
    relevance_threshold: float = _threshold()
    gains: GainMap | None = attrs.field(default=None, converter=_gain_map, kw_only=True)
    levels: str = _LEVELS

    def score(self, batch: Batch) -> FloatArray:
        _, ideal = _gain_arrays(batch, self.gains, self.levels)
        if ideal.shape[1] == 0:
            return np.zeros(len(batch))
        dcg = _cumulative_dcg(batch, self.gains, levels=self.levels)
        idcg = _cumulative_dcg(batch, self.gains, ideal=True, levels=self.levels)[:, 1:]
        following = np.concatenate([ideal[:, 1:], np.zeros((len(batch), 1))], axis=1)
        levels = (ideal > 0) & (ideal != following)  # ideal gain drops after this rank
        ranks = np.arange(1, ideal.shape[1] + 1)
        reached = np.minimum(ranks[None, :], batch.lengths[:, None])
        positive = (ideal > 0).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ndcg = np.where(levels, np.take_along_axis(dcg, reached, axis=1) / idcg, 0.0)
            end = batch.lengths > positive + 1  # trec_eval's implied level at num_ret
            final = dcg[np.arange(len(batch)), batch.lengths] / idcg[:, -1]
            total = row_sums(ndcg) + np.where(end, final, 0.0)
            value = total / (levels.sum(axis=1) + end)
        scored = (positive > 0) & (batch.num_relevant(self.relevance_threshold) > 0)
        return np.where(scored, value, 0.0)


@attrs.frozen
class BinG(_Ranked):
    """Σ over relevant retrieved documents of 1 / log2(2 + non-relevant ranked above), over
    R (trec_eval binG)."""

    alias: ClassVar[str] = "retrieval-bing"
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        relevant = batch.relevant(self.relevance_threshold)
        rows, columns = np.nonzero(relevant)
        nonrel_above = columns + 1 - batch.found(self.relevance_threshold)[rows, columns]
        credit = 1.0 / np.log2(2.0 + nonrel_above)
        num_rel = batch.num_relevant(self.relevance_threshold).astype(np.float64)
        return _divide(_row_sums_at(relevant, credit), num_rel)


@attrs.frozen
class G(_Gained):
    """Gain of each retrieved document discounted by log2(2 + ideal cost - gain so far),
    summed over the ideal total gain (trec_eval G)."""

    alias: ClassVar[str] = "retrieval-g"
    gains: GainMap | None = attrs.field(default=None, converter=_gain_map, kw_only=True)
    levels: str = _LEVELS

    def score(self, batch: Batch) -> FloatArray:
        gains, ideal_gains = _gain_arrays(batch, self.gains, self.levels)
        ideal = _to_width(ideal_gains, gains.shape[1])
        cost = np.cumsum(np.maximum(ideal, 1.0), axis=1)  # each rank costs at least 1
        gained = gains != 0
        rows, columns = np.nonzero(gained)
        so_far = np.cumsum(gains, axis=1)[rows, columns]
        argument = 2.0 + cost[rows, columns] - so_far
        with np.errstate(divide="ignore", invalid="ignore"):
            discount = np.log2(argument)
            discount[argument < 0] = _C_LOG_OF_NEGATIVE
            credit = gains[rows, columns] / discount
        return _divide(_row_sums_at(gained, credit), row_sums(ideal_gains))


@attrs.frozen
class Utility(_Ranked):
    """Set utility: a·num_rel_ret + b·(num_ret - num_rel_ret) + c·(R - num_rel_ret), with
    trec_eval's defaults a = 1, b = -1, c = 0 (trec_eval utility)."""

    alias: ClassVar[str] = "retrieval-utility"
    relevant_retrieved: float = attrs.field(default=1.0, validator=finite_number, kw_only=True)
    nonrelevant_retrieved: float = attrs.field(default=-1.0, validator=finite_number, kw_only=True)
    relevant_missed: float = attrs.field(default=0.0, validator=finite_number, kw_only=True)
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        retrieved, relevant, found = _set_counts(batch, self.relevance_threshold)
        return (
            self.relevant_retrieved * found
            + self.nonrelevant_retrieved * (retrieved - found)
            + self.relevant_missed * (relevant - found)
        )


@attrs.frozen
class UnjudgedAtK(_Ranked):
    """Share of the top k without a label ≥ 0 (unlabelled, or label < 0), dividing by k
    (trec_eval 10 unj_k)."""

    alias: ClassVar[str] = "retrieval-unjudged-at-k"
    higher_is_better: ClassVar[bool] = False
    k: int | None = optional_k()

    def score(self, batch: Batch) -> FloatArray:
        with np.errstate(invalid="ignore"):
            unjudged = ~(batch.ranked_labels >= 0) & batch.top_k(self.k)
        return unjudged.sum(axis=1) / batch.cutoffs(self.k).astype(np.float64)
