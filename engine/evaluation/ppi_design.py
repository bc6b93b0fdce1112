"""Prediction-powered inference of a mean when the labelled units were drawn by a design
other than a simple random sample (:mod:`engine.analysis.sampling`): weighted as drawn.

**Stratified** (StratPPI: Fisch et al., "Stratified Prediction-Powered Inference for
Hybrid Language Model Evaluation", NeurIPS 2024): in each stratum h, of weight
``w_h = (n_h + N_h) / (n + N)`` (its share of the units), the PPI++ estimate of
:func:`engine.evaluation.ppi.ppi_mean`; then

- θ = Σ_h w_h θ_h, with θ_h = λ mean(ŷᵘ_h) + mean(y_h - λ ŷ_h);
- se² = Σ_h w_h² se_h², with se_h² = λ² sd(ŷᵘ_h)²/N_h + sd(y_h - λ ŷ_h)²/n_h;
- one λ for every stratum, PPI++'s tuning summed over them (it minimises se² as PPI++'s
  minimises its variance): λ = Σ_h w_h² cov_h(y, ŷ)/n_h / Σ_h w_h² (1 + n_h/N_h)
  var_h(ŷ and ŷᵘ together)/n_h, clipped to [0, 1] (divisors as ``ppi_py``: n_h; n_h + N_h - 1);
  ``lam="stratum"`` tunes a λ_h in each stratum instead (Fisch et al.'s form), which
  covers less often when strata have few labels (benchmarks/ppi_design_simulation.py);

a stratum labelled whole (N_h = 0) contributes its classical mean (λ_h = 0). With one
stratum this is ``ppi_mean`` (= ``ppi_py``) exactly.

**Unequal probabilities** (Zrnic and Candès, "Active Statistical Inference", ICML 2024):
each of the M units was labelled independently (ξ_i = 1) with probability π_i (Poisson
sampling); over every unit, labelled or not,

- z_i = λ ŷ_i + ξ_i (y_i - λ ŷ_i) / π_i (Horvitz-Thompson), θ = mean(z), se = sd(z)/√M
  (divisor M);
- λ minimises sd(z): with a_i = ŷ_i (1 - ξ_i/π_i) and b_i = ξ_i y_i/π_i (z = b + λa),
  λ = -cov(a, b)/var(a), clipped to [0, 1] (0 when var(a) = 0);
- Hájek (``hajek=True``): the rectifier's weighted mean R = Σ ξ_i r_i/π_i / Σ ξ_i/π_i
  (r = y - λŷ) in place of its Horvitz-Thompson mean: θ = λ mean(ŷ) + R, and se from the
  linearised z_i = λ ŷ_i + (M / Σ ξ/π) ξ_i (r_i - R)/π_i.

Valid for any π_i > 0 fixed before the draw; the closer π_i follows the judge's error
|y - ŷ|, the narrower. λ = 0 gives the human-only (design-weighted) estimate. Functions
work on the last axis, as :mod:`engine.evaluation.ppi`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.evaluation.ppi import (
    Estimate,
    MetricPPI,
    classical_mean,
    estimate_metrics,
    ppi_mean,
    z_value,
)

__all__ = [
    "estimate_with_design",
    "ipw_ppi_mean",
    "ipw_ppi_population",
    "shared_lambda",
    "stratified_ppi_mean",
    "stratified_ppi_parts",
    "weighted_metrics",
]

FloatArray = npt.NDArray[np.float64]
Part = tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]


def _f(values: npt.ArrayLike) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def _scalar(value: FloatArray) -> FloatArray | float:
    return float(value) if np.ndim(value) == 0 else value


def shared_lambda(parts: Sequence[Part]) -> FloatArray:
    """The one λ of stratified PPI (see the module's docstring); strata labelled whole
    take no part."""
    sizes = [(_f(y).shape[-1], _f(u).shape[-1]) for y, _, u in parts]
    total = sum(n + big_n for n, big_n in sizes)
    top: FloatArray | float = 0.0
    bottom: FloatArray | float = 0.0
    for (y, yhat, unlabelled), (n, big_n) in zip(parts, sizes, strict=True):
        if big_n == 0:
            continue
        y, yhat = _f(y), _f(yhat)
        weight = ((n + big_n) / total) ** 2 / n
        covariance = ((y - y.mean(axis=-1, keepdims=True))
                      * (yhat - yhat.mean(axis=-1, keepdims=True))).mean(axis=-1)  # fmt: skip
        every = np.concatenate([yhat, _f(unlabelled)], axis=-1)
        top = top + weight * covariance
        bottom = bottom + weight * (1 + n / big_n) * every.var(axis=-1, ddof=1)
    top, bottom = _f(top), _f(bottom)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(np.where(bottom > 0, top / bottom, 0.0), 0.0, 1.0)


def stratified_ppi_parts(
    parts: Sequence[Part],
    *,
    level: float = 0.95,
    lam: float | npt.ArrayLike | str | None = None,
) -> Estimate:
    """StratPPI from per-stratum ``(y_h, yhat_h, yhat_unlabelled_h)`` (each may be a
    stack, shape ``(..., n_h)``); ``lam`` None tunes one λ for every stratum, "stratum"
    one in each, a number fixes it. The Estimate's ``lam`` is that λ (the strata's λ_h
    averaged by weight with "stratum"; 0 when every stratum is labelled whole)."""
    if not parts:
        raise ValueError("stratified PPI needs at least one stratum")
    z = z_value(level)
    sizes = [(_f(y).shape[-1], _f(u).shape[-1]) for y, _, u in parts]
    total = sum(n + big_n for n, big_n in sizes)
    if lam is None:
        lam = shared_lambda(parts)
    mean: FloatArray | float = 0.0
    variance: FloatArray | float = 0.0
    lams: FloatArray | float = 0.0
    tuned = 0.0  # the weight of the strata with a lambda
    for (y, yhat, unlabelled), (n, big_n) in zip(parts, sizes, strict=True):
        weight = (n + big_n) / total
        if big_n == 0:
            found = classical_mean(y, level=level)
        else:
            own = None if isinstance(lam, str) else lam
            found = ppi_mean(y, yhat, unlabelled, level=level, lam=own)
            lams, tuned = lams + weight * _f(found.lam), tuned + weight
        error = (_f(found.high) - _f(found.low)) / (2 * z)
        mean = mean + weight * _f(found.mean)
        variance = variance + weight**2 * error**2
    lam_mean = _f(lams) / tuned if tuned else _f(0.0)
    n_all = sum(n for n, _ in sizes)
    half = z * np.sqrt(_f(variance))
    middle = _f(mean)
    return Estimate(_scalar(middle), _scalar(middle - half), _scalar(middle + half),
                    _scalar(lam_mean), n_all, total - n_all)  # fmt: skip


def stratified_ppi_mean(
    y: npt.ArrayLike,
    yhat: npt.ArrayLike,
    strata: npt.ArrayLike,
    yhat_unlabelled: npt.ArrayLike,
    strata_unlabelled: npt.ArrayLike,
    *,
    level: float = 0.95,
    lam: float | str | None = None,
) -> Estimate:
    """StratPPI of 1-d data: ``strata`` label the labelled units, ``strata_unlabelled``
    the others; every stratum needs at least 2 labelled units."""
    y, yhat, unlabelled = _f(y), _f(yhat), _f(yhat_unlabelled)
    labels, others = np.asarray(strata), np.asarray(strata_unlabelled)
    if labels.shape != y.shape or others.shape != unlabelled.shape:
        raise ValueError("one stratum per unit")
    parts = []
    for name in np.unique(np.concatenate([labels, others])):
        at = labels == name
        if at.sum() < 2:
            raise ValueError(
                f"stratum {str(name)!r}: PPI needs at least 2 labelled units, got {int(at.sum())}"
            )
        parts.append((y[at], yhat[at], unlabelled[others == name]))
    return stratified_ppi_parts(parts, level=level, lam=lam)


def ipw_ppi_population(
    y: npt.ArrayLike,
    yhat: npt.ArrayLike,
    labelled: npt.ArrayLike,
    probability: npt.ArrayLike,
    *,
    level: float = 0.95,
    lam: float | npt.ArrayLike | None = None,
    hajek: bool = False,
) -> Estimate:
    """The inverse-probability-weighted PPI estimate over M units (last axis): ``yhat``
    on every unit, ``y`` read where ``labelled`` (anything, NaN too, elsewhere),
    ``probability`` π_i > 0 where labelled."""
    yhat, xi = _f(yhat), np.asarray(labelled, dtype=np.bool_)
    pi = np.where(xi, _f(probability), 1.0)
    if (pi <= 0).any() or (pi > 1).any():
        raise ValueError("inclusion probabilities must be in (0, 1]")
    y = np.where(xi, _f(y), 0.0)
    big_m = yhat.shape[-1]
    n = xi.sum(axis=-1)
    if np.any(n < 2):
        raise ValueError("PPI needs at least 2 labelled units")
    w = xi / pi
    a, b = yhat * (1 - w), w * y
    if lam is None:
        a_c = a - a.mean(axis=-1, keepdims=True)
        b_c = b - b.mean(axis=-1, keepdims=True)
        var_a = (a_c**2).mean(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            lams = np.clip(np.where(var_a > 0, -(a_c * b_c).mean(axis=-1) / var_a, 0.0), 0, 1)
    else:
        lams = np.broadcast_to(_f(lam), a.shape[:-1]).astype(np.float64)
    tuned = lams[..., None]
    if hajek:
        total_w = w.sum(axis=-1, keepdims=True)
        r = y - tuned * yhat
        ratio = (w * r).sum(axis=-1, keepdims=True) / total_w
        mean = (tuned * yhat).mean(axis=-1) + ratio[..., 0]
        z = tuned * yhat + (big_m / total_w) * w * (r - ratio)
    else:
        z = b + tuned * a
        mean = z.mean(axis=-1)
    half = z_value(level) * z.std(axis=-1) / np.sqrt(big_m)
    n_all = int(n) if np.ndim(n) == 0 else int(n.max())
    return Estimate(_scalar(mean), _scalar(mean - half), _scalar(mean + half),
                    _scalar(lams), n_all, big_m - n_all)  # fmt: skip


def ipw_ppi_mean(
    y: npt.ArrayLike,
    yhat: npt.ArrayLike,
    probability: npt.ArrayLike,
    yhat_unlabelled: npt.ArrayLike,
    *,
    level: float = 0.95,
    lam: float | None = None,
    hajek: bool = False,
) -> Estimate:
    """:func:`ipw_ppi_population` from the labelled units' ``y``, ``yhat`` and π and the
    other units' ``yhat_unlabelled``, as :func:`engine.evaluation.ppi.ppi_mean` takes them."""
    y, yhat, pi = _f(y), _f(yhat), _f(probability)
    unlabelled = _f(yhat_unlabelled)
    if not y.shape == yhat.shape == pi.shape:
        raise ValueError("y, yhat and probability differ in shape")
    every = np.concatenate([yhat, unlabelled], axis=-1)
    labelled = np.zeros(every.shape, dtype=np.bool_)
    labelled[..., : y.shape[-1]] = True
    pad = np.zeros(unlabelled.shape)
    return ipw_ppi_population(
        np.concatenate([y, pad], axis=-1), every, labelled,
        np.concatenate([pi, pad + 1.0], axis=-1), level=level, lam=lam, hajek=hajek,
    )  # fmt: skip


def weighted_metrics(
    human: Mapping[str, npt.ArrayLike],
    llm: Mapping[str, npt.ArrayLike],
    labelled: npt.ArrayLike,
    *,
    method: str,
    strata: Sequence[str] | None = None,
    probability: npt.ArrayLike | None = None,
    level: float = 0.95,
) -> list[MetricPPI]:
    """Per metric label, the design-weighted PPI estimate from per-unit values (as
    :func:`engine.evaluation.ppi.estimate_metrics`, NaN = NA, left out): ``method``
    "stratified" with each unit's stratum, or "active" with each labelled unit's π
    (π = 1 for units labelled with certainty). The human-only estimate beside it is the
    same estimator with λ = 0 (weighted as drawn too)."""
    mask = np.asarray(labelled, dtype=np.bool_)
    found = []
    for label, values in llm.items():
        yhat, y = _f(values), _f(human[label])
        gold = mask & ~np.isnan(y) & ~np.isnan(yhat)
        rest = ~mask & ~np.isnan(yhat)
        used = gold | rest
        left_out = int(mask.size - used.sum())
        try:
            if method == "stratified":
                assert strata is not None
                names = np.asarray(strata)
                args = (y[gold], yhat[gold], names[gold], yhat[rest], names[rest])
                estimate = stratified_ppi_mean(*args, level=level)
                human_only = stratified_ppi_mean(*args, level=level, lam=0.0)
            elif method == "active":
                assert probability is not None
                pi = np.where(gold, _f(probability), 1.0)[used]
                args4 = (np.where(gold, y, 0.0)[used], yhat[used], gold[used], pi)
                estimate = ipw_ppi_population(*args4, level=level)
                human_only = ipw_ppi_population(*args4, level=level, lam=0.0)
            else:
                raise ValueError(f"no weighting for a {method!r} design")
        except ValueError as error:
            raise ValueError(f"{label}: {error}") from None
        found.append(MetricPPI(label, estimate, human_only, float(yhat[used].mean()), left_out))
    return found


def _queries(count: int) -> str:
    return f"{count} quer{'y' if count == 1 else 'ies'}"


#: The stratum of human-labelled units the design excluded (labelled before it drew).
BEFORE = "(labelled before)"


def estimate_with_design(
    human: Mapping[str, npt.ArrayLike],
    llm: Mapping[str, npt.ArrayLike],
    labelled: npt.ArrayLike,
    ids: Sequence[str],
    sample: Any,
    *,
    level: float = 0.95,
) -> tuple[list[MetricPPI], tuple[str, ...]]:
    """The PPI estimates of :func:`engine.evaluation.ppi.estimate_metrics` (units
    ``ids``) weighted by the design of ``sample`` (an
    :class:`engine.analysis.sampling.DrawnSample` of queries), and notes on how. A uniform
    design gives PPI++ unchanged; human-labelled units the design excluded (labelled
    before it drew) count as labelled with certainty (π = 1; their own stratum); labelled
    units neither drawn nor excluded, or units outside the population drawn from, are
    errors."""
    design = sample.design
    if design.unit != "query":
        raise ValueError("PPI weighs a design of queries; this one drew pairs")
    mask = np.asarray(labelled, dtype=np.bool_)
    drawn = {unit.query_id: unit for unit in sample.units}
    in_sample = np.asarray([i in drawn for i in ids], dtype=np.bool_)
    before = mask & ~in_sample
    notes = [f"weighted by a {design.method} design of {design.drawn} queries drawn from "
             f"{design.population} (seed {design.seed})"]  # fmt: skip
    if before.sum() > design.excluded:
        odd = [i for i, b in zip(ids, before, strict=True) if b][:5]
        raise ValueError(
            f"labelled by people but not in the sample: {_queries(int(before.sum()))} (e.g. "
            f"{', '.join(odd)}), and the design excluded {design.excluded} as labelled before it drew"
        )
    if before.any():
        notes.append("labelled before the draw, counted as labelled with certainty (π = 1): "
                     f"{_queries(int(before.sum()))}")  # fmt: skip
    unanswered = int((in_sample & ~mask).sum())
    if unanswered:
        notes.append(
            f"drawn without a human label (read as missing at random): {_queries(unanswered)}"
        )
    outside = int(len(ids) - before.sum()) - design.population
    if design.method == "uniform":
        return estimate_metrics(human, llm, mask, level=level), tuple(notes)
    if design.method == "stratified":
        strata = [design.assignment.get(i, "") if not b else BEFORE
                  for i, b in zip(ids, before, strict=True)]  # fmt: skip
        lost = [i for i, name in zip(ids, strata, strict=True) if not name][:5]
        if lost:
            raise ValueError(f"queries outside the design's population (e.g. {', '.join(lost)})")
        return weighted_metrics(human, llm, mask, method="stratified", strata=strata,
                                level=level), tuple(notes)  # fmt: skip
    if outside:
        raise ValueError(
            f"the design drew from {design.population} queries, the predictions hold "
            f"{len(ids)} ({int(before.sum())} of them labelled before the draw)"
        )
    pi = np.asarray([drawn[i].probability if i in drawn else 1.0 for i in ids])
    return weighted_metrics(human, llm, mask, method="active", probability=pi,
                            level=level), tuple(notes)  # fmt: skip
