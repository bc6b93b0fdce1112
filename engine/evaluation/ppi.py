"""Prediction-powered inference of a mean: PPI++ with its power-tuning lambda
(Angelopoulos, Duchi and Zrnic, "PPI++: Efficient Prediction-Powered Inference", 2023,
arXiv 2311.01453), computed as the authors' package ``ppi_py`` computes it
(``ppi_mean_pointestimate`` and ``ppi_mean_ci`` with ``lam=None``, one coordinate).

``y`` are the gold (human) values on the ``n`` labelled units, ``yhat`` the predictions
(an LLM judge's) on the same units, ``yhat_unlabelled`` the predictions on the ``N``
other units:

- ``lam = cov(y, yhat) / ((1 + n/N) var(yhat and yhat_unlabelled together))``, clipped to [0, 1]
  (``cov`` with divisor n, ``var`` with divisor n + N - 1, as ``ppi_py``);
- the estimate ``theta = lam mean(yhat_unlabelled) + mean(y - lam yhat)``;
- its standard error ``sqrt(lam² sd(yhat_unlabelled)²/N + sd(y - lam yhat)²/n)``
  (standard deviations with divisor N and n), and the normal interval around ``theta``.

lam = 0 is the classical (human-only) estimate, lam = 1 plain PPI. Every function works on
the last axis, so a stack of datasets (``shape (..., n)``) is estimated in one call.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

__all__ = [
    "Estimate",
    "MetricPPI",
    "classical_mean",
    "estimate_metrics",
    "power_tuning",
    "ppi_mean",
    "z_value",
]

FloatArray = npt.NDArray[np.float64]


@attrs.frozen
class Estimate:
    """Means and interval bounds (floats, or arrays over the leading axes), with the
    lambda used (0 for a classical estimate) and the numbers of units."""

    mean: FloatArray | float
    low: FloatArray | float
    high: FloatArray | float
    lam: FloatArray | float
    n: int
    N: int = 0

    @property
    def width(self) -> FloatArray | float:
        return self.high - self.low  # type: ignore[operator,no-any-return]


def z_value(level: float) -> float:
    """The standard normal quantile of a two-sided interval at ``level``."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def _float(values: npt.ArrayLike) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def _scalar(value: FloatArray) -> FloatArray | float:
    return float(value) if np.ndim(value) == 0 else value


def power_tuning(
    y: npt.ArrayLike, yhat: npt.ArrayLike, yhat_unlabelled: npt.ArrayLike
) -> FloatArray:
    """PPI++'s lambda along the last axis, clipped to [0, 1] (0 when the predictions do
    not vary: they cannot help)."""
    y, yhat, unlabelled = _float(y), _float(yhat), _float(yhat_unlabelled)
    n, big_n = y.shape[-1], unlabelled.shape[-1]
    covariance = (
        (y - y.mean(axis=-1, keepdims=True)) * (yhat - yhat.mean(axis=-1, keepdims=True))
    ).sum(axis=-1) / n
    every = np.concatenate([yhat, unlabelled], axis=-1)
    variance = every.var(axis=-1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = covariance / ((1 + n / big_n) * variance)
    return np.clip(np.where(variance > 0, lam, 0.0), 0.0, 1.0)


def ppi_mean(
    y: npt.ArrayLike,
    yhat: npt.ArrayLike,
    yhat_unlabelled: npt.ArrayLike,
    *,
    level: float = 0.95,
    lam: float | npt.ArrayLike | None = None,
) -> Estimate:
    """The PPI++ estimate of the mean of ``y`` and its interval at ``level``; ``lam``
    None tunes lambda from the data (``ppi_py``'s default), a number fixes it."""
    y, yhat, unlabelled = _float(y), _float(yhat), _float(yhat_unlabelled)
    if y.shape != yhat.shape:
        raise ValueError(f"y and yhat differ in shape: {y.shape} != {yhat.shape}")
    n, big_n = y.shape[-1], unlabelled.shape[-1]
    if n < 2 or big_n < 1:
        raise ValueError(
            f"PPI needs at least 2 labelled and 1 unlabelled units, got {n} and {big_n}"
        )
    lams = power_tuning(y, yhat, unlabelled) if lam is None else _float(lam)
    tuned = lams[..., None]
    rectifier = y - tuned * yhat
    mean = (lams * unlabelled.mean(axis=-1)) + rectifier.mean(axis=-1)
    error = np.sqrt((tuned * unlabelled).var(axis=-1) / big_n + rectifier.var(axis=-1) / n)
    half = z_value(level) * error
    return Estimate(
        _scalar(mean), _scalar(mean - half), _scalar(mean + half), _scalar(lams), n, big_n
    )


def classical_mean(y: npt.ArrayLike, *, level: float = 0.95) -> Estimate:
    """The mean of ``y`` along the last axis and its normal (CLT) interval, as
    ``ppi_py.classical_mean_ci`` (standard deviation with divisor n)."""
    y = _float(y)
    n = y.shape[-1]
    if n < 1:
        raise ValueError("a mean needs at least one value")
    mean = y.mean(axis=-1)
    half = z_value(level) * y.std(axis=-1) / np.sqrt(n)
    return Estimate(_scalar(mean), _scalar(mean - half), _scalar(mean + half), 0.0, n)


@attrs.frozen
class MetricPPI:
    """One metric's prediction-powered estimate with the classical ones beside it."""

    label: str
    ppi: Estimate
    human: Estimate
    """The mean of the human-label values on the labelled units, with its CLT interval."""
    llm: float
    """The mean of the LLM-label values on every unit used, labelled and unlabelled."""
    left_out: int
    """Units left out because a value was NA (on either side for a labelled unit)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.label,
            "ppi": {
                "mean": self.ppi.mean,
                "ci": [self.ppi.low, self.ppi.high],
                "lambda": self.ppi.lam,
            },
            "human": {
                "mean": self.human.mean,
                "ci": [self.human.low, self.human.high],
                "n": self.human.n,
            },
            "llm": {"mean": self.llm, "n": self.ppi.n + self.ppi.N},
            "labelled": self.ppi.n,
            "unlabelled": self.ppi.N,
            "left_out": self.left_out,
        }


def estimate_metrics(
    human: Mapping[str, npt.ArrayLike],
    llm: Mapping[str, npt.ArrayLike],
    labelled: npt.ArrayLike,
    *,
    level: float = 0.95,
) -> list[MetricPPI]:
    """Per metric label, the PPI++ estimate from per-unit values: ``human[label]`` (read
    where ``labelled``) and ``llm[label]`` (every unit), NaN = NA (left out)."""
    mask = np.asarray(labelled, dtype=np.bool_)
    found = []
    for label, values in llm.items():
        yhat = _float(values)
        y = _float(human[label])
        gold = mask & ~np.isnan(y) & ~np.isnan(yhat)
        rest = ~mask & ~np.isnan(yhat)
        left_out = int(mask.size - gold.sum() - rest.sum())
        if gold.sum() < 2 or not rest.any():
            raise ValueError(
                f"{label}: PPI needs at least 2 labelled and 1 unlabelled units with values, "
                f"got {int(gold.sum())} and {int(rest.sum())}"
            )
        estimate = ppi_mean(y[gold], yhat[gold], yhat[rest], level=level)
        every = yhat[gold | rest]
        found.append(
            MetricPPI(
                label, estimate, classical_mean(y[gold], level=level), float(every.mean()), left_out
            )
        )
    return found


@attrs.frozen
class Report:
    """``Evaluation.ppi``'s answer: one :class:`MetricPPI` per metric (of the system, or
    of its difference from the baseline when ``paired``)."""

    metrics: tuple[MetricPPI, ...]
    level: float
    paired: bool = False
    notes: tuple[str, ...] = ()
    """What the numbers should be read with (e.g. human labels among the predictions)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ppi": {
                "level": self.level,
                "estimand": "difference from the baseline" if self.paired else "mean",
                "notes": list(self.notes),
                "metrics": [m.to_dict() for m in self.metrics],
            }
        }

    def rows(self) -> list[list[str]]:
        """Text cells: metric, PPI mean, its CI, lambda, human-only mean and CI, LLM-only
        mean, labelled n, unlabelled N."""
        return [
            [
                m.label,
                f"{m.ppi.mean:.4f}",
                f"[{m.ppi.low:.4f}, {m.ppi.high:.4f}]",
                f"{m.ppi.lam:.3f}",
                f"{m.human.mean:.4f}",
                f"[{m.human.low:.4f}, {m.human.high:.4f}]",
                f"{m.llm:.4f}",
                str(m.ppi.n),
                str(m.ppi.N),
            ]
            for m in self.metrics
        ]

    def table(self) -> Any:
        """A rich Table of :meth:`rows`."""
        from rich.table import Table

        percent = f"{self.level:.0%}"
        what = "difference from the baseline, " if self.paired else ""
        table = Table(
            title=f"prediction-powered inference ({what}PPI++, {percent} intervals)",
            title_justify="left",
        )
        columns = ("metric", "PPI mean", f"PPI {percent} CI", "lambda", "human mean",
                   f"human {percent} CI", "LLM mean", "labelled", "unlabelled")  # fmt: skip
        for index, column in enumerate(columns):
            table.add_column(column, justify="left" if index == 0 else "right")
        for row in self.rows():
            table.add_row(*row)
        return table
