"""The classic ranking family, computed as trec_eval computes it (see docs/metrics.md)."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from engine import Batch, MetricBase, choice, finite_number, optional_k

FloatArray = npt.NDArray[np.float64]


def _threshold() -> float:
    return attrs.field(default=1.0, validator=finite_number, kw_only=True)  # type: ignore[no-any-return]


def _discount(width: int) -> FloatArray:
    """1 / log2(rank + 1) for ranks 1..width."""
    return 1.0 / np.log2(np.arange(2, width + 2, dtype=np.float64))


def _divide(numerator: FloatArray, denominator: FloatArray) -> FloatArray:
    """numerator / denominator, 0 where the denominator is 0."""
    out = np.zeros(np.broadcast(numerator, denominator).shape)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


class _Ranked(MetricBase):
    family: ClassVar[str] = "retrieval"
    requires: ClassVar[frozenset[str]] = frozenset({"relevance"})


@attrs.frozen
class HitAtK(_Ranked):
    """1 if any relevant document is in the top k, else 0 (trec_eval success_k)."""

    alias: ClassVar[str] = "retrieval-hit-at-k"
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        hits = batch.relevant(self.relevance_threshold) & batch.top_k(self.k)
        return hits.any(axis=1).astype(np.float64)


@attrs.frozen
class HitRateAtK(HitAtK):
    """Hit rate at k: the same per-sample value as retrieval-hit-at-k."""

    alias: ClassVar[str] = "hit-rate-at-k"


@attrs.frozen
class RecallAtK(_Ranked):
    """|top k ∩ Rel| / |Rel|; 0 when there is no relevant document (trec_eval recall_k)."""

    alias: ClassVar[str] = "retrieval-recall-at-k"
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        found = (batch.relevant(self.relevance_threshold) & batch.top_k(self.k)).sum(axis=1)
        return _divide(
            found.astype(np.float64),
            batch.num_relevant(self.relevance_threshold).astype(np.float64),
        )


@attrs.frozen
class MRR(_Ranked):
    """1 / rank of the first relevant document, 0 if none; no cutoff unless k is given
    (trec_eval recip_rank)."""

    alias: ClassVar[str] = "retrieval-mrr"
    uncut_by_default: ClassVar[bool] = True
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        relevant = batch.relevant(self.relevance_threshold)
        if self.k is not None or (batch.sample_k > 0).any():
            limit = np.where(batch.sample_k > 0, batch.sample_k, self.k or np.iinfo(np.int64).max)
            relevant &= batch.ranks[None, :] <= limit[:, None]
        first = relevant.argmax(axis=1)
        found = relevant.any(axis=1)
        return np.where(found, 1.0 / (first + 1), 0.0)


@attrs.frozen
class NDCGAtK(_Ranked):
    """DCG@k / IDCG@k with IDCG from all judged gains; 0 when IDCG is 0 (trec_eval ndcg_cut_k)."""

    alias: ClassVar[str] = "retrieval-ndcg-at-k"
    k: int | None = optional_k()
    gain: str = attrs.field(
        default="linear", validator=choice("linear", "exponential"), kw_only=True
    )

    def _gain(self, labels: FloatArray) -> FloatArray:
        return labels if self.gain == "linear" else np.exp2(labels) - 1.0

    def score(self, batch: Batch) -> FloatArray:
        cutoffs = batch.cutoffs(self.k)[:, None]
        gains = np.where(batch.top_k(self.k), self._gain(batch.gains), 0.0)
        dcg = gains @ _discount(gains.shape[1]) if gains.shape[1] else np.zeros(len(batch))
        ideal = self._gain(batch.ideal_gains)
        width = ideal.shape[1]
        ideal = np.where(np.arange(1, width + 1)[None, :] <= cutoffs, ideal, 0.0)
        idcg = ideal @ _discount(width) if width else np.zeros(len(batch))
        return _divide(dcg, idcg)
