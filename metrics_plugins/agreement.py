"""How far a ranking agrees with the order its labels ask for: compatibility (rank-biased
overlap with an ideal ranking, Clarke et al. 2021) and accuracy (the share of relevant and
non-relevant pairs in order), as ir_measures' compat and accuracy providers compute them
(see docs/metrics.md, "Agreement")."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from engine import Batch, bounded_number, choice, optional_k, row_sums
from metrics_plugins.retrieval import (
    BoolArray,
    FloatArray,
    IntArray,
    _Ranked,
    _threshold,
    _uncut_limit,
)

__all__ = ["Accuracy", "Compat"]


@attrs.frozen
class Compat(_Ranked):
    """Compatibility: rank-biased overlap (persistence p) of the ranking with the ideal
    ranking of the judged documents labelled above 0, over depth max(n, |ideal|); with
    ``normalize``, over that of the ideal with itself (ir_measures Compat).

    The ideal orders its documents by label descending, then (``ideal_order="ranked"``)
    as the ranking ranks them, the ones it lacks last in the order the labels list them;
    or (``"scores"``, the compat provider's) by their score in the run, a document the run
    lacks scoring 0, equal scores in the order the labels list them (the scores' order
    from the ranking, their signs from the outputs). ``ties="doc_id_ascending"`` ranks
    tied scores as the compat provider does."""

    alias: ClassVar[str] = "retrieval-compat"
    p: float = attrs.field(default=0.95, validator=bounded_number(0, 1), kw_only=True)
    normalize: bool = attrs.field(
        default=True, validator=attrs.validators.instance_of(bool), kw_only=True
    )
    ideal_order: str = attrs.field(
        default="ranked", validator=choice("ranked", "scores"), kw_only=True
    )
    ties: str = attrs.field(
        default="trec_eval", validator=choice("trec_eval", "doc_id_ascending"), kw_only=True
    )

    def score(self, batch: Batch) -> FloatArray:
        count, width = batch.doc_codes.shape
        rows, codes, labels = batch.labels("relevance")
        ideal = labels > 0
        rows, codes, labels = rows[ideal], codes[ideal], labels[ideal]
        sizes = np.bincount(rows, minlength=count).astype(np.int64)
        starts = np.cumsum(sizes) - sizes
        within_row = np.arange(rows.size) - starts[rows]  # rows are grouped, in order
        column = batch.ranked_at(rows, codes)  # -1: not ranked, the padding column below
        found = column >= 0
        ranks = np.broadcast_to(batch.ranks, (count, width))
        if self.ties == "doc_id_ascending":
            ranks = batch.ranks_ties_ascending()
        if self.ideal_order == "scores":
            order, unranked = _score_order(batch), _unranked_order(batch)
        else:
            order, unranked = ranks, np.full(count, width + 1)
        order = np.concatenate([order, np.zeros((count, 1), np.int64)], axis=1)
        key = np.where(found, order[rows, column], unranked[rows])
        place = np.empty(rows.size, dtype=np.int64)  # 0-based rank in the ideal ranking
        place[np.lexsort((within_row, key, -labels, rows))] = within_row
        # a document is in the overlap from the deeper of its two ranks on
        deeper = np.maximum(ranks[rows[found], column[found]], place[found] + 1)
        depth = np.maximum(batch.lengths, sizes)
        deepest = int(depth.max(initial=0))
        starting = np.bincount(
            rows[found] * (deepest + 1) + deeper, minlength=count * (deepest + 1)
        )
        overlap = np.cumsum(starting.reshape(count, deepest + 1), axis=1)[:, 1:]
        score = _rbo(overlap, depth, self.p)
        if not self.normalize:
            return score
        best = _rbo(np.minimum(np.arange(1, deepest + 1)[None, :], sizes[:, None]), depth, self.p)
        return np.divide(score, best, out=score.copy(), where=best > 0)


def _score_order(batch: Batch) -> IntArray:
    """Each ranked document's place in score order (Q, L): twice the index of its run of
    tied scores, leaving the odd numbers between for a score no ranked document has."""
    return 2 * (np.cumsum(~batch.tied & batch.valid, axis=1) - 1)  # type: ignore[no-any-return]


def _unranked_order(batch: Batch) -> IntArray:
    """Per row, the place in score order of a document the run lacks, which the compat
    provider scores 0: with the run's scores of 0, else between its scores above and
    below 0 (the sign of each score from the ``positive_scores`` and ``zero_scores``
    counts; every score is above 0 where they are null)."""
    rows = np.arange(len(batch))
    above = batch.columns.column("positive_scores").fill_null(np.iinfo(np.int32).max)
    at = batch.columns.column("zero_scores").fill_null(0)
    above, at = above.to_numpy(zero_copy_only=False), at.to_numpy(zero_copy_only=False)
    position = np.where(batch.valid, batch.positions, -1)
    positive = (batch.valid & (position < above[:, None])).sum(axis=1)
    zero = (batch.valid & (position >= above[:, None]) & (position < (above + at)[:, None])).any(
        axis=1
    )
    order = _score_order(batch)
    edge = np.full((len(batch), 1), -2)  # "before the first run", and a column past the last
    padded = np.concatenate([edge, order, edge], axis=1)
    return np.where(zero, padded[rows, positive + 1], padded[rows, positive] + 1)  # type: ignore[no-any-return]


def _rbo(overlap: IntArray, depth: IntArray, p: float) -> FloatArray:
    """Rank-biased overlap from the overlap at each depth d = 1..W (Q, W) over each row's
    ``depth``: ``Σ_d p^(d-1) overlap_d / d`` over ``Σ_d p^(d-1)``, summed left to right as
    the compat provider sums; 0 when ``depth`` is 0."""
    width = overlap.shape[1]
    steps = np.full(width, float(p))
    steps[:1] = 1.0
    weights = np.multiply.accumulate(steps)[None, :]
    within = np.arange(1, width + 1)[None, :] <= depth[:, None]
    terms = np.where(within, weights * overlap / np.arange(1, width + 1)[None, :], 0.0)
    normalizer = row_sums(np.where(within, np.broadcast_to(weights, within.shape), 0.0))
    return np.divide(row_sums(terms), normalizer, out=np.zeros(len(depth)), where=depth > 0)


@attrs.frozen
class Accuracy(_Ranked):
    """The share of (relevant, non-relevant) pairs of the ranking's first k (all without
    k) that rank the relevant one first; an unjudged document is non-relevant; NA without
    a relevant or a non-relevant document there (ir_measures Accuracy, whose provider keeps
    tied scores in the run's order: ``ties="run_order"``)."""

    alias: ClassVar[str] = "retrieval-accuracy"
    uncut_by_default: ClassVar[bool] = True
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()
    ties: str = attrs.field(
        default="trec_eval", validator=choice("trec_eval", "run_order"), kw_only=True
    )

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(self.ties)
        limit = _uncut_limit(batch, self.k)
        within: BoolArray = batch.valid
        if limit is not None:
            within = within & (batch.ranks[None, :] <= limit[:, None])
        relevant = within & (
            np.nan_to_num(batch.ranked_labels, nan=0.0) >= self.relevance_threshold
        )
        other = within & ~relevant
        above = np.cumsum(other, axis=1) - other  # non-relevant documents ranked above
        inverted = np.where(relevant, above, 0).sum(axis=1).astype(np.float64)
        pairs = other.sum(axis=1) * relevant.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(pairs > 0, 1.0 - inverted / pairs, np.nan)
