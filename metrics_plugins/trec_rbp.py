"""trec_eval 10's rank-biased precision (``rbp``), its residual (``rbp_resid``) and the
share of unjudged documents at a cutoff (``unj_k``), computed as trec_eval 10 computes them.

trec_eval gives each retrieved document its qrels label; a document without a label
(not in the pool) or with a label < 0 (in the pool but unjudged) is *unjudged*.

RBP (Moffat & Zobel 2008) with persistence ``p``: ``(1 - p) Σ_i gain_i p^(i-1)`` over the
ranking. trec_eval's gain is graded: the label, divided by the sample's largest label when
that exceeds 1 (its gains of levels ``0..max`` normalised to [0, 1]); it ignores ``-l``.
(m_rbp.c takes that minimum and maximum in variables it never initialises; this is what
the code evidently computes, min 0 and max the largest level.) ``relevance_threshold``
switches to binary gain: 1 for a label >= the threshold, else 0.
The residual is the most RBP could still rise if every unjudged document had gain 1, plus
the tail after the last retrieved document: ``p^n + (1 - p) Σ_{i unjudged} p^(i-1)`` for
``n`` retrieved, and 0 when no retrieved document is unjudged (trec_eval sets it only then).

The weights ``p^(i-1)`` are built by repeated multiplication and summed left to right,
as trec_eval's loops do, so the values are trec_eval's to the last bit.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from engine import Batch, MetricParameterError, finite_number, optional_k, row_sums
from metrics_plugins.retrieval import BoolArray, FloatArray, IntArray, _Ranked

__all__ = ["DEFAULT_P", "RBP", "RBPResidual"]

#: trec_eval's default persistence (m_rbp.c, m_rbp_resid.c: ``double p = 0.9``).
DEFAULT_P = 0.9


def _persistence(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator: a persistence probability in [0, 1)."""
    finite_number(instance, attribute, value)
    if not 0.0 <= value < 1.0:
        raise MetricParameterError(f"{attribute.name} must lie in [0, 1), got {value!r}")


def _p() -> float:
    return attrs.field(default=DEFAULT_P, validator=_persistence, kw_only=True)  # type: ignore[no-any-return]


def _weights(p: float, width: int) -> FloatArray:
    """``p^(i-1)`` for ranks i = 1..width+1 (the last: the weight after rank ``width``), by
    repeated multiplication left to right, as trec_eval's ``cur_p = cur_p * p``."""
    steps = np.full(width + 1, p, dtype=np.float64)
    steps[0] = 1.0
    weights: FloatArray = np.multiply.accumulate(steps)
    return weights


def _limit(batch: Batch, k: int | None) -> IntArray:
    """Per-sample rank limit of an uncut metric: ``metadata.k``, else ``k``, else none (a
    rank beyond every ranking). The same as trec_eval's ``-M`` (max docs per topic)."""
    fallback = k if k is not None else np.iinfo(np.int64).max
    return np.where(batch.sample_k > 0, batch.sample_k, fallback)


def _within(batch: Batch, limit: IntArray) -> BoolArray:
    """Retrieved documents ranked within each sample's limit."""
    return batch.valid & (batch.ranks[None, :] <= limit[:, None])


def _unjudged(batch: Batch) -> BoolArray:
    """True at ranks whose document has no label or a label < 0 (and for padding)."""
    with np.errstate(invalid="ignore"):
        return ~(batch.ranked_labels >= 0)


@attrs.frozen
class RBP(_Ranked):
    """Rank-biased precision (1 - p) Σ gain_i p^(i-1), trec_eval's graded gain by default
    (trec_eval 10 rbp), tied scores in trec_eval's order. ir_measures' RBP is cwl_eval's
    (cwl-rbp): over 1,000 ranks, divided by 1 - p^1000, ties in the run's order."""

    alias: ClassVar[str] = "retrieval-rbp"
    uncut_by_default: ClassVar[bool] = True
    k: int | None = optional_k()
    p: float = _p()
    relevance_threshold: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(finite_number), kw_only=True
    )

    def gains(self, batch: Batch) -> FloatArray:
        """Gain at each rank. Default (trec_eval): label / max(1, the sample's largest
        label) for labels > 0, else 0. With ``relevance_threshold``: 1 where the label is
        >= the threshold, else 0 (binary RBP)."""
        if self.relevance_threshold is not None:
            return batch.relevant(self.relevance_threshold).astype(np.float64)
        labels = batch.label_values  # sorted descending, NaN-padded
        top = labels[:, 0] if labels.shape[1] else np.full(len(batch), np.nan)
        scale = np.fmax(top, 1.0)  # NaN (no label) -> 1; trec_eval normalises only past 1
        gains: FloatArray = batch.gains / scale[:, None]
        return gains

    def score(self, batch: Batch) -> FloatArray:
        p = float(self.p)
        width = batch.doc_codes.shape[1]
        within = _within(batch, _limit(batch, self.k))
        terms = np.where(within, self.gains(batch), 0.0) * _weights(p, width)[:width]
        return (1.0 - p) * row_sums(terms)


@attrs.frozen
class RBPResidual(_Ranked):
    """RBP's residual p^n + (1 - p) Σ_{unjudged i} p^(i-1) over n retrieved; 0 when none
    is unjudged (trec_eval 10 rbp_resid)."""

    alias: ClassVar[str] = "retrieval-rbp-resid"
    higher_is_better: ClassVar[bool] = False
    uncut_by_default: ClassVar[bool] = True
    k: int | None = optional_k()
    p: float = _p()

    def score(self, batch: Batch) -> FloatArray:
        p = float(self.p)
        width = batch.doc_codes.shape[1]
        limit = _limit(batch, self.k)
        unjudged = _within(batch, limit) & _unjudged(batch)
        weights = _weights(p, width)
        spread = row_sums(np.where(unjudged, weights[:width], 0.0))
        retrieved = np.minimum(batch.lengths, limit)
        tail = weights[retrieved]  # p^n after the n-th (last counted) document
        return np.where(unjudged.any(axis=1), tail + (1.0 - p) * spread, 0.0)
