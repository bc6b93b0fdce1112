"""Novelty and diversity measures over subtopics, computed as ndeval (the TREC Web track's
diversity evaluator, which ir_measures' pyndeval provider wraps) computes them.

A sample's subtopics are its ``expected_output.groups``: a group names a subtopic (a TREC
Web intent, or a claim of the reference answer) and lists the documents relevant to it.
Judgements are binary, as in ndeval. ``N`` is the number of subtopics with at least one
relevant document; a sample with ``N = 0`` scores 0 on every measure, except nNRBP (0/0:
NA), as in ndeval.

At rank i (1-based) a document relevant to subtopic s earns ``(1 - alpha)^c`` for s, c
being how many documents ranked above it are relevant to s; its gain ``g_i`` is the sum
over its subtopics. The ideal ranking is ndeval's greedy one: at each rank, the judged
document of largest gain given those placed before it, ties to the largest doc id (byte
order). Measures at cutoff k:

- alpha-DCG@k: ``Σ_{i<=k} g_i / log2(i + 1)`` divided by ``Σ_{i<=k} N (1 - alpha)^(i-1) /
  log2(i + 1)`` (ndeval's "collection-independent" normalisation); alpha-nDCG@k: divided
  by the same sum over the ideal ranking instead (0 when the ranking's sum is 0);
- ERR-IA@k and nERR-IA@k: the same with discount ``1 / i``;
- NRBP: ``(1 - (1 - alpha) beta) / N · Σ_i g_i beta^(i-1)`` over the whole ranking;
  nNRBP: the same divided by the ideal ranking's;
- MAP-IA: the mean over the N subtopics of the subtopic's average precision;
- P-IA@k: ``Σ_{i<=k} |subtopics of d_i| / (k N)``; subtopic recall@k: the share of the N
  subtopics with a relevant document in the top k.

ndeval divides alpha-DCG@1 and ERR-IA@1 by nothing (its normalising loop starts at rank 2),
so they are the first document's raw gain; slotwise keeps that. ndeval stops at rank 20
(ir_measures refuses a deeper cutoff); these metrics take any k.
"""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import Batch, MetricBase, bounded_number, choice, optional_k, row_sums
from metrics_plugins.retrieval import BoolArray, FloatArray, IntArray, _uncut_limit

__all__ = [
    "MAPIA",
    "NNRBP",
    "NRBP",
    "AlphaDCGAtK",
    "AlphaNDCGAtK",
    "ERRIAAtK",
    "NERRIAAtK",
    "PrecisionIAAtK",
    "SubtopicRecallAtK",
]


def _alpha() -> float:
    return attrs.field(default=0.5, validator=bounded_number(0.0, 1.0), kw_only=True)  # type: ignore[no-any-return]


#: How tied scores are ordered: by doc id descending, as trec_eval (and ndeval's
#: ``-traditional``) order them, or ascending, as ir_measures' pyndeval provider does.
_TIES = attrs.field(
    default="trec_eval", validator=choice("trec_eval", "doc_id_ascending"), kw_only=True
)

#: The order in which a document's gains over its subtopics are added, which decides ties
#: of the greedy ideal ranking when alpha is not a power of 1/2: by subtopic number where
#: every name of the sample is one, as the ndeval binary numbers them (else as listed), or
#: as the sample lists its groups, which is pyndeval's order for qrels read by
#: :func:`engine.io.trec.read_subtopic_qrels` (first appearance in the file).
_SUBTOPIC_ORDER = attrs.field(default="ndeval", validator=choice("ndeval", "listed"), kw_only=True)


@attrs.frozen
class Subtopics:
    """A batch's subtopic judgements as arrays: ``ranked`` (Q, L, S), whether the document
    at each rank is relevant to each of the sample's subtopics; ``judged`` (Q, D, S), the
    same for each judged document, ordered by doc id descending; ``sizes`` (Q, S), the
    relevant documents of each subtopic (0 for padding); ``count`` (Q,), N."""

    ranked: BoolArray
    judged: BoolArray
    sizes: IntArray
    count: IntArray


def subtopics(batch: Batch, metric: _Diversity) -> Subtopics:
    """The batch's :class:`Subtopics` for ``metric``'s ties, subtopic order and
    ``judged_only`` (shared by the family's metrics)."""
    key = ("diversity-subtopics", metric.ties, metric.subtopic_order, metric.judged_only)
    return batch.shared(key, lambda: _subtopics(batch, *key[1:]))  # type: ignore[no-any-return]


def _subtopics(batch: Batch, ties: str, subtopic_order: str, judged_only: bool) -> Subtopics:
    rows = len(batch)
    groups = batch.groups
    local = _subtopic_ranks(batch, subtopic_order)[groups.group]  # index within its sample
    width = int(groups.count.max(initial=0))
    order = _doc_order(batch, groups.code)
    # one entry per (sample, document, subtopic), documents by id descending in a sample
    keys = np.lexsort((local, -order, groups.sample))
    sample, code, local = groups.sample[keys], groups.code[keys], local[keys]
    new_doc = np.ones(sample.size, dtype=np.bool_)
    new_doc[1:] = (sample[1:] != sample[:-1]) | (code[1:] != code[:-1])
    doc_index = np.cumsum(new_doc) - 1  # over all samples
    first_doc = np.zeros(rows, dtype=np.int64)
    docs_per_sample = np.bincount(sample[new_doc], minlength=rows)
    first_doc[1:] = np.cumsum(docs_per_sample)[:-1]
    position = doc_index - first_doc[sample]
    judged = np.zeros((rows, int(docs_per_sample.max(initial=0)), width), dtype=np.bool_)
    judged[sample, position, local] = True
    sizes = judged.sum(axis=1)
    # each ranked document's subtopics: its row of ``judged``, found by (sample, code)
    view = batch.view(ties)
    codes = view.doc_codes.astype(np.int64)
    span = int(max(codes.max(initial=0), code.max(initial=0))) + 1
    doc_keys = sample[new_doc] * span + code[new_doc]
    doc_rows = sample[new_doc] * judged.shape[1] + position[new_doc]
    by_key = np.argsort(doc_keys)
    doc_keys, doc_rows = doc_keys[by_key], doc_rows[by_key]
    ranked_keys = np.arange(rows)[:, None] * span + codes
    at = np.minimum(np.searchsorted(doc_keys, ranked_keys), max(doc_keys.size - 1, 0))
    hit = (codes >= 0) & (doc_keys[at] == ranked_keys) if doc_keys.size else codes < -1
    flat = judged.reshape(rows * judged.shape[1], width)  # (no -1: there may be no subtopic)
    flat = np.concatenate([flat, np.zeros((1, width), np.bool_)])
    ranked = flat[np.where(hit, doc_rows[at] if doc_keys.size else 0, len(flat) - 1)]
    if judged_only:  # pyndeval's: documents with a label, or in a group, stay
        kept = ~np.isnan(view.ranked_labels) | ranked.any(axis=2)
        moved = np.argsort(~kept, axis=1, kind="stable")
        kept = np.take_along_axis(kept, moved, axis=1)
        ranked = np.take_along_axis(ranked, moved[:, :, None], axis=1) & kept[:, :, None]
    return Subtopics(ranked=ranked, judged=judged, sizes=sizes, count=(sizes > 0).sum(axis=1))


def _subtopic_ranks(batch: Batch, order: str) -> IntArray:
    """Each group's place among its sample's groups (indexed over all groups) in the order
    gains are added (see ``subtopic_order``)."""
    groups = batch.groups
    sample = np.repeat(np.arange(len(batch)), groups.count)
    listed = np.arange(sample.size) - (np.cumsum(groups.count) - groups.count)[sample]
    if order == "listed" or not sample.size:
        return listed
    names = pc.list_flatten(batch.columns.column("groups")).field("group")
    numbered = pc.match_substring_regex(names, "^[0-9]+$").to_numpy(zero_copy_only=False)
    number = pc.cast(pc.if_else(numbered, names, "0"), pa.float64()).to_numpy(zero_copy_only=False)
    every = np.bincount(sample, weights=~numbered, minlength=len(batch)) == 0
    key = np.where(every[sample], number, listed)
    ranks = np.empty(sample.size, dtype=np.int64)
    ranks[np.lexsort((key, sample))] = listed
    return ranks


def _doc_order(batch: Batch, codes: IntArray) -> IntArray:
    """For each document code, its position among ``codes``' doc ids sorted by bytes."""
    distinct = np.unique(codes)
    ids = batch.columns.docs.take(distinct)
    rank = np.empty(distinct.size, dtype=np.int64)
    rank[pc.sort_indices(ids).to_numpy()] = np.arange(distinct.size)
    return rank[np.searchsorted(distinct, codes)]  # type: ignore[no-any-return]


def _run_gains(ranked: BoolArray, alpha: float) -> FloatArray:
    """``g_i`` at each rank (Q, L): each subtopic's ``(1 - alpha)^c`` summed, the powers
    by repeated multiplication and the subtopics added in order, as ndeval does."""
    rows, width, count = ranked.shape
    gains = np.zeros((rows, width))
    if not width:
        return gains
    before = np.cumsum(ranked, axis=1) - ranked
    steps = np.full(int(before.max(initial=0)) + 1, 1.0 - alpha)
    steps[0] = 1.0
    powers = np.multiply.accumulate(steps)
    for s in range(count):
        gains += np.where(ranked[:, :, s], powers[before[:, :, s]], 0.0)
    return gains


def _ideal_gains(judged: BoolArray, alpha: float, depth: int | None) -> FloatArray:
    """``g_i`` of ndeval's greedy ideal ranking (Q, depth; None: until no gain is left):
    at each rank the document of largest gain, ties to the first (largest doc id)."""
    rows, docs, count = judged.shape
    weight = np.ones((rows, count))
    placed = np.zeros((rows, docs), dtype=np.bool_)
    out: list[FloatArray] = []
    limit = docs if depth is None else min(depth, docs)
    for _ in range(limit):
        score = np.zeros((rows, docs))
        for s in range(count):
            score += np.where(judged[:, :, s], weight[:, s, None], 0.0)
        score[placed] = -1.0
        best = np.argmax(score, axis=1)
        top = score[np.arange(rows), best]
        if depth is None and not (top > 0).any():
            break
        out.append(np.maximum(top, 0.0))
        placed[np.arange(rows), best] = True
        weight = np.where(judged[np.arange(rows), best], weight * (1.0 - alpha), weight)
    width = len(out) if depth is None else depth
    gains = np.zeros((rows, width))
    if out:
        gains[:, : len(out)] = np.stack(out, axis=1)
    return gains


def _discounted(gains: FloatArray, kind: str) -> FloatArray:
    """Running sums of gains discounted by ``1 / log2(i + 1)`` (``dcg``) or ``1 / i`` (``err``)."""
    ranks = np.arange(1, gains.shape[1] + 1, dtype=np.float64)
    discount = np.log(2.0) / np.log(ranks + 1.0) if kind == "dcg" else 1.0 / ranks
    return np.cumsum(gains * discount, axis=1)


def _ideal_ideal(count: IntArray, alpha: float, width: int, kind: str) -> FloatArray:
    """ndeval's collection-independent normaliser: the running sums for a document
    relevant to all N subtopics at every rank (Q, width)."""
    steps = np.full(width, 1.0 - alpha)
    steps[:1] = 1.0
    gains = count[:, None].astype(np.float64) * np.multiply.accumulate(steps)[None, :]
    return _discounted(gains, kind)


def _ratio(numerator: FloatArray, denominator: FloatArray) -> FloatArray:
    """numerator / denominator, 0 where the numerator is 0 (ndeval's guard)."""
    out = np.zeros(numerator.shape)
    np.divide(numerator, denominator, out=out, where=numerator != 0)
    return out


@attrs.frozen
class _Diversity(MetricBase):
    family: ClassVar[str] = "diversity"
    requires: ClassVar[frozenset[str]] = frozenset({"groups"})
    k: int | None = optional_k()
    ties: str = _TIES
    subtopic_order: str = _SUBTOPIC_ORDER
    judged_only: bool = attrs.field(
        default=False, validator=attrs.validators.instance_of(bool), kw_only=True
    )


@attrs.frozen
class _Discounted(_Diversity):
    """alpha-DCG / ERR-IA and their ideal-normalised forms."""

    kind: ClassVar[str]
    normalised: ClassVar[bool]
    alpha: float = _alpha()

    def score(self, batch: Batch) -> FloatArray:
        found = subtopics(batch, self)
        alpha = float(self.alpha)
        cutoffs = batch.cutoffs(self.k)
        run = batch.at_cutoff(_discounted(_run_gains(found.ranked, alpha), self.kind), cutoffs)
        depth = int(cutoffs.max(initial=0))
        if self.normalised:
            ideal = _discounted(_ideal_gains(found.judged, alpha, depth), self.kind)
            return _ratio(run, batch.at_cutoff(ideal, cutoffs))
        norm = batch.at_cutoff(_ideal_ideal(found.count, alpha, depth, self.kind), cutoffs)
        norm = np.where(cutoffs == 1, 1.0, norm)  # ndeval leaves rank 1 unnormalised
        return np.where(found.count > 0, _ratio(run, norm), 0.0)


@attrs.frozen
class AlphaDCGAtK(_Discounted):
    """alpha-DCG@k divided by the DCG of a document covering every subtopic at each rank
    (ndeval alpha-DCG@k)."""

    alias: ClassVar[str] = "diversity-alpha-dcg-at-k"
    kind: ClassVar[str] = "dcg"
    normalised: ClassVar[bool] = False


@attrs.frozen
class AlphaNDCGAtK(_Discounted):
    """alpha-DCG@k over that of ndeval's greedy ideal ranking (ndeval alpha-nDCG@k)."""

    alias: ClassVar[str] = "diversity-alpha-ndcg-at-k"
    kind: ClassVar[str] = "dcg"
    normalised: ClassVar[bool] = True


@attrs.frozen
class ERRIAAtK(_Discounted):
    """Intent-aware ERR@k divided by that of a document covering every subtopic at each
    rank (ndeval ERR-IA@k)."""

    alias: ClassVar[str] = "diversity-err-ia-at-k"
    kind: ClassVar[str] = "err"
    normalised: ClassVar[bool] = False


@attrs.frozen
class NERRIAAtK(_Discounted):
    """Intent-aware ERR@k over that of ndeval's greedy ideal ranking (ndeval nERR-IA@k)."""

    alias: ClassVar[str] = "diversity-nerr-ia-at-k"
    kind: ClassVar[str] = "err"
    normalised: ClassVar[bool] = True


def _limited(ranked: BoolArray, batch: Batch, k: int | None) -> BoolArray:
    """``ranked`` with the ranks beyond an uncut metric's limit (``metadata.k``, else k)
    cleared."""
    limit = _uncut_limit(batch, k)
    if limit is None:
        return ranked
    within = np.arange(1, ranked.shape[1] + 1)[None, :] <= limit[:, None]
    return ranked & within[:, :, None]


@attrs.frozen
class _RankBiased(_Diversity):
    """NRBP and its ideal-normalised form."""

    uncut_by_default: ClassVar[bool] = True
    normalised: ClassVar[bool]
    alpha: float = _alpha()
    beta: float = attrs.field(default=0.5, validator=bounded_number(0.0, 1.0), kw_only=True)

    def score(self, batch: Batch) -> FloatArray:
        found = subtopics(batch, self)
        alpha, beta = float(self.alpha), float(self.beta)
        gains = _run_gains(_limited(found.ranked, batch, self.k), alpha)
        run = _rank_biased(gains, beta)
        if self.normalised:
            ideal = _rank_biased(_ideal_gains(found.judged, alpha, None), beta)
            with np.errstate(invalid="ignore", divide="ignore"):
                return run / ideal  # type: ignore[no-any-return]
        scale = (1.0 - (1.0 - alpha) * beta) / np.maximum(found.count, 1)
        return np.where(found.count > 0, run * scale, 0.0)


def _rank_biased(gains: FloatArray, beta: float) -> FloatArray:
    """``Σ_i g_i beta^(i-1)``, the powers by repeated multiplication as ndeval's."""
    steps = np.full(gains.shape[1], beta)
    steps[:1] = 1.0
    return row_sums(gains * np.multiply.accumulate(steps)[None, :])


@attrs.frozen
class NRBP(_RankBiased):
    """Novelty- and rank-biased precision, over the whole ranking unless k is given
    (ndeval NRBP)."""

    alias: ClassVar[str] = "diversity-nrbp"
    normalised: ClassVar[bool] = False


@attrs.frozen
class NNRBP(_RankBiased):
    """NRBP over that of ndeval's greedy ideal ranking; NA without a relevant subtopic
    (ndeval nNRBP); with ``zero_without_output``, 0 for a sample without an output, as
    ir_measures reports it."""

    alias: ClassVar[str] = "diversity-nnrbp"
    normalised: ClassVar[bool] = True
    zero_without_output: bool = attrs.field(
        default=False, validator=attrs.validators.instance_of(bool), kw_only=True
    )

    def score(self, batch: Batch) -> FloatArray:
        values = super().score(batch)
        return np.where(batch.has_output, values, 0.0) if self.zero_without_output else values


@attrs.frozen
class MAPIA(_Diversity):
    """Intent-aware average precision: the mean over subtopics of each one's AP, over the
    whole ranking unless k is given (ndeval MAP-IA)."""

    alias: ClassVar[str] = "diversity-map-ia"
    uncut_by_default: ClassVar[bool] = True

    def score(self, batch: Batch) -> FloatArray:
        found = subtopics(batch, self)
        ranked = _limited(found.ranked, batch, self.k)
        ranks = np.arange(1, ranked.shape[1] + 1, dtype=np.float64)[None, :, None]
        terms = np.where(ranked, np.cumsum(ranked, axis=1) / ranks, 0.0)
        precision = np.cumsum(terms, axis=1)[:, -1] if terms.shape[1] else terms.sum(axis=1)
        per_subtopic = _ratio(precision, found.sizes.astype(np.float64))
        return _ratio(row_sums(per_subtopic), found.count.astype(np.float64))


@attrs.frozen
class PrecisionIAAtK(_Diversity):
    """Intent-aware precision@k: subtopic judgements in the top k over k·N (ndeval P-IA@k)."""

    alias: ClassVar[str] = "diversity-precision-ia-at-k"

    def score(self, batch: Batch) -> FloatArray:
        found = subtopics(batch, self)
        cutoffs = batch.cutoffs(self.k)
        hits = batch.at_cutoff(np.cumsum(found.ranked.sum(axis=2), axis=1), cutoffs)
        return _ratio(hits.astype(np.float64), (cutoffs * found.count).astype(np.float64))


@attrs.frozen
class SubtopicRecallAtK(_Diversity):
    """Share of the sample's subtopics with a relevant document in the top k (ndeval
    strec@k)."""

    alias: ClassVar[str] = "diversity-subtopic-recall-at-k"

    def score(self, batch: Batch) -> FloatArray:
        found = subtopics(batch, self)
        cutoffs = batch.cutoffs(self.k)
        seen = np.logical_or.accumulate(found.ranked, axis=1) if found.ranked.shape[1] else None
        covered = (
            batch.at_cutoff(seen.sum(axis=2), cutoffs)
            if seen is not None
            else np.zeros(len(batch), np.int64)
        )
        return _ratio(covered.astype(np.float64), found.count.astype(np.float64))
