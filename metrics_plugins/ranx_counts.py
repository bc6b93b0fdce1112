"""Three per-query scores ranx computes and the classic family lacks: the count of
relevant documents in the top k (ranx ``hits@k``), F1 of precision@k and recall@k (ranx
``f1@k``) and rank-biased precision with the label itself as gain (ranx ``rbp.P``).
ranx's names map to them (engine/evaluation/ranx_names.py, docs/metrics.md "Dialects")."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from engine import Batch, finite_number, optional_k
from metrics_plugins.retrieval import FloatArray, _divide, _found_at_k, _Ranked, _threshold
from metrics_plugins.trec_rbp import RBP

__all__ = ["F1AtK", "HitsAtK", "RBPLabelGain"]


@attrs.frozen
class HitsAtK(_Ranked):
    """|top k ∩ Rel|: the number of relevant documents in the top k (ranx hits@k)."""

    alias: ClassVar[str] = "retrieval-hits-at-k"
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        return _found_at_k(batch, self.relevance_threshold, self.k).astype(np.float64)


@attrs.frozen
class F1AtK(_Ranked):
    """2·P·R / (P + R) of P = |top k ∩ Rel| / k and R = |top k ∩ Rel| / |Rel|; 0 when
    nothing relevant is in the top k (ranx f1@k)."""

    alias: ClassVar[str] = "retrieval-f1-at-k"
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        found = _found_at_k(batch, self.relevance_threshold, self.k).astype(np.float64)
        # 2PR / (P + R) with P = f / k, R = f / n is 2f / (k + n)
        cutoffs = batch.cutoffs(self.k).astype(np.float64)
        total = cutoffs + batch.num_relevant(self.relevance_threshold).astype(np.float64)
        return _divide(2.0 * found, total)


@attrs.frozen
class RBPLabelGain(RBP):
    """Rank-biased precision (1 - p) Σ gain_i p^(i-1) over the whole ranking, the gain the
    label itself where it is >= relevance_threshold, else 0 (ranx rbp.P)."""

    alias: ClassVar[str] = "retrieval-rbp-label-gain"
    relevance_threshold: float = attrs.field(default=1.0, validator=finite_number, kw_only=True)

    def gains(self, batch: Batch) -> FloatArray:
        return np.where(batch.relevant(self.relevance_threshold), batch.ranked_labels, 0.0)
