"""cwl_eval's C/W/L measures (Azzopardi, Thomas and Moffat 2019) as cwl_eval 1.0.12
computes them for ir_measures: RBP, scaled DCG, NERR (equations 8 to 11), INST, INSQ and
the bejeweled player model (see docs/metrics.md, "C/W/L family").

A C/W/L measure is a user model: ``c_i`` is the chance that the user goes on from rank i to
rank i + 1, so rank i is examined with weight ``E_i = Π_{j<i} c_j``, and the measure is
the expected gain per examined document, ``Σ_i E_i g_i / Σ_i E_i``, over cwl_eval's
:data:`DEPTH` ranks (documents below are not read; ranks after the last retrieved one
have gain 0 and go on with their ``c``). Sums run over a sample's own ranks left to right,
then its tail past the last retrieved document, so a chunk's width never moves a bit.

Gains: a judged document's label, below 0 read as 0, clipped to ``[min_rel, max_rel]``
and scaled to [0, 1] as ``(label - min_rel) / (max_rel - min_rel)``; for RBP with
``relevance_threshold``, 1 for a label at or above it and 0 below (ir_measures' ``rel``);
an unjudged document 0. Tied scores keep trec_eval's order unless ``ties="run_order"``,
the order the run gave them, which is cwl_eval's.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import attrs
import numpy as np
from scipy.special import zeta

from engine import (
    Batch,
    MetricParameterError,
    bounded_number,
    choice,
    finite_number,
    optional_k,
    row_sums,
)
from metrics_plugins.retrieval import FloatArray, IntArray, _Ranked

__all__ = [
    "BPM",
    "DEPTH",
    "INSQ",
    "INST",
    "NERR8",
    "NERR9",
    "NERR10",
    "NERR11",
    "RBP",
    "SDCG",
]

#: The ranks cwl_eval reads (its ``max_n``, which ir_measures keeps).
DEPTH = 1000


def _ties() -> str:
    return attrs.field(  # type: ignore[no-any-return]
        default="trec_eval", validator=choice("trec_eval", "run_order"), kw_only=True
    )


def _rel_bound(default: float) -> float:
    return attrs.field(default=default, validator=finite_number, kw_only=True)  # type: ignore[no-any-return]


def _patience() -> float:
    return attrs.field(
        default=1.0, validator=bounded_number(0, exclusive_minimum=True), kw_only=True
    )  # type: ignore[no-any-return]


@attrs.frozen
class _CWL(_Ranked):
    """The C/W/L machinery: a measure gives :meth:`continuation`, and :meth:`tail` where its
    ``c`` past the ranking depends on the sample's gain. ``cut`` measures stop at the
    sample's cutoff k (``metadata.k``, else ``k``)."""

    cut: ClassVar[bool] = False
    min_rel: float = _rel_bound(0.0)
    max_rel: float = _rel_bound(1.0)
    ties: str = _ties()

    def __attrs_post_init__(self) -> None:
        if not self.min_rel < self.max_rel:
            raise MetricParameterError(
                f"min_rel must be below max_rel, got {self.min_rel!r} and {self.max_rel!r}"
            )

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        """``c`` at each rank (``ranks``, shape (W,)) given the gain there and the gain up
        to and including it (both (Q, W)) and each sample's cutoff (Q, 1)."""
        raise NotImplementedError

    def gains(self, labels: FloatArray) -> FloatArray:
        """Each ranked document's gain in [0, 1] (labels NaN: unjudged or padding)."""
        clipped = np.clip(np.fmax(labels, 0.0), self.min_rel, self.max_rel)
        scaled = (clipped - self.min_rel) / (self.max_rel - self.min_rel)
        return np.where(np.isnan(labels), 0.0, scaled)

    def tail(self, depth: IntArray, gained: FloatArray, cutoffs: IntArray) -> FloatArray:
        """``Σ_{i>n} Π_{n<j<i} c_j`` over the ranks after ``depth`` n up to :data:`DEPTH`,
        which gain nothing, given the sample's gain ``gained`` and cutoff: by default
        from ``c`` at zero gain, one table per cutoff (:func:`_tails`)."""
        if not self.cut:
            return _tails(self, 0)[depth]
        out = np.empty(depth.shape)
        for k in np.unique(cutoffs):
            rows = cutoffs[:, 0] == k
            out[rows] = _tails(self, int(k))[depth[rows]]
        return out

    def score(self, batch: Batch) -> FloatArray:
        batch = batch.view(self.ties)
        rows = np.arange(len(batch))
        width = min(batch.doc_codes.shape[1], DEPTH)
        ranks = batch.ranks[:width]
        cutoffs = batch.cutoffs(getattr(self, "k", None))[:, None]
        gains = self.gains(batch.ranked_labels[:, :width])
        gained = np.cumsum(gains, axis=1)
        chain = np.ones((len(batch), width + 1))  # chain[:, n]: Π_{j<=n} c_j
        chain[:, 1:] = np.cumprod(self.continuation(ranks, gains, gained, cutoffs), axis=1)
        depth = np.minimum(batch.lengths, DEPTH)
        within = ranks[None, :] <= depth[:, None]
        examined = np.where(within, chain[:, :width], 0.0)
        total = np.concatenate([np.zeros((len(batch), 1)), gained], axis=1)[rows, depth]
        weight = row_sums(examined) + chain[rows, depth] * self.tail(depth, total, cutoffs)
        return row_sums(examined * gains) / weight


@functools.lru_cache(maxsize=256)
def _tails(measure: _CWL, k: int) -> FloatArray:
    """:meth:`_CWL.tail` at every depth 0..DEPTH for cutoff ``k`` of a measure whose ``c``
    past the ranking depends on the rank alone: ``T(n) = 1 + c_{n+1} T(n + 1)``,
    ``T(DEPTH) = 0``."""
    ranks = np.arange(1, DEPTH + 1)
    zero = np.zeros((1, DEPTH))
    going_on = measure.continuation(ranks, zero, zero, np.array([[k]]))[0]
    tails = np.zeros(DEPTH + 1)
    for n in range(DEPTH - 1, -1, -1):
        tails[n] = 1.0 + going_on[n] * tails[n + 1]
    tails.flags.writeable = False
    return tails


def _slowing(ranks: IntArray, shift: Any) -> FloatArray:
    """``((i + s - 1) / (i + s))^2`` at rank i: INSQ's and INST's continuation."""
    return ((ranks + shift - 1.0) / (ranks + shift)) ** 2  # type: ignore[no-any-return]


def _slowing_tail(depth: IntArray, shift: Any) -> FloatArray:
    """:meth:`_CWL.tail` of ``c_i = ((i + s - 1) / (i + s))^2``, whose products telescope:
    ``(n + s)^2 Σ_{t=n}^{DEPTH-1} (t + s)^-2``, the sum a difference of Hurwitz zetas."""
    start = depth + shift
    return start**2 * (zeta(2.0, start) - zeta(2.0, DEPTH + shift))  # type: ignore[no-any-return]


@attrs.frozen
class RBP(_CWL):
    """Rank-biased precision ``Σ_i p^(i-1) g_i`` over ``Σ_{i<=1000} p^(i-1)``, cwl_eval's
    (ir_measures RBP(rel=N, p=P)); retrieval-rbp is trec_eval's."""

    alias: ClassVar[str] = "cwl-rbp"
    p: float = attrs.field(default=0.8, validator=bounded_number(0, 1), kw_only=True)
    relevance_threshold: float | None = attrs.field(
        default=1.0, validator=attrs.validators.optional(finite_number), kw_only=True
    )

    def gains(self, labels: FloatArray) -> FloatArray:
        if self.relevance_threshold is None:
            return super().gains(labels)
        # np.maximum keeps NaN (unjudged, padding), which compares below any threshold
        return (np.maximum(labels, 0.0) >= self.relevance_threshold).astype(np.float64)

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        return np.full(gains.shape, float(self.p))


@attrs.frozen
class SDCG(_CWL):
    """Scaled DCG@k: DCG@k of the scaled gains over ``Σ_{i<=k} 1 / log2(i + 1)`` (cwl_eval
    NDCG-k, ir_measures SDCG)."""

    alias: ClassVar[str] = "cwl-sdcg-at-k"
    cut: ClassVar[bool] = True
    k: int | None = optional_k()

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        steps = np.log2(ranks + 1.0) / np.log2(ranks + 2.0)
        return np.where(ranks < cutoffs, np.broadcast_to(steps, gains.shape), 0.0)


@attrs.frozen
class NERR8(_CWL):
    """Not-quite ERR, equation 8 of Azzopardi et al. (2021): ``c_i = 1 - g_i`` up to rank
    k (ir_measures NERR8)."""

    alias: ClassVar[str] = "cwl-nerr8-at-k"
    cut: ClassVar[bool] = True
    k: int | None = optional_k()

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        return np.where(ranks < cutoffs, 1.0 - gains, 0.0)


@attrs.frozen
class NERR9(_CWL):
    """Not-quite ERR, equation 9: ``c_i = i / (i + 1) (1 - g_i)`` up to rank k (ir_measures
    NERR9)."""

    alias: ClassVar[str] = "cwl-nerr9-at-k"
    cut: ClassVar[bool] = True
    k: int | None = optional_k()

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        return np.where(ranks < cutoffs, ranks / (ranks + 1.0) * (1.0 - gains), 0.0)


@attrs.frozen
class NERR10(_CWL):
    """Not-quite ERR, equation 10: ``c_i = p (1 - g_i)`` (ir_measures NERR10)."""

    alias: ClassVar[str] = "cwl-nerr10"
    p: float = attrs.field(default=0.9, validator=bounded_number(0, 1), kw_only=True)

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        return float(self.p) * (1.0 - gains)


@attrs.frozen
class NERR11(_CWL):
    """Not-quite ERR, equation 11: ``c_i = ((i + 2T - 1) / (i + 2T))^2 (1 - g_i)``
    (ir_measures NERR11)."""

    alias: ClassVar[str] = "cwl-nerr11"
    T: float = _patience()

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        return _slowing(ranks, 2.0 * self.T) * (1.0 - gains)

    def tail(self, depth: IntArray, gained: FloatArray, cutoffs: IntArray) -> FloatArray:
        return _slowing_tail(depth, np.full(depth.shape, 2.0 * self.T))


@attrs.frozen
class INSQ(_CWL):
    """INSQ (Moffat et al. 2012): ``c_i = ((i + 2T - 1) / (i + 2T))^2`` (ir_measures INSQ)."""

    alias: ClassVar[str] = "cwl-insq"
    T: float = _patience()

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        return np.broadcast_to(_slowing(ranks, 2.0 * self.T), gains.shape)

    def tail(self, depth: IntArray, gained: FloatArray, cutoffs: IntArray) -> FloatArray:
        return _slowing_tail(depth, np.full(depth.shape, 2.0 * self.T))


@attrs.frozen
class INST(_CWL):
    """INST (Moffat et al. 2015): ``c_i = ((i + T + T_i - 1) / (i + T + T_i))^2`` with
    ``T_i = T`` less the gain up to rank i (ir_measures INST)."""

    alias: ClassVar[str] = "cwl-inst"
    T: float = _patience()

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        return _slowing(ranks, 2.0 * self.T - gained)

    def tail(self, depth: IntArray, gained: FloatArray, cutoffs: IntArray) -> FloatArray:
        return _slowing_tail(depth, 2.0 * self.T - gained)


@attrs.frozen
class BPM(_CWL):
    """The static bejeweled player model (Zhang et al. 2017): the user reads until the gain
    reaches T or k documents are read; the mean gain of those read (ir_measures BPM)."""

    alias: ClassVar[str] = "cwl-bpm-at-k"
    cut: ClassVar[bool] = True
    k: int | None = optional_k()
    T: float = _patience()

    def continuation(
        self, ranks: IntArray, gains: FloatArray, gained: FloatArray, cutoffs: IntArray
    ) -> FloatArray:
        return ((gained < self.T) & (ranks < cutoffs)).astype(np.float64)

    def tail(self, depth: IntArray, gained: FloatArray, cutoffs: IntArray) -> FloatArray:
        reads_on = np.maximum(np.minimum(cutoffs[:, 0], DEPTH) - depth, 1)
        return np.where(depth < DEPTH, np.where(gained < self.T, reads_on, 1), 0).astype(float)
